"""The configured handler's output: extras and the error on every line, as text and as JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from datetime import datetime

import pytest

from bot.logs import LogFormat, configure_logging

Configure = Callable[[LogFormat], io.StringIO]


class Unprintable:
    """A value JSON cannot encode: the formatter writes its str()."""

    def __str__(self) -> str:
        return "<unprintable thing>"


@pytest.fixture
def configure() -> Iterator[Configure]:
    """configure_logging into a StringIO; the root logger is put back afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    installed: list[logging.Handler] = []

    def _configure(log_format: LogFormat) -> io.StringIO:
        stream = io.StringIO()
        installed.append(configure_logging("INFO", log_format=log_format, stream=stream))
        return stream

    yield _configure
    for handler in installed:
        root.removeHandler(handler)
    root.handlers[:] = handlers
    root.setLevel(level)


def _fail(message: str) -> ValueError:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_json_lines_carry_severity_time_extras_and_exception(configure: Configure) -> None:
    stream = configure("json")
    log = logging.getLogger("nikita.test.json")
    log.info(
        "turn done",
        extra={"user_id": 7, "ms": 12.5, "thing": Unprintable(), "names": ["a", "b"], "color_message": "x"},
    )
    log.warning("model call failed", extra={"user_id": 7}, exc_info=_fail("overloaded right now"))
    log.debug("not shown at INFO")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    info, warning = (json.loads(line) for line in lines)

    assert info["severity"] == "INFO"
    assert info["message"] == "turn done"
    assert info["logger"] == "nikita.test.json"
    assert info["user_id"] == 7 and info["ms"] == 12.5 and info["names"] == ["a", "b"]
    assert info["thing"] == "<unprintable thing>"
    assert datetime.fromisoformat(info["time"]).tzinfo is not None
    assert info["time"].endswith("Z")
    assert "exception" not in info and "color_message" not in info

    assert warning["severity"] == "WARNING"
    assert warning["error"] == "ValueError: overloaded right now"
    assert warning["exception"]["type"] == "ValueError"
    assert warning["exception"]["message"] == "overloaded right now"
    assert "Traceback" in warning["exception"]["traceback"]
    assert "_fail" in warning["exception"]["traceback"]


def test_json_severity_names_and_reserved_extras(configure: Configure) -> None:
    stream = configure("json")
    log = logging.getLogger("nikita.test.levels")
    log.error("e", extra={"severity": "mine", "time": "also mine"})
    loop: list[object] = []
    loop.append(loop)
    log.critical("c", extra={"value": float("nan"), "loop": loop}, exc_info=_fail("and a cause"))
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["severity"] == "ERROR"
    assert first["extra_severity"] == "mine" and first["extra_time"] == "also mine"
    assert second["severity"] == "CRITICAL"
    assert second["value"] == "nan" and second["loop"] == "[[...]]"  # not JSON: written as strings
    assert second["exception"]["type"] == "ValueError"


def test_text_shows_extras_quoted_and_a_known_failure_on_one_line(configure: Configure) -> None:
    stream = configure("text")
    log = logging.getLogger("nikita.test.text")
    log.warning("model call failed", extra={"user_id": 7, "tier": "two words"}, exc_info=_fail("no\nluck"))
    (line,) = stream.getvalue().splitlines()
    assert " WARNING nikita.test.text model call failed " in line
    assert "user_id=7" in line
    assert 'tier="two words"' in line
    assert line.endswith('error="ValueError: no luck"')


def test_text_keeps_the_traceback_of_an_unexpected_error(configure: Configure) -> None:
    stream = configure("text")
    log = logging.getLogger("nikita.test.crash")
    try:
        raise KeyError("missing")
    except KeyError:
        log.exception("agent run failed", extra={"conversation_id": 3})
    first, *rest = stream.getvalue().splitlines()
    assert first.endswith("conversation_id=3 error=\"KeyError: 'missing'\"")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "KeyError: 'missing'"


def test_sql_parameters_never_reach_the_log(configure: Configure) -> None:
    from sqlalchemy.exc import IntegrityError

    stream = configure("json")
    exc = IntegrityError("INSERT INTO messages (text) VALUES (?)", ("my secret diary",), Exception("dup"))
    logging.getLogger("nikita.test.sql").warning("not cached", exc_info=exc)
    record = json.loads(stream.getvalue())
    assert "my secret diary" not in stream.getvalue()
    assert "[parameters hidden]" in record["exception"]["message"]
    # An error's text passed as a field is hidden the same way, in both formats.
    for log_format in ("json", "text"):
        stream = configure(log_format)
        logging.getLogger("nikita.test.sql").warning("lookup failed", extra={"error": str(exc)})
        assert "my secret diary" not in stream.getvalue() and "[parameters hidden]" in stream.getvalue()


def test_configuring_again_replaces_the_handler(configure: Configure) -> None:
    first = configure("text")
    second = configure("json")
    logging.getLogger("nikita.test.again").info("once")
    assert first.getvalue() == ""
    assert json.loads(second.getvalue())["message"] == "once"
