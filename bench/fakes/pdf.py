"""Small, valid PDF files written from scratch (one page per list of lines), for the PDF tests.

Written by hand rather than by a library so the reader under test (pypdf) does not also make the
files it reads: the objects, the content streams with Helvetica text and a correct xref table.
"""

from __future__ import annotations


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]]) -> bytes:
    """A PDF whose page i shows the lines of pages[i], top to bottom (Latin-1 text)."""
    count = len(pages)
    # Objects: 1 catalog, 2 page tree, 3 font, then per page: the page and its content stream.
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for i, lines in enumerate(pages):
        shown = "\n".join(f"({_escape(line)}) Tj T*" for line in lines)
        stream = f"BT /F1 12 Tf 14 TL 72 720 Td\n{shown}\nET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return _assemble(objects)


def _assemble(objects: list[bytes]) -> bytes:
    """The file around numbered objects (object 1 the catalog): header, bodies, xref and trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def make_pdf_bomb(*, pages: int = 30, operators: int = 100_000) -> bytes:
    """A few-KB PDF whose `pages` pages all share one Flate-compressed content stream of `operators`
    text-showing operators: small on the wire, minutes of text extraction for a naive reader."""
    import zlib

    shown = b"(a) Tj " * operators
    stream = zlib.compress(b"BT /F1 1 Tf 0 0 Td " + shown + b"ET", 9)
    # Objects: 1 catalog, 2 page tree, 3 font, 4 the shared content stream, then the pages.
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>"
    )
    objects += [page] * pages
    return _assemble(objects)
