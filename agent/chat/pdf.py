"""The text of a PDF a person sends, for the model to read like any text document.

pypdf (pure Python, BSD, maintained) reads the text layer: nothing downloads, nothing is rendered,
there is no OCR, so a scanned PDF has no text to give and is declined honestly. The file is parsed
in a child process under a deadline and a memory ceiling (agent/chat/documents.py runs
agent/chat/parse_child.py) and capped in pages and characters; a part left out is said
in the text, so the model does not answer as if it read everything.
"""

from __future__ import annotations

import io
import logging

from agent.core.errors import UnreadablePdfError

logger = logging.getLogger(__name__)


def pdf_text(data: bytes, *, max_pages: int, max_chars: int) -> str:
    """The text of the first `max_pages` pages, at most `max_chars` characters, page by page."""
    from pypdf import PdfReader  # imported on the first PDF: 6 MB resident that most processes never use

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadablePdfError("the PDF is protected by a password")
        total = len(reader.pages)
        pages = [(reader.pages[i].extract_text() or "").strip() for i in range(min(total, max_pages))]
    except UnreadablePdfError:
        raise
    except Exception as exc:  # a third-party parser on a stranger's file: any failure means "unreadable"
        raise UnreadablePdfError(f"the PDF could not be read: {exc!r}") from exc
    if not any(pages):
        raise UnreadablePdfError("the PDF has no text layer (scanned pages?)")
    text = "\n\n".join(f"[page {n}]\n{page}" for n, page in enumerate(pages, start=1) if page)
    notes = []
    if len(text) > max_chars:
        text = text[:max_chars]
        notes.append(f"the text was cut at {max_chars} characters")
    if total > max_pages:
        notes.append(f"only the first {max_pages} of {total} pages were read")
    if notes:
        text += f"\n\n[{'; '.join(notes)}]"
    return text.replace("\x00", "")
