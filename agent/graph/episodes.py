"""Writing one episode into a group's graph exactly once, even across crashes and reruns.

An episode's id is derived from its group and source, so a rerun of the same source finds what the
first run wrote. The episode node is saved first with a pending marker in its source description;
only when its facts are written is the marker replaced by the source id. A crash in between leaves
the marker, and the rerun resumes that same episode instead of adding a second one.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from graphiti_core import Graphiti
from graphiti_core.driver.driver import GraphDriver
from graphiti_core.nodes import EpisodeType, EpisodicNode
from graphiti_core.search.search_utils import RELEVANT_SCHEMA_LIMIT

from agent.core.clock import Clock
from agent.graph.base import Group
from agent.graph.triplets import write_facts

PENDING = "pending:"
_NAMESPACE = uuidlib.UUID("6f1c1a52-56a4-4b0e-9a51-1a3f7d0c9e21")


def episode_uuid(group: str, source_id: str) -> str:
    """A stable episode id, so a rerun of the same source finds the episode it already wrote."""
    return str(uuidlib.uuid5(_NAMESPACE, f"{group}/{source_id}"))


@dataclass(frozen=True)
class Episode:
    """One episode to write: its group graph, text, time, source and stable id, and its facts when
    they were already extracted (one per line)."""

    gid: str
    group: Group
    name: str
    body: str
    reference_time: datetime
    source_id: str
    episode_id: str
    facts: Sequence[str] | None


async def find_episode(driver: GraphDriver, episode_id: str) -> EpisodicNode | None:
    """The episode node of this id, if any try ever saved it."""
    found = await EpisodicNode.get_by_uuids(driver, [episode_id])
    return found[0] if found else None


async def write_episode(scope: Graphiti, episode: Episode, *, clock: Clock, persona_name: str) -> None:
    """Write one episode unless already complete; resume it when a previous try left it pending.

    With facts they are written as the episode's triplets (at most one model call each); without,
    graphiti extracts the body, reading the group's recent episodes for entity resolution.
    """
    e = episode
    existing = await find_episode(scope.driver, e.episode_id)
    if existing is not None and not existing.source_description.startswith(PENDING):
        return
    node = existing or EpisodicNode(
        uuid=e.episode_id,
        name=e.name,
        group_id=e.gid,
        labels=[],
        source=EpisodeType.text,
        content=e.body,
        source_description=PENDING + e.source_id,
        created_at=clock.now(),
        valid_at=e.reference_time,
    )
    if existing is None:
        # Written first, marked pending: a crash mid-extraction leaves a marker, and the rerun
        # resumes this same episode instead of adding a second one.
        await node.save(scope.driver)
    if e.facts is not None:
        node.entity_edges = await write_facts(
            scope, e.gid, e.group, node, e.facts, clock.now(), persona_name=persona_name
        )
        node.source_description = e.source_id
        await node.save(scope.driver)
        return
    previous = await scope.retrieve_episodes(
        e.reference_time, last_n=RELEVANT_SCHEMA_LIMIT + 1, group_ids=[e.gid], driver=scope.driver
    )
    await scope.add_episode(
        name=e.name,
        episode_body=e.body,
        source_description=e.source_id,
        reference_time=e.reference_time,
        source=EpisodeType.text,
        group_id=e.gid,
        uuid=e.episode_id,
        previous_episode_uuids=[ep.uuid for ep in previous if ep.uuid != e.episode_id][
            -RELEVANT_SCHEMA_LIMIT:
        ],
    )
    await scope.driver.execute_query(
        "MATCH (e:Episodic {uuid: $uuid}) SET e.source_description = $done",
        uuid=e.episode_id,
        done=e.source_id,
    )
