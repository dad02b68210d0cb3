"""Start-up checks: Telegram takes the token, Anthropic the key and model, the database answers.

`python -m bot run` runs them before it starts anything (migrations, the embedded graph's server,
the web server), each with STARTUP_CHECK_TIMEOUT_SECONDS, so a failure leaves nothing behind: the
process prints one line saying what failed and what to check, and exits. Models of other providers
are not checked here; their first call shows a wrong key. Every command first checks the settings
that only the product can judge (the persona file, the embedder's name).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from agent.chat.persona import read_persona_file
from agent.core.errors import ConfigurationError, StartupError
from agent.core.settings import Settings
from agent.search.embedder_names import embedder_string
from db.engine import create_engine

logger = logging.getLogger(__name__)

DEFAULT_TELEGRAM_API = "https://api.telegram.org/bot"


def one_line(exc: BaseException, *, hide: str | None = None) -> str:
    """`Type: message` on one line, short, without SQLAlchemy's statement and link (and `hide` masked)."""
    message = str(exc).split("\n[SQL:", 1)[0].split("(Background on this error", 1)[0]
    message = " ".join(message.split())
    if hide:
        message = message.replace(hide, "***")
    if len(message) > 240:
        message = message[:239] + "…"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def check_settings(settings: Settings) -> Settings:
    """The settings checks that need the product itself: PERSONA_FILE readable, EMBEDDER an embedder.

    Every command runs them right after reading the settings, so a wrong value stops it at start in
    one line, as a malformed setting does. Returns the settings with EMBEDDER in its canonical form.
    """
    if settings.persona_file is not None:
        read_persona_file(settings.persona_file)
    try:
        embedder = embedder_string(settings.embedder)
    except ValueError as exc:
        raise ConfigurationError(f"invalid settings: EMBEDDER: Value error, {exc}") from exc
    return settings if embedder == settings.embedder else settings.model_copy(update={"embedder": embedder})


async def check_telegram(settings: Settings) -> None:
    """getMe with TELEGRAM_BOT_TOKEN at TELEGRAM_API_BASE_URL."""
    from telegram import Bot
    from telegram.error import InvalidToken, NetworkError, TelegramError
    from telegram.request import HTTPXRequest

    settings.require("telegram_bot_token")
    assert settings.telegram_bot_token is not None
    seconds = settings.startup_check_timeout_seconds
    host = urlsplit(settings.telegram_api_base_url).netloc or settings.telegram_api_base_url
    bot = Bot(
        settings.telegram_bot_token.get_secret_value(),
        base_url=settings.telegram_api_base_url,
        request=HTTPXRequest(
            connect_timeout=seconds, read_timeout=seconds, write_timeout=seconds, pool_timeout=seconds
        ),
    )
    try:
        async with bot:  # initialising a Bot is its getMe
            pass
    except InvalidToken as exc:  # 401 or 404; its message repeats the token, so it is not shown
        also = "" if settings.telegram_api_base_url == DEFAULT_TELEGRAM_API else " and TELEGRAM_API_BASE_URL"
        raise ConfigurationError(
            f"TELEGRAM_BOT_TOKEN was refused by Telegram at {host}: check the token @BotFather gave you{also}"
        ) from exc
    except NetworkError as exc:
        raise StartupError(
            f"cannot reach Telegram at {host} ({one_line(exc.__cause__ or exc)}): "
            "check the network, a proxy, or TELEGRAM_API_BASE_URL"
        ) from exc
    except TelegramError as exc:
        raise StartupError(
            f"Telegram at {host} refused getMe ({one_line(exc)}): check TELEGRAM_API_BASE_URL"
        ) from exc


def _anthropic_models(settings: Settings) -> dict[str, str]:
    """Model id -> the setting that names it, for every `anthropic:` model in MODEL and SUMMARY_MODEL."""
    found: dict[str, str] = {}
    for setting, model in (("SUMMARY_MODEL", settings.summary_model), ("MODEL", settings.model)):
        if model.startswith("anthropic:"):
            found[model.removeprefix("anthropic:")] = setting
    return found


