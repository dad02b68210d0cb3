"""`python -m bot bench recall PATH...`: evidence recall of conversation_search on LoCoMo-format files.

Each conversation becomes one user's transcript (speaker A = the user, named so in users.name;
speaker B = the assistant, whose name stands in for the persona's name; sessions at their stated
times, UTC). Every question of categories 1-4 is searched (limit 20); results are
expanded to message ids in rank order (a summary contributes none) and compared with the evidence
turns, and with the evidence turns' LoCoMo sessions (see `Scores`). A plain BM25 over messages,
computed in the same run, is the baseline. The benchmark's own annotations (observations, session
summaries) are never indexed.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.core.clock import Clock
from agent.core.settings import Settings
from agent.memory.units import FactUnits
from agent.search.embedders import open_embedder
from agent.search.embeddings import Embedder, InputType
from agent.search.fts import query_terms
from agent.search.indexer import IndexStats
from agent.search.recall import Recall
from bench.common import percentile, scratch_database
from bench.recall_beam import ABILITIES
from bench.recall_context import print_context, run_context_figure
from bench.recall_setup import (
    CATEGORIES,
    IndexCache,
    Loaded,
    evidence_ids,
    load_conversation,
    store_facts,
)
from db.engine import create_engine, session_factory
from db.models import TranscriptMessage

KS = (5, 10, 20)


def _recall_and_rr(ranked: Sequence[object], gold: set[Any]) -> tuple[list[float], float]:
    """(recall@k for each k in KS, reciprocal rank of the first gold item in the top 20)."""
    recalls = [len(gold & set(ranked[:k])) / len(gold) for k in KS]
    first = next((i for i, item in enumerate(ranked[:20], 1) if item in gold), None)
    return recalls, 1 / first if first else 0.0


@dataclass
class Scores:
    """Per-question figures of one system, grouped by category, per turn and per session.

    Turn level: recall@k is the share of the question's evidence turns among the top k results;
    MRR uses the rank of the first evidence turn. Session level: each result stands for the LoCoMo
    session its message came from (`D3:7` is in session 3); recall@k is the share of the
    question's evidence sessions that at least one of the top k results comes from; MRR uses the
    rank of the first result from an evidence session. k counts results, not distinct sessions.
    """

    recall: dict[int, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    rr: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    session_recall: dict[int, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    session_rr: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    latency_ms: list[float] = field(default_factory=list)

    def add(
        self, category: int, ranked: Sequence[int], evidence: set[int], session_of: Mapping[int, int]
    ) -> None:
        """Score one ranked list of message ids against the evidence ids and their sessions."""
        recalls, rr = _recall_and_rr(ranked, evidence)
        sessions = [session_of.get(m) for m in ranked]
        session_recalls, session_rr = _recall_and_rr(sessions, {session_of[m] for m in evidence})
        for k, turn, session in zip(KS, recalls, session_recalls, strict=True):
            self.recall[category][k].append(turn)
            self.session_recall[category][k].append(session)
        self.rr[category].append(rr)
        self.session_rr[category].append(session_rr)

    def row(
        self, categories: Sequence[int], *, level: Literal["turn", "session"] = "turn"
    ) -> tuple[list[float], float, int]:
        """(recall@5/10/20, MRR, n) over the given categories, per turn or per session."""
        if level == "turn":
            recall, reciprocal = self.recall, self.rr
        else:
            recall, reciprocal = self.session_recall, self.session_rr
        values = {k: [v for c in categories for v in recall[c][k]] for k in KS}
        rr = [v for c in categories for v in reciprocal[c]]
        n = len(rr)
        return [statistics.fmean(values[k]) if n else 0.0 for k in KS], statistics.fmean(rr) if n else 0.0, n


def load_samples(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Every sample of the given LoCoMo-format JSON files."""
    return [s for p in paths for s in json.loads(Path(p).read_text(encoding="utf-8"))]


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over messages: the plain lexical baseline."""

    def __init__(self, documents: dict[int, str]) -> None:
        self.ids = list(documents)
        self.terms = [Counter(query_terms_all(documents[i])) for i in self.ids]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.average = statistics.fmean(self.lengths) if self.lengths else 1.0
        df: Counter[str] = Counter()
        for terms in self.terms:
            df.update(terms.keys())
        n = len(self.ids)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def rank(self, query: str, limit: int) -> list[int]:
        """Message ids by descending BM25."""
        words = query_terms(query)
        scored: list[tuple[float, int]] = []
        for doc, terms, length in zip(self.ids, self.terms, self.lengths, strict=True):
            score = 0.0
            for word in words:
                tf = terms.get(word, 0)
                if tf:
                    score += self.idf[word] * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / self.average))
            if score > 0:
                scored.append((score, doc))
        scored.sort(key=lambda pair: (-pair[0], -pair[1]))
        return [doc for _, doc in scored[:limit]]


def query_terms_all(text: str) -> list[str]:
    """Every non-stopword word of a document (with repeats, for term frequencies)."""
    return [w for w in re.findall(r"[^\W_]+", text.lower()) if w in set(query_terms(w))]


class TimedEmbedder:
    """Wraps the bench's embedder to report its throughput (texts per second of embedding)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.texts = 0
        self.seconds = 0.0

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Any:
        """Embed through the wrapped embedder, counting texts and time."""
        started = time.perf_counter()
        out = await self.inner.embed(texts, input_type=input_type)
        self.seconds += time.perf_counter() - started
        self.texts += len(texts)
        return out


