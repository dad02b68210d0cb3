"""A private PostgreSQL server for tests and benchmarks that restart the server.

The shared server on :5432 is never restarted (other people's tests run on it). This starts a
throw-away cluster (`initdb` + `pg_ctl`, as the `postgres` OS user when run as root) in a temporary
folder on a free port, and can restart it like a failover or an upgrade would.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

BIN_DIRS = (
    Path("/usr/lib/postgresql/15/bin"),
    Path("/usr/lib/postgresql/16/bin"),
    Path("/usr/local/pgsql/bin"),
)


class ClusterUnavailableError(RuntimeError):
    """No PostgreSQL server binaries here, or they cannot be run (the reason is the message)."""


def _bin_dir() -> Path:
    for folder in BIN_DIRS:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise ClusterUnavailableError("initdb/pg_ctl not found in " + ", ".join(str(d) for d in BIN_DIRS))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateCluster:
    """`with PrivateCluster() as pg: pg.url("nikita")`; `pg.restart()` restarts the server."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="nikita-pg-"))
        self.data = self.folder / "data"
        # initdb refuses to run as root: run the server tools as the postgres user then.
        self._as: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise ClusterUnavailableError("running as root without runuser to switch to postgres")
            self._as = [runuser, "-u", "postgres", "--"]
            shutil.chown(self.folder, user="postgres")

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise ClusterUnavailableError(
                f"{Path(args[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}"
            )

    def _ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"),
            "-m", "fast", "-w", "-o", options, action,
        )  # fmt: skip

    def start(self) -> PrivateCluster:
        """initdb (trust auth, user postgres) and start the server."""
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"
        )
        self._ctl("start")
        return self

    def restart(self) -> None:
        """Stop the server (fast: every connection is cut) and start it again."""
        self._ctl("restart")

    def stop(self) -> None:
        """Stop the server and delete its files."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._ctl("stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """An asyncpg URL for a database of this server."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> PrivateCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
