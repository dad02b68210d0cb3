"""Every error `db/` raises on purpose. `db/` imports nothing of `agent/`, so these stand outside
`NikitaError`, on the builtin error whose behaviour they keep."""

from __future__ import annotations


class MigrationError(RuntimeError):
    """The schema upgrade failed; the message is the migration's own last line."""
