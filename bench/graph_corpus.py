"""A generated graph whose right answers are known, for `bench graph`'s latency and relevance figures.

Each of a user's episodes states three everyday facts drawn from 9,600 (a fact told again is one
edge, as graphiti stores it); the user group also holds a fixed set of planted facts, each with a
question whose right answer it is, and one superseded fact (Paris, then Berlin) that must never
come back. The graph is written in bulk with graphiti's own FalkorDB save queries, as graphiti
stores it, so 10,000 episodes load in a minute instead of the hours extraction would take.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from graphiti_core.driver.driver import GraphProvider
from graphiti_core.models.edges.edge_db_queries import get_entity_edge_save_bulk_query

from agent.graph.base import GROUPS, Group, group_id
from agent.graph.embedder import GraphitiEmbedder
from agent.graph.graphiti_backend import GraphitiGraph

START = datetime(2026, 1, 1, 20, 0, tzinfo=UTC)
WORDS = (
    "Paris Berlin Lisbon Acme Sushi Tennis Guitar Python Marathon Coffee Netflix Tokyo Yoga Chess Jazz "
    "Hiking Pizza Rome Madrid Boston Piano Climbing Ramen Vienna Kayak Tea Poetry Salsa Oslo Dublin"
).split()
TEMPLATES = (
    "I talked about {} today",
    "I like {}",
    "We planned a trip to {}",
    "I read an article about {}",
    "My friend went to {}",
    "I am curious about {}",
    "I watched a film about {}",
    "I miss {}",
)
CONTEXTS = (
    "after work",
    "on a rainy Monday",
    "with an old friend",
    "last weekend",
    "during lunch",
    "at night",
    "on the train",
    "with my cousin",
    "before breakfast",
    "on holiday",
    "in the park",
    "at the office",
    "with the neighbours",
    "over the phone",
    "on my birthday",
    "in winter",
    "in the summer",
    "at a party",
    "with colleagues",
    "on Sunday morning",
    "after the gym",
    "at the market",
    "in a cafe",
    "with my mother",
    "on the way home",
    "before bed",
    "at the library",
    "in the kitchen",
    "on a long walk",
    "by the sea",
    "in the mountains",
    "at a concert",
    "with a stranger",
    "at the airport",
    "on a video call",
    "while cooking",
    "in the garden",
    "at the doctor's",
    "with my team",
    "in a bookshop",
)
# Share of a user's episodes per group: conversations mostly teach about the user.
GROUP_SHARE: dict[Group, float] = {"user": 0.5, "relationship": 0.35, "persona": 0.15}
BATCH = 500


@dataclass(frozen=True)
class Question:
    """A question and the planted fact that answers it."""

    text: str
    answer: str


PLANTED = (
    Question("What does my sister do for work?", "My sister Clara works as a nurse in Glasgow"),
    Question("Is there any food I must avoid?", "I am allergic to peanuts"),
    Question("What is my cat called?", "My cat is called Miso"),
    Question("Which instrument do I play?", "I play the cello in a community orchestra"),
    Question("When is my birthday?", "My birthday is on the ninth of March"),
    Question("Where do I work?", "I work as a data analyst at Fernwood Bank"),
    Question("What race am I training for?", "I am training for a half marathon in October"),
    Question("What does Sam do for a living?", "My partner Sam is a carpenter"),
    Question("How do I take my coffee?", "I drink my coffee black without sugar"),
    Question("Where did I grow up?", "I grew up in a small village near Porto"),
    Question("Am I scared of anything?", "I am afraid of flying"),
    Question("When does Lea start school?", "My daughter Lea starts school in September"),
    Question("Which city do I live in now?", "I moved to Berlin"),
    Question("What do I do on Saturdays?", "I volunteer at the animal shelter on Saturdays"),
    Question("Who is my favourite writer?", "My favourite author is Ursula Le Guin"),
    Question("Do I eat meat?", "I stopped eating meat last year"),
)
SUPERSEDED = "I live in Paris"


def episode_facts(rng: random.Random) -> list[tuple[str, str]]:
    """Three facts of one everyday episode, each with the word it is about (9,600 distinct facts)."""
    return [
        (f"{rng.choice(TEMPLATES).format(word)} {rng.choice(CONTEXTS)}", word)
        for word in rng.sample(WORDS, 3)
    ]


class _Embeddings:
    """Each distinct sentence embedded once (the corpus repeats its sentences on purpose)."""

    def __init__(self, embedder: GraphitiEmbedder) -> None:
        self.embedder = embedder
        self.known: dict[str, list[float]] = {}

    async def of(self, texts: list[str]) -> list[list[float]]:
        missing = sorted({t for t in texts if t not in self.known})
        for start in range(0, len(missing), 256):
            chunk = missing[start : start + 256]
            self.known.update(zip(chunk, await self.embedder.create_batch(chunk), strict=True))
        return [self.known[t] for t in texts]


async def load_corpus(graph: GraphitiGraph, user_id: int, episodes: int, rng: random.Random) -> None:
    """Write `episodes` episodes' facts for one user across the three groups, planted facts included."""
    embeddings = _Embeddings(graph.embedder)
    for group in GROUPS:
        gid = group_id(user_id, group)
        scope = await graph.graphiti_for(gid)
        if scope.driver.provider != GraphProvider.FALKORDB:
            raise ValueError("the benchmark corpus is written with FalkorDB's bulk queries")
        names = ["User", *WORDS, *(["Planted"] if group == "user" else [])]
        nodes = {name: str(uuidlib.uuid4()) for name in names}
        await scope.driver.execute_query(
            "UNWIND $nodes AS n CREATE (:Entity {uuid: n.uuid, name: n.name, group_id: $gid, "
            "summary: '', created_at: $at, labels: ['Entity']})",
            nodes=[{"uuid": u, "name": n} for n, u in nodes.items()],
            gid=gid,
            at=START.isoformat(),
        )
        facts: list[tuple[str, str, datetime, datetime | None]] = []
        told: set[str] = set()
        count = round(episodes * GROUP_SHARE[group])
        for index in range(count):
            at = START + timedelta(hours=index)
            for text, word in episode_facts(rng):
                # graphiti folds a fact told again into its first edge: one edge per distinct fact.
                if text not in told:
                    told.add(text)
                    facts.append((text, nodes[word], at, None))
        if group == "user":
            moved = START + timedelta(hours=count // 2)
            facts.append((SUPERSEDED, nodes["Planted"], START, moved))
            for question in PLANTED:
                at = START + timedelta(hours=rng.randrange(max(1, count)))
                facts.append((question.answer, nodes["Planted"], max(at, moved), None))
        await _save_edges(graph, gid, nodes["User"], facts, embeddings)


async def _save_edges(
    graph: GraphitiGraph,
    gid: str,
    speaker: str,
    facts: list[tuple[str, str, datetime, datetime | None]],
    embeddings: _Embeddings,
) -> None:
    scope = await graph.graphiti_for(gid)
    query = get_entity_edge_save_bulk_query(GraphProvider.FALKORDB)
    for start in range(0, len(facts), BATCH):
        chunk = facts[start : start + BATCH]
        vectors = await embeddings.of([text for text, *_ in chunk])
        edges: list[dict[str, Any]] = [
            {
                "uuid": str(uuidlib.uuid4()),
                "source_node_uuid": speaker,
                "target_node_uuid": target,
                "name": "RELATES_TO",
                "fact": text,
                "fact_embedding": vector,
                "group_id": gid,
                "episodes": [],
                "created_at": at.isoformat(),
                "valid_at": at.isoformat(),
                "invalid_at": ended.isoformat() if ended else None,
                "expired_at": ended.isoformat() if ended else None,
            }
            for (text, target, at, ended), vector in zip(chunk, vectors, strict=True)
        ]
        await scope.driver.execute_query(query, entity_edges=edges)
