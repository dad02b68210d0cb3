"""Real bot processes, a crowd of users writing to them, and the count of what the users notice.

Used by `python -m bot bench delivery` and the fault tests. The bots are `python -m bot run`
processes talking to a fake Bot API and a fake model (both given by the caller; they live in
`tests/fakes`). Each user writes a message, waits for its answer (or gives up after `patience`),
then writes the next. Every message carries a token ("u3-m7") that the fake model echoes back, so
each answer is matched to its message; afterwards the database says what was stored.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import httpx
from sqlalchemy import func, select

from bench.fakes.anthropic_api import last_user_text
from db.engine import create_engine
from db.models import InboxUpdate, TranscriptMessage

ECHO = "echo: "
TOKEN = re.compile(r"u\d+-m\d+")
TOKEN_AND_SECRET = ("123:ABC", "s3cret")


class FakeBotApi(Protocol):
    """What the harness uses of the fake Bot API (bench/fakes/telegram_api.py)."""

    sent: list[Any]  # records with .chat_id, .text and .at (time.monotonic when accepted)

    @property
    def base_url(self) -> str:
        """Where the bots find it."""
        ...

    def user_message(self, user_id: int, text: str) -> dict[str, Any]:
        """Queue a private text message from `user_id`."""
        ...

    def calls_to(self, method: str) -> list[Any]:
        """Recorded calls of one method."""
        ...


def echo(body: dict[str, Any]) -> str:
    """The fake model's answer to a Messages API request: the last user text, echoed."""
    return ECHO + last_user_text(body)


def bot_env(
    *,
    database_url: str,
    telegram_url: str,
    model_url: str,
    port: int | None = None,
    webhook_url: str | None = None,
    **settings: str,
) -> dict[str, str]:
    """The environment of one `python -m bot run` process of a scenario."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TELEGRAM_BOT_TOKEN": TOKEN_AND_SECRET[0],
        "TELEGRAM_API_BASE_URL": telegram_url,
        "MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_API_KEY": "sk-fake",
        "ANTHROPIC_BASE_URL": model_url,
        "SUMMARY_MODEL": "test",
        "ONBOARDING_ENABLED": "false",
        "GRAPH_BACKEND": "none",
        "EMBEDDER": "none",
        "GRAPHITI_TELEMETRY_ENABLED": "false",
        "PTB_TIMEDELTA": "1",
        "LOG_LEVEL": "INFO",
        "POLLING_TIMEOUT_SECONDS": "2",
        "INBOX_LEASE_SECONDS": "3",
        "RATE_LIMIT_PER_MINUTE": "1000",
        "RATE_LIMIT_PER_DAY": "10000",
    }
    env.pop("WEBHOOK_URL", None)
    if port is not None and webhook_url is not None:
        env |= {"PORT": str(port), "WEBHOOK_URL": webhook_url, "WEBHOOK_SECRET": TOKEN_AND_SECRET[1]}
    return env | settings


class BotProcess:
    """One `python -m bot run`, its log in `folder`; can be signalled, awaited and started again."""

    def __init__(self, name: str, env: dict[str, str], folder: Path, port: int | None = None) -> None:
        self.name, self.env, self.folder, self.port = name, env, folder, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = folder / f"{name}.log"
        self._log: IO[bytes] | None = None
        self.exits: list[tuple[int | None, float]] = []  # (return code, seconds from signal to exit)

    def start(self) -> None:
        """Start (again); output appends to the log."""
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run"],
            cwd=self.folder,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def alive(self) -> bool:
        """Running now."""
        return self.proc is not None and self.proc.poll() is None

    async def ready(self, tg: FakeBotApi, seconds: float = 60.0) -> None:
        """Wait until it takes updates: its webhook answers, or its polling has begun."""
        deadline = time.monotonic() + seconds
        polls = len(tg.calls_to("getUpdates"))
        async with httpx.AsyncClient(timeout=2) as http:
            while time.monotonic() < deadline:
                if not self.alive:
                    raise RuntimeError(f"{self.name} exited at start:\n{self.log_tail()}")
                if self.port is None and len(tg.calls_to("getUpdates")) > polls:
                    return
                if self.port is not None:
                    try:
                        if (await http.get(f"http://127.0.0.1:{self.port}/healthz")).status_code == 200:
                            return
                    except httpx.HTTPError:
                        pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} did not become ready:\n{self.log_tail()}")

    async def stop(self, sig: signal.Signals = signal.SIGTERM, seconds: float = 30.0) -> int | None:
        """Signal it and wait for the exit; SIGKILL after `seconds`. Returns the exit code."""
        if self.proc is None or not self.alive:
            return None if self.proc is None else self.proc.returncode
        started = time.monotonic()
        self.proc.send_signal(sig)
        await until(lambda: not self.alive, seconds)
        if self.alive:
            self.proc.kill()
        code = await asyncio.to_thread(self.proc.wait)
        self.exits.append((code, time.monotonic() - started))
        if self._log is not None:
            self._log.close()
        return code

    def log_tail(self, lines: int = 40) -> str:
        """The end of its log, for failure messages."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Crowd:
    """`users` people, each writing `messages` messages in turn; optionally one of them in a burst."""

    tg: FakeBotApi
    users: int
    messages: int
    first_chat: int = 10_000
    patience: float = 30.0
    burst: int = 0  # the first user forwards this many messages at once instead
    answers: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, float] = field(default_factory=dict)
    first_answers: list[str] = field(default_factory=list)  # tokens, in the order first answered
    _pushed: dict[str, float] = field(default_factory=dict)
    _answered: dict[str, asyncio.Event] = field(default_factory=dict)
    _seen: int = 0

    @property
    def tokens(self) -> list[str]:
        """Every token the crowd sends."""
        counts = [self.burst if u == 0 and self.burst else self.messages for u in range(self.users)]
        return [f"u{u}-m{m}" for u in range(self.users) for m in range(counts[u])]

    def answered(self) -> int:
        """Messages answered at least once so far."""
        self._scan()
        return len(self.answers)

    def _scan(self) -> None:
        # The fake's thread appends while this reads: take a slice and count exactly what it held.
        new = self.tg.sent[self._seen :]
        self._seen += len(new)
        for record in new:
            if record.text.startswith(ECHO) and (match := TOKEN.search(record.text)):
                token = match.group(0)
                self.answers[token] += 1
                if self.answers[token] == 1:
                    self.first_answers.append(token)
                if token in self._pushed and token not in self.latencies:
                    self.latencies[token] = record.at - self._pushed[token]
                if (event := self._answered.get(token)) is not None:
                    event.set()

    def _push(self, user: int, token: str) -> None:
        self._pushed[token] = time.monotonic()
        self.tg.user_message(self.first_chat + user, token)

    async def _user(self, user: int) -> None:
        if user == 0 and self.burst:
            for m in range(self.burst):
                self._push(user, f"u{user}-m{m}")
            return
        for m in range(self.messages):
            token = f"u{user}-m{m}"
            answered = self._answered[token] = asyncio.Event()
            self._push(user, token)
            with suppress(TimeoutError):
                await asyncio.wait_for(answered.wait(), self.patience)
            del self._answered[token]

    async def _watch(self) -> None:
        # One reader of the fake's records for everyone (they are written by its thread): users
        # wait on events instead of each polling, which would starve the fakes in this process.
        while True:
            self._scan()
            await asyncio.sleep(0.02)

    async def run(self) -> None:
        """Every user writes all their messages."""
        watcher = asyncio.create_task(self._watch())
        try:
            await asyncio.gather(*(self._user(u) for u in range(self.users)))
        finally:
            watcher.cancel()
            with suppress(asyncio.CancelledError):
                await watcher

    async def settle(self, seconds: float) -> None:
        """Wait (up to `seconds`) until every message was answered."""
        await until(lambda: self.answered() >= len(self.tokens), seconds)


