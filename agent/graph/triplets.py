"""Writing facts our extraction already made as graphiti triplets: no second extraction.

graphiti's `add_episode` re-reads an episode with 5-9 model calls (entities, edges, node resolution,
one dedupe and one timestamp call per edge). Post-processing already has the facts, one per line,
typed by the extraction's single call, so each line becomes one edge through graphiti's
`add_triplet`: the edge carries its time (the conversation's end, so no timestamp call), and
graphiti still runs its dedupe/contradiction prompt against the group's similar facts, which ends
a contradicted fact (Paris, then Berlin) with the new fact's time, and folds a repeated fact into the
existing edge (verbatim repeats without any model call). That is at most one call per fact, none
for the first fact of a group. Key moments and thoughts are dated events that a later one neither
ends nor supersedes, so their groups skip that call: each line is saved as its edge directly.

Every edge of a group joins the same two anchor entities (e.g. the user and "the user's life"), so
every earlier fact of the group is a duplicate candidate of a new one. An anchor's id comes from a
fixed key and its name from the persona's name, so renaming the persona (PERSONA_NAME) renames the
anchors of a group at its next write and keeps every fact attached.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from datetime import datetime

from graphiti_core import Graphiti
from graphiti_core.edges import EntityEdge
from graphiti_core.errors import EdgeNotFoundError, NodeNotFoundError
from graphiti_core.nodes import EntityNode, EpisodicNode

from agent.graph.base import Group

_NAMESPACE = uuidlib.UUID("0b7d3f0e-3c55-4d8e-9a57-5f1d7c2a6e11")
# Subject and object of every fact of a group, as fixed keys: their ids derive from these, and
# PERSONA_KEY stands for the persona's name in what the graph shows.
ANCHORS: dict[Group, tuple[str, str]] = {
    "user": ("User", "User's life"),
    "relationship": ("User", "Nikita"),
    "persona": ("Nikita", "Nikita's life"),
}
PERSONA_KEY = "Nikita"
RELATION = "STATES"
_CURRENT = "MATCH ()-[r:RELATES_TO]->() WHERE r.uuid = $uuid SET r.invalid_at = null, r.expired_at = null"


def anchor_name(key: str, persona_name: str) -> str:
    """What an anchor is called: its key with the persona's name in place of PERSONA_KEY."""
    return key.replace(PERSONA_KEY, persona_name.strip() or PERSONA_KEY)


def fact_text(line: str) -> str:
    """A fact as graphiti words them: one sentence, no closing full stop."""
    return line.strip().removesuffix(".").strip()


def _stable(*parts: str) -> str:
    return str(uuidlib.uuid5(_NAMESPACE, "/".join(parts)))


async def _anchor(scope: Graphiti, gid: str, key: str, name: str, now: datetime) -> EntityNode:
    """The group's anchor of `key`, called `name`: created (with its embedding) the first time,
    renamed (and embedded again) when the persona's name changed."""
    node_id = _stable(gid, key)
    try:
        node: EntityNode = await EntityNode.get_by_uuid(scope.driver, node_id)
        if node.name == name:
            return node
        node.name = name
    except NodeNotFoundError:
        node = EntityNode(
            uuid=node_id, name=name, group_id=gid, labels=["Entity"], summary="", created_at=now
        )
    await node.generate_name_embedding(scope.embedder)
    await node.save(scope.driver)
    return node


async def write_facts(
    scope: Graphiti,
    gid: str,
    group: Group,
    episode: EpisodicNode,
    lines: Sequence[str],
    now: datetime,
    *,
    persona_name: str = PERSONA_KEY,
) -> list[str]:
    """Add each line as a fact of the episode's time; returns the edges the episode now states.

    A rerun of the same episode reuses its edges' ids, finds them verbatim and asks no model. A line
    whose words an ended edge holds verbatim (a fact held again) makes that edge current again.
    """
    subject_key, object_key = ANCHORS[group]
    subject = await _anchor(scope, gid, subject_key, anchor_name(subject_key, persona_name), now)
    target = await _anchor(scope, gid, object_key, anchor_name(object_key, persona_name), now)
    stated: list[str] = []
    for index, line in enumerate(lines):
        text = fact_text(line)
        if not text:
            continue
        edge = EntityEdge(
            uuid=_stable(episode.uuid, text, str(index)),
            source_node_uuid=subject.uuid,
            target_node_uuid=target.uuid,
            name=RELATION,
            fact=text,
            group_id=gid,
            episodes=[episode.uuid],
            created_at=now,
            valid_at=episode.valid_at,
        )
        if group != "user":
            stated.append(await _write_dated(scope, edge, episode))
            continue
        result = await scope.add_triplet(subject, edge, target, episode)
        # The first edge is the fact itself, or the existing one it duplicates; the rest were ended.
        edge = result.edges[0]
        if edge.expired_at is not None:
            await scope.driver.execute_query(_CURRENT, uuid=edge.uuid)
        stated.append(edge.uuid)
    return list(dict.fromkeys(stated))


async def _write_dated(scope: Graphiti, edge: EntityEdge, episode: EpisodicNode) -> str:
    """A key moment or a thought: an event of its time, which no later one ends or supersedes, so it
    is saved without graphiti's dedupe/contradiction call. Its id derives from the group and its
    words, so the same words again (in any episode of the group) are the one edge pointing back to
    each episode; an edge no row stands on any more is written anew."""
    edge.uuid = _stable(edge.group_id, edge.fact)
    try:
        existing = await EntityEdge.get_by_uuid(scope.driver, edge.uuid)
    except EdgeNotFoundError:
        existing = None
    if existing is None or existing.expired_at is not None:
        await edge.generate_embedding(scope.embedder)
        await edge.save(scope.driver)
    elif episode.uuid not in existing.episodes:
        existing.episodes.append(episode.uuid)
        await existing.load_fact_embedding(scope.driver)
        await existing.save(scope.driver)
    return edge.uuid
