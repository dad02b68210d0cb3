"""Every error `jobs/` raises on purpose, each a `NikitaError` (agent/core/errors.py)."""

from __future__ import annotations

from agent.core.errors import NikitaError


class UnknownJobError(NikitaError):
    """No job has that name."""