@dataclass
class Tally:
    """What users would notice, from the replies Telegram got and the rows the database holds."""

    sent: int
    lost: int
    unanswered: int
    answered_twice: int
    stored_twice: int
    # Users whose messages were stored, or first answered, in another order than they were sent.
    out_of_order: int
    resumed_sends: int
    latencies_ms: list[float]
    seconds: float

    def exactly_once(self) -> bool:
        """Every message stored once and answered once."""
        return not (
            self.lost or self.unanswered or self.answered_twice or self.stored_twice or self.out_of_order
        )


async def tally(crowd: Crowd, database_url: str, seconds: float) -> Tally:
    """Count the run: messages never stored nor answered, unanswered, answered or stored twice."""
    crowd.answered()
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            in_stored_order = list(
                await conn.scalars(
                    select(TranscriptMessage.content)
                    .where(TranscriptMessage.role == "user")
                    .order_by(TranscriptMessage.id)
                )
            )
            resumed = int(
                await conn.scalar(select(func.coalesce(func.sum(InboxUpdate.resumed_sends), 0))) or 0
            )
    finally:
        await engine.dispose()
    stored = Counter(in_stored_order)
    tokens = crowd.tokens
    return Tally(
        sent=len(tokens),
        lost=sum(1 for t in tokens if not stored[t] and not crowd.answers[t]),
        unanswered=sum(1 for t in tokens if not crowd.answers[t]),
        answered_twice=sum(1 for t in tokens if crowd.answers[t] > 1),
        stored_twice=sum(1 for t in tokens if stored[t] > 1),
        out_of_order=len(_out_of_order(in_stored_order) | _out_of_order(crowd.first_answers)),
        resumed_sends=resumed,
        # In a burst, the latency that matters is everyone else's.
        latencies_ms=[
            v * 1000 for t, v in crowd.latencies.items() if not (crowd.burst and t.startswith("u0-"))
        ],
        seconds=seconds,
    )


def _out_of_order(tokens: list[str]) -> set[str]:
    """The users ("u3") whose tokens ("u3-m7") come in another order than they were sent."""
    seen: dict[str, list[int]] = {}
    for token in tokens:
        if match := TOKEN.fullmatch(token):
            user, _, number = match.group(0).partition("-m")
            seen.setdefault(user, []).append(int(number))
    return {user for user, numbers in seen.items() if numbers != sorted(numbers)}


Fault = Callable[[], Awaitable[None]]


async def until(condition: Callable[[], bool], seconds: float) -> bool:
    """Wait until `condition()` holds (it reads other processes' state, so it is polled); False on timeout."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def run_crowd(
    crowd: Crowd, database_url: str, faults: list[tuple[float, Fault]], *, settle_seconds: float = 300.0
) -> Tally:
    """Run the crowd, firing each fault once the given share of messages was answered."""
    started = time.monotonic()

    async def fire() -> None:
        for share, fault in faults:
            await until(lambda: crowd.answered() >= share * len(crowd.tokens), float("inf"))  # noqa: B023
            await fault()

    firing = asyncio.create_task(fire())
    await crowd.run()
    await crowd.settle(settle_seconds)
    # A fault still under way (a restart) finishes; one whose moment never came is dropped.
    done, _ = await asyncio.wait({firing}, timeout=settle_seconds)
    if not done:
        firing.cancel()
    await crowd.settle(settle_seconds)
    return await tally(crowd, database_url, time.monotonic() - started)
