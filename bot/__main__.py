"""The command line: `python -m bot run | migrate | chat | bench ...`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from agent.core.errors import ConfigurationError, StartupError
from agent.core.settings import OFFLINE_MODELS, Settings, load_settings
from bot.allocator import tune_allocator
from bot.hosting import require_durable_storage
from bot.logs import configure_logging
from bot.preflight import check_database, check_settings, one_line

logger = logging.getLogger("bot")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bot", description="nikita, a memory-first Telegram bot")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="run the bot (polling, or webhook when WEBHOOK_URL is set)")
    commands.add_parser("migrate", help="upgrade the database schema to the newest revision")
    commands.add_parser("web", help="serve the timeline Mini App on $PORT (for a polling bot)")
    chat = commands.add_parser("chat", help="chat with the agent in the terminal")
    chat.add_argument("--user", default="me", help="who you are (one memory per name)")
    chat.add_argument(
        "--model",
        default=None,
        help="a PydanticAI model string; 'demo' answers offline and writes the memory",
    )
    # The benchmarks live beside the product (bench/), never inside it: `bench ...` runs `python -m bench`.
    bench = commands.add_parser("bench", help="print benchmark figures (python -m bench)", add_help=False)
    bench.add_argument("arguments", nargs=argparse.REMAINDER, help="NAME [--quick] ...")
    reindex = commands.add_parser(
        "reindex", help="rebuild the conversation search indexes and re-embed the knowledge graph"
    )
    reindex.add_argument("--user", default=None, help="only this user key (e.g. telegram:42 or cli:me)")
    reindex.add_argument(
        "--graph-from-facts",
        action="store_true",
        help="write the knowledge graph again from each person's facts, final days' key moments and "
        "the persona's thoughts (nothing else)",
    )
    imports = commands.add_parser(
        "import", help="import a person's ChatGPT or Claude export (docs/import.md)"
    )
    imports.add_argument("path", type=Path, help="the export's zip, or its conversations.json")
    imports.add_argument("--user", type=int, required=True, help="the person's Telegram user id")
    imports.add_argument("--dry-run", action="store_true", help="say what the file holds; store nothing")
    _add_jobs_parser(commands)
    return parser


def _add_jobs_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from jobs.registry import JOB_ALIASES, JOB_NAMES

    jobs = commands.add_parser("jobs", help="run a background job once (post-processing, summaries)")
    jobs_commands = jobs.add_subparsers(dest="jobs_command", required=True)
    run = jobs_commands.add_parser("run", help="run one job now and print its counts")
    run.add_argument("name", choices=(*JOB_NAMES, *JOB_ALIASES), help="which job")
    run.add_argument(
        "--conversation", type=int, default=None, help="postprocess: requeue and process this one"
    )
    run.add_argument(
        "--limit",
        type=int,
        default=None,
        help="at most this many conversations (postprocess) or owners (consolidate)",
    )
    run.add_argument(
        "--sweep",
        action="store_true",
        help="retention: look at every row kept, not the last week's (applies a changed period at once)",
    )


# Commands that keep data: refused on SQLite (and the second set on the embedded graph) where the
# disk is ephemeral (bot/hosting.py). `bench`, `chat` and `reindex` are tools for a machine with a disk.
_KEEPS_DATA = {"run", "web", "migrate", "jobs", "import"}
_OPENS_GRAPH = {"run", "jobs"}
# Commands hosts run unattended (servers, release phase, schedulers): whatever stops them is told in
# one line on stderr, not a traceback.
_ONE_LINE_FAILURES = {"run", "web", "migrate", "jobs"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["bench"]:  # its options, --help included, are the benchmarks' own
        return _bench(arguments[1:])
    args = _parser().parse_args(arguments)
    tune_allocator()  # before the threads that would each take a malloc arena of their own
    try:
        settings = check_settings(load_settings())
        configure_logging(_log_level(args, settings), log_format=settings.log_format)
        _no_banner()
        return _observed(args, settings)
    except ConfigurationError as exc:
        _say(f"configuration error: {exc}")
        return 2
    except StartupError as exc:
        _say(f"start-up check failed: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the process boundary: one line, then exit
        if args.command not in _ONE_LINE_FAILURES:
            raise
        logger.debug("stopped by an error", exc_info=True)
        _say(f"{args.command} failed: {one_line(exc)} (LOG_LEVEL=DEBUG LOG_FORMAT=json logs its traceback)")
        return 1


def _log_level(args: argparse.Namespace, settings: Settings) -> str:
    """LOG_LEVEL; the terminal chat, whose output is the conversation, logs warnings only unless it is set."""
    if args.command == "chat" and "log_level" not in settings.model_fields_set:
        return "WARNING"
    return settings.log_level


def _no_banner() -> None:
    # PydanticAI greets a first run in a terminal with a Logfire banner on stderr; the bot's output
    # is its log lines (and, in `chat`, the conversation). Said in the environment, which PydanticAI
    # reads when it would show the banner: importing it here (a second) would slow every command,
    # those that never run a model included.
    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")


def _bench(arguments: list[str]) -> int:
    """Run the benchmarks of this checkout in a child process and return its exit status."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "bench" / "__main__.py").is_file():
        _say("the benchmarks are in a checkout of the project (bench/), not in an installed bot")
        return 2
    paths = [str(root), os.environ.get("PYTHONPATH", "")]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(path for path in paths if path)}
    return subprocess.run([sys.executable, "-m", "bench", *arguments], env=env, check=False).returncode