async def _build(
    sessions: Any,
    samples: Sequence[dict[str, Any]],
    recalls: Sequence[Recall],
    *,
    facts: bool,
    summaries: bool = False,
) -> tuple[list[Loaded], IndexStats, str]:
    """Store every sample (and its observations as facts, or facts of its person's lines; with
    `summaries`, its days' summaries too) and index it; a line saying what was stored."""
    loaded = [await load_conversation(sessions, s) for s in samples]
    note = await store_facts(sessions, samples, loaded, summaries=summaries) if facts else ""
    stats = IndexStats()
    for item, recall in zip(loaded, recalls, strict=True):
        one = await recall.reindex(now=Clock().now(), user_ids=[item.user_id])
        stats.chunks += one.chunks
        stats.sections += one.sections
        stats.facts += one.facts
    return loaded, stats, note


async def run_recall_bench(
    settings: Settings,
    samples: Sequence[dict[str, Any]],
    *,
    backend: str = "sqlite",
    embedder: Embedder | None = None,
    facts: bool = False,
    cache: IndexCache | None = None,
    cache_key: str | None = None,
) -> None:
    """Load the samples, index them, search every question in each system, print figures.

    `facts`: the samples' observations are stored as facts and every system is also measured with
    facts as retrieval units. `cache` and `cache_key` (SQLite): reuse a database built before with
    the same key, or keep the one built now.
    """
    # The configured EMBEDDER (MiniLM when it is none: the bench compares hybrid with full text).
    chosen = (
        embedder
        or await open_embedder(settings)
        or await open_embedder(settings.model_copy(update={"embedder": "minilm"}))
    )
    assert chosen is not None
    timed = TimedEmbedder(chosen)
    async with scratch_database(backend) as url:
        if url is None:
            print(f"{backend}: PostgreSQL unreachable, skipped")
            return
        engine = create_engine(url)
        sessions = session_factory(engine)
        dialect = engine.dialect.name
        reusable = cache is not None and cache_key is not None and backend == "sqlite"
        restored = cache.restore(cache_key, url) if reusable and cache and cache_key else None
        # In LoCoMo the "assistant" is a person: their name stands in for the persona's.
        persona = [str(s["conversation"]["speaker_b"]) for s in samples]
        # The systems without "+f" leave the keys out: facts and day summaries lift no message.
        keyless = {"search_fact_weight": 0.0, "search_summary_key_boost": 0.0}
        named = [settings.model_copy(update={"persona_name": p, **keyless}) for p in persona]
        # The facts are units of every index (embedded once); only the "+f" systems rank with them.
        units = FactUnits.from_settings(settings)
        hybrids = [
            Recall(settings=s, sessions=sessions, dialect=dialect, embedder=timed, units=units) for s in named
        ]
        started = time.perf_counter()
        if restored is not None:
            loaded, stats, note = (
                restored,
                IndexStats(),
                f"; index reused ({cache.folder if cache else ''}, key {cache_key})",
            )
        else:
            # Day summaries as keys are measured only when they take part (SEARCH_SUMMARY_KEY_BOOST).
            summaries = facts and settings.search_summary_key_boost > 0
            loaded, stats, note = await _build(sessions, samples, hybrids, facts=facts, summaries=summaries)
            if reusable and cache and cache_key:
                await engine.dispose()  # every write is on disk before the file is copied
                cache.keep(cache_key, url, loaded)
        build_seconds = time.perf_counter() - started
        turns = sum(len(x.dia_to_message) for x in loaded)
        built = (
            f"index build {build_seconds:.1f} s ({stats.chunks} chunks, {stats.sections} sections, "
            f"{stats.facts} facts){note}; embedding {timed.texts / max(timed.seconds, 1e-9):.0f} texts/s "
            f"({timed.texts} texts of <= {settings.search_section_tokens} tokens in {timed.seconds:.1f} s)"
        )
        print(
            f"conversations: {len(samples)}, {turns} turns, backend {backend}, "
            f"embedder {chosen.name}; " + (note.lstrip("; ") if restored is not None else built)
        )
        # A fresh Recall's first search, without and with the start-up warm-up the bot does.
        for warm in (False, True):
            first = Recall(settings=named[0], sessions=sessions, dialect=dialect, embedder=timed)
            t0 = time.perf_counter()
            if warm:
                await first.warm_up(now=loaded[0].end)
            t1 = time.perf_counter()
            await first.search(loaded[0].user_id, "what did we talk about last week?", now=loaded[0].end)
            label = f"after warm-up ({(t1 - t0) * 1000:.0f} ms at start)" if warm else "cold"
            print(f"first search, {label}: {(time.perf_counter() - t1) * 1000:.0f} ms")
        searchers: dict[str, list[Recall]] = {
            "hybrid": hybrids,
            "fts-only": [
                Recall(settings=s, sessions=sessions, dialect=dialect, embedder=None) for s in named
            ],
        }
        if facts:
            keys = {
                "search_fact_weight": settings.search_fact_weight or 1.0,
                "search_summary_key_boost": settings.search_summary_key_boost,
            }
            with_facts = [s.model_copy(update=keys) for s in named]
            searchers["hybrid+f"] = [
                Recall(settings=s, sessions=sessions, dialect=dialect, embedder=timed, units=units)
                for s in with_facts
            ]
            searchers["fts+f"] = [
                Recall(settings=s, sessions=sessions, dialect=dialect, embedder=None, units=units)
                for s in with_facts
            ]
            if settings.search_summary_key_boost > 0:
                # Facts alone as keys (the day summaries lift nothing): what each kind of key adds.
                facts_only = [s.model_copy(update={"search_summary_key_boost": 0.0}) for s in with_facts]
                searchers["hybrid+fo"] = [
                    Recall(settings=s, sessions=sessions, dialect=dialect, embedder=timed, units=units)
                    for s in facts_only
                ]
        problems: Counter[str] = Counter()
        systems = {name: Scores() for name in [*searchers, "bm25"]}
        # BEAM's questions carry their ability: the same searches scored per ability too.
        abilities = {name: Scores() for name in systems}
        ability_index = {a: i for i, a in enumerate(ABILITIES)}
        skipped = 0
        spread = 0
        for index, item in enumerate(loaded):
            async with sessions() as session:
                rows = await session.execute(
                    TranscriptMessage.__table__.select().where(TranscriptMessage.user_id == item.user_id)
                )
                bm25 = BM25({r.id: r.content for r in rows})
            for question in item.questions:
                evidence = evidence_ids(question.get("evidence", []), item.dia_to_message, problems)
                if not evidence:
                    skipped += 1
                    continue
                category = int(question["category"])
                ability = ability_index.get(str(question.get("ability")))
                spread += len({item.message_session[m] for m in evidence}) > 1
                for name, recalls in searchers.items():
                    t0 = time.perf_counter()
                    hits = await recalls[index].search(
                        item.user_id, question["question"], now=item.end, limit=20
                    )
                    systems[name].latency_ms.append((time.perf_counter() - t0) * 1000)
                    ids = [h.message_id for h in hits if h.message_id]
                    systems[name].add(category, ids, evidence, item.message_session)
                    if ability is not None:
                        abilities[name].add(ability, ids, evidence, item.message_session)
                t0 = time.perf_counter()
                ranked = bm25.rank(question["question"], 20)
                systems["bm25"].latency_ms.append((time.perf_counter() - t0) * 1000)
                systems["bm25"].add(category, ranked, evidence, item.message_session)
                if ability is not None:
                    abilities["bm25"].add(ability, ranked, evidence, item.message_session)
        context = (
            await run_context_figure(settings, sessions, samples, loaded, embedder=timed, units=units)
            if facts
            else {}
        )
        await engine.dispose()
    print(
        f"evidence: {problems['malformed']} malformed entries, {problems['dangling']} pointing at missing "
        f"turns; {skipped} questions without usable evidence skipped; {spread} questions with evidence "
        "in more than one session"
    )
    print("turn level R@k: share of the evidence turns in the top k; session level S@k: share of the")
    print("evidence sessions that one of the top k results comes from; MRR / SMRR: first hit's rank")
    header = (
        f"{'system':9} {'category':14} {'n':>4} {'R@5':>6} {'R@10':>6} {'R@20':>6} {'MRR':>6}"
        f"  {'S@5':>6} {'S@10':>6} {'S@20':>6} {'SMRR':>6}"
    )
    print(header)
    groups = [([c], f"{c} {CATEGORIES[c]}") for c in CATEGORIES] + [(list(CATEGORIES), "overall")]
    overall: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for name, scores in systems.items():
        for categories, label in groups:
            cells = []
            for level in ("turn", "session"):
                at_k, mrr, n = scores.row(categories, level=level)
                cells.append(" ".join(f"{r:6.3f}" for r in [*at_k, mrr]))
                if label == "overall":
                    overall[level][name] = [*at_k, mrr]
            print(f"{name:9} {label:14} {n:>4} " + "  ".join(cells))
        lat = scores.latency_ms
        print(f"{name:9} latency p50 {percentile(lat, 50):.1f} ms  p95 {percentile(lat, 95):.1f} ms")
    for level, names in (("turn", "R@5 R@10 R@20 MRR"), ("session", "S@5 S@10 S@20 SMRR")):
        base = overall[level]["bm25"]
        for name in [n for n in systems if n != "bm25"]:
            ratios = " ".join(
                f"{a / b:5.2f}x" if b else "  n/a" for a, b in zip(overall[level][name], base, strict=True)
            )
            print(f"{name} / bm25 ({names}): {ratios}")
    print_abilities(abilities)
    if context:
        print_context(context)


def print_abilities(abilities: Mapping[str, Scores]) -> None:
    """R@10 and MRR per BEAM ability, every system beside BM25 (nothing when no question has one)."""
    names = list(ABILITIES)
    present = [i for i in range(len(names)) if any(s.rr.get(i) for s in abilities.values())]
    if not present:
        return
    systems = list(abilities)
    print("per BEAM ability, R@10 / MRR (" + ", ".join(systems) + ")")
    for i in present:
        cells = []
        for name in systems:
            at_k, mrr, n = abilities[name].row([i])
            cells.append(f"{at_k[1]:.3f} / {mrr:.3f}")
        print(f"{names[i]:25} {n:>4}  " + "  ".join(cells))
