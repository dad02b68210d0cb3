"""The text of a PDF, page by page, capped; broken and scanned PDFs are refused with a reason."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfWriter

from agent.chat.pdf import pdf_text
from agent.core.errors import UnreadablePdfError
from bench.fakes.pdf import make_pdf


def test_pages_are_read_in_order_and_marked() -> None:
    data = make_pdf([["Trip plan", "Day 1: Lisbon (Alfama)"], ["Day 2: Porto"]])
    text = pdf_text(data, max_pages=10, max_chars=10_000)
    assert text.index("[page 1]") < text.index("Day 1: Lisbon (Alfama)") < text.index("[page 2]")
    assert text.rstrip().endswith("Day 2: Porto")


def test_what_is_left_out_is_said() -> None:
    data = make_pdf([[f"page {n} words"] for n in range(1, 6)])
    text = pdf_text(data, max_pages=2, max_chars=10_000)
    assert "page 2 words" in text and "page 3 words" not in text
    assert text.endswith("[only the first 2 of 5 pages were read]")
    cut = pdf_text(make_pdf([["x" * 500]]), max_pages=5, max_chars=100)
    assert cut.endswith("[the text was cut at 100 characters]") and len(cut) < 150


def test_a_pdf_without_text_a_protected_one_and_garbage_are_unreadable() -> None:
    blank = PdfWriter()
    blank.add_blank_page(width=612, height=792)
    scanned = io.BytesIO()
    blank.write(scanned)
    with pytest.raises(UnreadablePdfError, match="no text layer"):
        pdf_text(scanned.getvalue(), max_pages=5, max_chars=1000)

    locked = PdfWriter(clone_from=io.BytesIO(make_pdf([["the secret plan"]])))
    locked.encrypt(user_password="hunter2", algorithm="RC4-128")
    protected = io.BytesIO()
    locked.write(protected)
    with pytest.raises(UnreadablePdfError, match="password"):
        pdf_text(protected.getvalue(), max_pages=5, max_chars=1000)

    for junk in (b"", b"%PDF-1.4\n garbage", b"\x00\xff" * 100):
        with pytest.raises(UnreadablePdfError, match="could not be read"):
            pdf_text(junk, max_pages=5, max_chars=1000)