def _say(line: str) -> None:
    # One line, so the reason is the last line an operator sees in the host's log.
    print(" ".join(line.split()), file=sys.stderr, flush=True)


def _check_models(settings: Settings) -> None:
    """Build MODEL and SUMMARY_MODEL once: an unknown string or a missing key stops here, in one line."""
    from agent.core.models import build_model

    for setting in ("model", "summary_model"):
        build_model(getattr(settings, setting), settings, setting=setting.upper())


def _observed(args: argparse.Namespace, settings: Settings) -> int:
    """Run the command with OpenTelemetry on when OTEL_* or METRICS_SECRET ask for it (flushed at exit)."""
    from agent.core.observability.setup import configure, shutdown

    configure(settings)
    try:
        return _dispatch(args, settings)
    finally:
        shutdown()


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command in _KEEPS_DATA:
        require_durable_storage(settings, graph=args.command in _OPENS_GRAPH)
    if args.command == "migrate":
        from db.migrate import upgrade_to_head

        asyncio.run(check_database(settings))  # an unreachable database named by its host, in one line
        upgrade_to_head(settings.database_url)
        print("database is at the newest revision")
        return 0
    if args.command == "web":
        settings.require("telegram_bot_token")  # the Mini App's sign-in is signed with it
        from bot.web.serve import serve_pages

        asyncio.run(serve_pages(settings))
        return 0
    if args.command == "chat":
        from bot.cli.chat import run_chat

        chosen = args.model or settings.model
        no_key = settings.anthropic_api_key is None and settings.summary_model.startswith("anthropic:")
        update = {"model": chosen}
        if args.model == "demo" or (no_key and (args.model or chosen in OFFLINE_MODELS)):
            # Trying it offline: summaries, extraction and briefings use the same model.
            update["summary_model"] = chosen
        settings = settings.model_copy(update=update)
        _check_models(settings)
        asyncio.run(run_chat(settings, user_name=args.user))
        return 0
    if args.command == "jobs":
        from bot.cli.jobs import run_jobs_command

        return asyncio.run(
            run_jobs_command(
                settings, args.name, conversation_id=args.conversation, limit=args.limit, sweep=args.sweep
            )
        )
    if args.command == "reindex":
        from bot.cli.reindex import run_graph_rebuild, run_reindex

        if args.graph_from_facts:
            return asyncio.run(run_graph_rebuild(settings, user_key=args.user))
        return asyncio.run(run_reindex(settings, user_key=args.user))
    if args.command == "import":
        from bot.cli.imports import run_import_command

        path = args.path.resolve()
        if not path.is_file():
            _say(f"no such file: {path}")
            return 2
        return asyncio.run(run_import_command(settings, path, telegram_id=args.user, dry_run=args.dry_run))
    if args.command == "run":
        settings.require("telegram_bot_token")
        _check_models(settings)
        if settings.webhook_url:
            settings.require("webhook_secret")  # webhook mode rejects forged updates with it
        from bot.app import serve

        asyncio.run(serve(settings))
        return 0
    raise AssertionError(args.command)


if __name__ == "__main__":
    status = main()
    # Everything is closed by now. The collector's passes over the whole heap at interpreter exit
    # (about a second with the bot's modules loaded) would free nothing the process's end does not.
    gc.freeze()
    sys.exit(status)
