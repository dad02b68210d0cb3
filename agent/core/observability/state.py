"""What telemetry is on in this process: set once at the entry point (`setup.py`), read on every turn.

While nothing is configured every field is None, and each recording function of this package
returns at its first line: the default costs one attribute read, and no part of the OpenTelemetry
SDK is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from agent.core.observability.catalog import Instruments
    from agent.core.observability.sampler import Sampler


@dataclass
class Telemetry:
    """The process's tracer and instruments (None: off), and how much they may record."""

    tracer: Tracer | None = None
    instruments: Instruments | None = None
    # The database gauges (inbox depth, job lag), refreshed before each export or scrape.
    sampler: Sampler | None = None
    # Message text, prompts and tool arguments in spans (TELEMETRY_INCLUDE_CONTENT).
    include_content: bool = False
    # The PydanticAI model string that makes a kind of call, to price its tokens.
    model_for: Callable[[str], str] | None = None
    # GOOGLE_CLOUD_PROJECT: a JSON log line names its trace as Cloud Logging expects.
    cloud_project: str | None = None

    def clear(self) -> None:
        """Everything off again (the object stays: the recording functions hold it)."""
        for item in fields(self):
            setattr(self, item.name, item.default)


current = Telemetry()