async def check_anthropic(settings: Settings) -> None:
    """GET /v1/models/{id} for each `anthropic:` model, with ANTHROPIC_API_KEY (at ANTHROPIC_BASE_URL)."""
    models = _anthropic_models(settings)
    if not models:
        return
    settings.require("anthropic_api_key")
    assert settings.anthropic_api_key is not None
    import anthropic

    key = settings.anthropic_api_key.get_secret_value()
    seconds = settings.startup_check_timeout_seconds
    # The SDK reads ANTHROPIC_BASE_URL itself, as it does for the model calls.
    async with anthropic.AsyncAnthropic(api_key=key, max_retries=0, timeout=seconds) as client:
        host = client.base_url.netloc.decode()
        for model_id, setting in models.items():
            try:
                info = await client.models.retrieve(model_id)
            except anthropic.AuthenticationError as exc:
                raise ConfigurationError(
                    f"ANTHROPIC_API_KEY was refused by Anthropic at {host}: "
                    "check the key (console.anthropic.com, API keys)"
                ) from exc
            except anthropic.PermissionDeniedError as exc:
                raise ConfigurationError(
                    f"ANTHROPIC_API_KEY may not use {setting} {model_id} ({one_line(exc, hide=key)}): "
                    "check the key's workspace and the organisation's access"
                ) from exc
            except anthropic.NotFoundError as exc:
                example = Settings.model_fields[setting.lower()].default
                raise ConfigurationError(
                    f"{setting} {model_id} is not a model Anthropic knows: "
                    f"check {setting} (anthropic:<model id>, e.g. {example})"
                ) from exc
            except anthropic.APIConnectionError as exc:
                raise StartupError(
                    f"cannot reach Anthropic at {host} ({one_line(exc.__cause__ or exc)}): "
                    "check the network, a proxy, or ANTHROPIC_BASE_URL"
                ) from exc
            except (anthropic.RateLimitError, anthropic.InternalServerError) as exc:
                # Busy or failing for a moment (429, 5xx, 529): the key was not refused, so start;
                # turns apologise until Anthropic answers again.
                logger.warning(
                    "Anthropic did not answer the start-up check; starting anyway",
                    extra={"model": model_id, "error": one_line(exc, hide=key)},
                )
                continue
            except anthropic.APIStatusError as exc:
                raise StartupError(
                    f"Anthropic at {host} refused the start-up check ({one_line(exc, hide=key)}): "
                    "check ANTHROPIC_BASE_URL"
                ) from exc
            if getattr(info, "lifecycle", None) == "retired":
                raise ConfigurationError(
                    f"{setting} {model_id} was retired by Anthropic and answers no more requests: "
                    f"set {setting} to a current model"
                )


async def check_database(settings: Settings) -> None:
    """Connect to DATABASE_URL and run SELECT 1; a SQLite file not made yet is left to the migration."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite":
        where = f"the SQLite file {url.database}"
        hint = "check DATABASE_URL and that its folder is writable"
    else:
        where = f"{url.host or 'localhost'}:{url.port or 5432}"
        hint = "check DATABASE_URL (host, port, user, password, database) and that the server is up"
    if "database_url" not in settings.model_fields_set:
        hint = f"set DATABASE_URL, or make {settings.data_dir} writable (DATA_DIR)"
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        # A new file: the migration creates it once every check passed, so a start that fails
        # leaves nothing behind; here its folder must be one we can make and write to.
        if await asyncio.to_thread(_new_file_in_writable_folder, Path(url.database), where, hint):
            return
    try:
        engine = create_engine(settings.database_url, pool_size=1)
    except OSError as exc:  # the SQLite file's folder could not be made
        raise StartupError(f"cannot open the database at {where} ({one_line(exc)}): {hint}") from exc
    try:
        async with asyncio.timeout(settings.startup_check_timeout_seconds), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        cause: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        while cause.__cause__ is not None:  # the driver's own error (asyncpg's, under SQLAlchemy's adapter)
            cause = cause.__cause__
        detail = one_line(cause, hide=url.password if isinstance(url.password, str) else None)
        raise StartupError(f"cannot reach the database at {where} ({detail}): {hint}") from exc
    finally:
        await engine.dispose()


def _new_file_in_writable_folder(file: Path, where: str, hint: str) -> bool:
    """False when the file exists; True when it does not and its folder (or the nearest existing one
    above it) can be written to; else a `StartupError`."""
    if file.exists():
        return False
    existing = file.parent.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise StartupError(
            f"cannot open the database at {where} ({existing} is not a writable folder): {hint}"
        )
    return True


async def preflight(settings: Settings) -> None:
    """Every check of `run`, at once; the first failure (Telegram, Anthropic, database) is raised."""
    results = await asyncio.gather(
        check_telegram(settings), check_anthropic(settings), check_database(settings), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result


def listen(port: int) -> socket.socket:
    """The web server's socket, bound before anything starts: a port in use fails here, in one line."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("0.0.0.0", port))
    except OSError as exc:
        sock.close()
        raise StartupError(
            f"cannot listen on PORT {port} ({one_line(exc)}): another process holds it; stop it or set PORT"
        ) from exc
    sock.set_inheritable(True)
    return sock
