"""SIGTERM/SIGINT: one owner for the signals in both modes.

uvicorn installs its own handlers while it serves and, after shutting down, raises the signal
again, which would end the process before the inbox drained. Webhook mode therefore runs
`SignalFreeServer`, and our handler tells both uvicorn and the dispatcher to stop. After the first
signal the default handlers are back, so a second Ctrl-C (or the host's SIGKILL) ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Generator

import uvicorn

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signal(callback: Callable[[], None]) -> None:
    """Call `callback` once on the first SIGTERM or SIGINT (in the running loop's thread)."""
    loop = asyncio.get_running_loop()

    def handle(sig: signal.Signals) -> None:
        logger.info("stop signal received; draining", extra={"signal": sig.name})
        for other in STOP_SIGNALS:
            loop.remove_signal_handler(other)
        callback()

    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError):  # no signal handlers on some platforms
            loop.add_signal_handler(sig, handle, sig)


class SignalFreeServer(uvicorn.Server):
    """uvicorn without its own signal handling: `should_exit = True` stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        """Leave the signals to `on_stop_signal`."""
        yield
