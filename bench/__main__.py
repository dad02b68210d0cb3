"""The benchmarks' command line: `python -m bench NAME [--quick]`, also reached as `python -m bot bench`.

Each benchmark prints its figures. They run the product with the fake servers of `bench/fakes`, on
throw-away databases; none of them needs a network or a model key.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agent.core.settings import load_settings
from bot.allocator import tune_allocator
from bot.logs import configure_logging
from bot.preflight import check_settings

NAMES = (
    "turn",
    "postprocess",
    "consolidate",
    "context",
    "recall",
    "search",
    "graph",
    "delivery",
    "memory",
    "documents",
    "touchpoints",
    "cost",
    "trip",
    "structure",
    "group",
    "start",
    "profile",
    "extraction",
    "storage",
    "import",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bot bench", description="print benchmark figures")
    parser.add_argument("name", choices=NAMES, help="which benchmark")
    parser.add_argument("paths", nargs="*", help="recall: LoCoMo-format JSON files")
    parser.add_argument(
        "--backend", choices=["sqlite", "postgres"], default="sqlite", help="recall, import: database"
    )
    parser.add_argument(
        "--beam",
        nargs="+",
        action="extend",
        default=[],
        metavar="FOLDER",
        help="recall: BEAM chat folders (chat.json, probing_questions/), or folders of them",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--full", action="store_true", help="storage: 100 people x 90 days (long)")
    parser.add_argument("--big", action="store_true", help="import: a ChatGPT file of about 1 GB (long)")
    parser.add_argument(
        "--calls", action="store_true", help="turn: count Python calls per turn (cProfile) instead of timing"
    )
    parser.add_argument("--verbose", action="store_true", help="trip: list the modules in the order they ran")
    parser.add_argument(
        "--facts", action="store_true", help="recall: also measure with the files' observations as facts"
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="recall: build the index even when a kept one matches"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one benchmark; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.name == "structure":  # read from the source tree alone: no settings, nothing of the product runs
        from bench.structure import run_structure

        return run_structure(Path(__file__).resolve().parents[1])
    tune_allocator()
    settings = check_settings(load_settings())
    configure_logging(settings.log_level, log_format=settings.log_format)
    # Every scratch database is migrated from nothing: the figures, not twenty "Running upgrade" lines.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))
    quick = args.quick
    if args.name == "recall":
        from bench.recall import load_samples, run_recall_bench
        from bench.recall_beam import chat_files, chat_folders, load_chat
        from bench.recall_setup import IndexCache, index_key

        if not args.paths and not args.beam:
            print("bench recall needs LoCoMo-format JSON files or --beam chat folders", file=sys.stderr)
            return 2
        try:
            beam = chat_folders(args.beam)
        except (OSError, ValueError) as error:
            print(f"bench recall: {error}", file=sys.stderr)
            return 2
        samples = load_samples(args.paths) + [load_chat(folder) for folder in beam]
        samples = samples[:1] if quick else samples
        # The bench embeds with EMBEDDER, or MiniLM when it is none (it compares hybrid with full text).
        embedder = settings.embedder if settings.embedder != "none" else "minilm"
        files = [*args.paths, *chat_files(beam)]
        # BEAM carries no licence: its index (which holds its text) is kept outside the checkout.
        kept_in = Path(tempfile.gettempdir()) / "nikita-bench-recall" if beam else None
        cache_folder = kept_in or Path("data") / "bench-recall"
        key = index_key(settings, files, embedder=embedder, facts=args.facts, backend=args.backend)
        asyncio.run(
            run_recall_bench(
                settings,
                samples,
                backend=args.backend,
                facts=args.facts,
                cache=None if args.rebuild else IndexCache(cache_folder),
                cache_key=f"{key}-quick" if quick else key,
            )
        )
    elif args.name == "search":
        from bench.search import run_search_bench

        asyncio.run(run_search_bench(settings, quick=quick))
    elif args.name == "graph":
        from bench.graph import run_graph_bench_command

        asyncio.run(run_graph_bench_command(settings, quick=quick))
    elif args.name == "postprocess":
        from bench.postprocess import run_postprocess_bench

        asyncio.run(run_postprocess_bench(settings, quick=quick))
    elif args.name == "consolidate":
        from bench.consolidate import run_consolidate_bench

        asyncio.run(run_consolidate_bench(settings, quick=quick))
    elif args.name == "delivery":
        from bench.delivery import run_delivery_bench

        asyncio.run(run_delivery_bench(settings, quick=quick))
    elif args.name == "memory":
        from bench.memory import run_memory_bench

        asyncio.run(run_memory_bench(settings, quick=quick))
    elif args.name == "documents":
        from bench.documents import run_documents_bench

        asyncio.run(run_documents_bench(settings, quick=quick))
    elif args.name == "touchpoints":
        from bench.touchpoints import run_touchpoints_bench

        asyncio.run(run_touchpoints_bench(settings, quick=quick))
    elif args.name == "cost":
        from bench.cost import run_cost_bench

        asyncio.run(run_cost_bench(settings, quick=quick))
    elif args.name == "trip":
        from bench.trip import run_trip_bench

        asyncio.run(run_trip_bench(verbose=args.verbose))
    elif args.name == "group":
        from bench.group import run_group_bench

        asyncio.run(run_group_bench(settings, quick=quick))
    elif args.name == "start":
        from bench.start import run_start_bench

        asyncio.run(run_start_bench(settings, quick=quick))
    elif args.name == "extraction":
        from bench.extraction import run_extraction_bench

        asyncio.run(run_extraction_bench(settings, quick=quick))
    elif args.name == "profile":
        from bench.profile import run_profile_bench

        asyncio.run(run_profile_bench(settings, quick=quick))
    elif args.name == "storage":
        from bench.storage import run_storage_bench

        people, days, kept = (100, 90, 30.0) if args.full else (2, 12, 3.0) if quick else (3, 40, 10.0)
        asyncio.run(run_storage_bench(people=people, days=days, retention_days=kept))
    elif args.name == "import":
        from bench.imports import run_import_bench

        asyncio.run(run_import_bench(settings, quick=quick, big=args.big, backend=args.backend))
    elif args.name == "context":
        from bench.context import run_context_bench

        asyncio.run(run_context_bench(settings, quick=quick))
    else:
        from bench.turn import run_turn_bench

        asyncio.run(run_turn_bench(settings, quick=quick, calls=args.calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
