"""Settings of what users send besides text: photos, documents, PDFs and voice notes."""

from __future__ import annotations

from pydantic import Field, SecretStr

from agent.core.settings.base import SettingsGroup, aliased


class MediaSettings(SettingsGroup):
    """PHOTO_*, DOCUMENT_*, PDF_*, IMPORT_*, VOICE_NOTE_MAX_BYTES and TRANSCRIPTION_*."""

    # Photos and text documents larger than these caps are declined with a short answer.
    # Voice notes are transcribed by an OpenAI-compatible /v1/audio/transcriptions endpoint when
    # TRANSCRIPTION_URL is set (its key in TRANSCRIPTION_API_KEY); unset, they keep the short answer.
    photo_max_bytes: int = 5_000_000
    document_max_bytes: int = 64_000
    # PDFs: the file up to PDF_MAX_BYTES, the text of its first PDF_MAX_PAGES pages, at most
    # DOCUMENT_MAX_BYTES characters of it (agent/chat/pdf.py).
    pdf_max_bytes: int = 5_000_000
    pdf_max_pages: int = 30
    # Documents that need a parser (PDFs) are read in a child process each (agent/chat/documents.py),
    # at most DOCUMENT_PARSE_CONCURRENCY at once, killed after DOCUMENT_PARSE_SECONDS and refused
    # more than DOCUMENT_PARSE_MEMORY_MB of address space: a small crafted file can hold minutes of
    # work or hundreds of MB, and gets the short honest answer instead.
    document_parse_seconds: float = Field(default=10.0, gt=0)
    document_parse_memory_mb: int = Field(default=128, ge=64)
    document_parse_concurrency: int = Field(default=2, ge=1)
    # Exports from another assistant (docs/import.md): the conversations' JSON is read up to
    # IMPORT_MAX_BYTES uncompressed, a zip's at most IMPORT_MAX_RATIO times its compressed size (past
    # 16 MB), nested at most IMPORT_MAX_DEPTH deep. A run's lease lapses after IMPORT_LEASE_SECONDS
    # without progress; another process then resumes it.
    import_max_bytes: int = Field(default=2_000_000_000, ge=1)
    import_max_ratio: float = Field(default=100.0, gt=1)
    import_max_depth: int = Field(default=64, ge=8)
    import_lease_seconds: float = Field(default=300.0, ge=0)
    # VOICE_MAX_BYTES is read as an alias.
    voice_note_max_bytes: int = aliased("voice_note_max_bytes", "voice_max_bytes", default=10_000_000)
    transcription_url: str | None = None
    transcription_api_key: SecretStr | None = None
    transcription_model: str = "whisper-1"
    transcription_timeout_seconds: float = 60.0
