"""Settings of durable delivery: the inbox lease, polling, shutdown and database retries."""

from __future__ import annotations

from agent.core.settings.base import SettingsGroup


class DeliverySettings(SettingsGroup):
    """INBOX_*, POLLING_TIMEOUT_SECONDS, SHUTDOWN_GRACE_SECONDS, DB_RETRY_SECONDS."""

    # Durable delivery: every update is committed to the inbox before Telegram hears we
    # have it, then worked per chat in order under a lease that another instance takes over when
    # it runs out; transient database errors are retried, SIGTERM drains within the grace period.
    inbox_lease_seconds: float = 20.0
    inbox_poll_seconds: float = 1.0
    inbox_max_attempts: int = 10
    inbox_retention_hours: float = 48.0
    inbox_webhook_wait_seconds: float = 0.0
    polling_timeout_seconds: int = 30
    shutdown_grace_seconds: float = 8.0
    db_retry_seconds: float = 30.0
