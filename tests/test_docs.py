"""The documentation: a short README that starts with the newcomer's commands, links that resolve,
and a configuration page that lists every setting `agent/core/settings/` reads, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Variables the configuration page documents that the bot itself does not read as settings.
NOT_SETTINGS = {
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "HTTPS_PROXY",
    "TEST_POSTGRES_URL",
    "CI",
    "NIKITA_MANY_USERS",
    "TEST_BOTH_DATABASES",
    "TIMELINE_SCREENSHOT",
    "DASHBOARD_SCREENSHOT",
}


def _outside_fences(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in _outside_fences(path.read_text(encoding="utf-8")):
        match = re.match(r"#{1,6}\s+(.*)", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_readme_is_one_page_that_starts_with_the_newcomer_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    top = "\n".join(lines[:30])
    assert "make run" in top
    assert "make test" in top


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall("\n".join(_outside_fences(page.read_text(encoding="utf-8")))):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        path = (page.parent / file_part).resolve() if file_part else page
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(target)
    assert broken == []


def test_readme_links_every_docs_page() -> None:
    readme = README.read_text(encoding="utf-8")
    assert [page.name for page in DOCS if f"(docs/{page.name})" not in readme] == []


def test_configuration_page_lists_every_setting_and_no_other() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = set()
    for line in page.splitlines():
        if line.startswith("| `"):
            documented.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split(" | ")[0]))
    settings = {(field.alias or name).upper() for name, field in Settings.model_fields.items()}
    assert settings - documented == set()
    assert documented - settings - NOT_SETTINGS == set()


def _documents() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in [README, *DOCS, ROOT / "Procfile"])


def test_every_documented_command_and_job_exists() -> None:
    import argparse
    import inspect

    from bot.__main__ import _parser
    from bot.web import app as web_app
    from jobs.registry import JOB_ALIASES, JOB_NAMES

    text = _documents()
    [subcommands] = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    named = set(re.findall(r"python -m bot ([a-z][a-z-]*)", text))
    assert named and named - set(subcommands.choices) == set()
    jobs = set(re.findall(r"jobs run ([a-z][a-z-]*)", text))
    # A job's old name, documented as still accepted, runs it too.
    known = {*JOB_NAMES, *JOB_ALIASES}
    assert jobs and jobs - known == set()
    # The scheduler recipes' job table and task URLs: a CLI job, or the one task only the web app serves.
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([a-z][a-z-]*)` \|", deploy, re.MULTILINE))
    tasks = set(re.findall(r"/tasks/([a-z][a-z-]*)", text))
    assert table and (table | tasks) - known == {"inbox"}
    assert '"/tasks/inbox"' in inspect.getsource(web_app)
