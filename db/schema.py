"""The complete metadata: imports every model module so Alembic and tests see every table."""

from __future__ import annotations

from db.models import Base

__all__ = ["Base"]
