"""Who the bot is: its name (PERSONA_NAME) and its prompts, rendered once from settings.

The prompts are Markdown files beside this module (persona.md for text chats, onboarding.md for
the first conversation, voice/persona.md for calls) with a `{persona_name}` placeholder wherever
the name appears. PERSONA_FILE replaces the text chat persona with an operator's own Markdown;
its placeholders are filled the same way. See docs/persona.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from agent.core.errors import ConfigurationError
from agent.core.settings import Settings

HERE = Path(__file__).parent
CHAT_PERSONA_PATH = HERE / "persona.md"
ONBOARDING_PATH = HERE / "onboarding.md"
VOICE_PERSONA_PATH = HERE.parent / "voice" / "persona.md"
PLACEHOLDER = "{persona_name}"


def with_name(text: str, persona_name: str) -> str:
    """The text with every `{persona_name}` replaced (other braces are left alone)."""
    return text.replace(PLACEHOLDER, persona_name)


@dataclass(frozen=True)
class Persona:
    """The persona's name and its three prompts, names filled in."""

    name: str
    chat: str
    onboarding: str
    voice: str


def read_persona_file(path: str) -> str:
    """PERSONA_FILE's text; ConfigurationError naming it when missing, unreadable or empty."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except FileNotFoundError as exc:
        raise ConfigurationError(f"PERSONA_FILE {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"PERSONA_FILE {path} cannot be read: {exc}") from exc
    if not text:
        raise ConfigurationError(f"PERSONA_FILE {path} is empty")
    return text


@cache
def _render(persona_name: str, persona_file: str | None) -> Persona:
    chat = (
        read_persona_file(persona_file)
        if persona_file is not None
        else CHAT_PERSONA_PATH.read_text(encoding="utf-8").strip()
    )
    return Persona(
        name=persona_name,
        chat=with_name(chat, persona_name),
        onboarding=with_name(ONBOARDING_PATH.read_text(encoding="utf-8").strip(), persona_name),
        voice=with_name(VOICE_PERSONA_PATH.read_text(encoding="utf-8").strip(), persona_name),
    )


def default_persona() -> Persona:
    """The shipped persona under the default PERSONA_NAME (for callers built without settings)."""
    return _render(Settings.model_fields["persona_name"].default, None)


def persona_for(settings: Settings) -> Persona:
    """The persona these settings describe, read once per (PERSONA_NAME, PERSONA_FILE); raises
    ConfigurationError naming PERSONA_FILE when that file is missing, unreadable or empty."""
    name = settings.persona_name.strip()
    if not name:
        raise ConfigurationError("PERSONA_NAME is empty")
    return _render(name, settings.persona_file)
