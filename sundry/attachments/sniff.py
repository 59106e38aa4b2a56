"""What a file is, from its first bytes: never its name, never the browser's content type.

Pure. Only the four kinds Sundry accepts are recognised; anything else (HTML
named .jpg, an executable, a ZIP) is None and is refused by the caller.
"""

from __future__ import annotations

import re

JPEG, PNG, WEBP, PDF = "image/jpeg", "image/png", "image/webp", "application/pdf"
KINDS = (JPEG, PNG, WEBP, PDF)
EXTENSIONS = {JPEG: "jpg", PNG: "png", WEBP: "webp", PDF: "pdf"}
LABELS = {JPEG: "JPEG image", PNG: "PNG image", WEBP: "WebP image", PDF: "PDF document"}


def sniff(head: bytes) -> str | None:
    """The kind the magic bytes at the very start say, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return WEBP
    if head.startswith(b"%PDF-"):
        return PDF
    return None


# A PDF is kept as sent (there is no re-encoder for it), so what would make a viewer run something is
# refused instead: scripts, launch actions, embedded files and rich media — and markup a browser could
# read as a page if it ever sniffed the file. Names may hide letters as #xx escapes; those are decoded.
# Names inside compressed object streams are not seen by this check.
_PDF_NAME = re.compile(rb"/[A-Za-z0-9#]{2,40}")
_PDF_REFUSED_NAMES = {b"/JavaScript", b"/JS", b"/Launch", b"/EmbeddedFile", b"/EmbeddedFiles", b"/RichMedia", b"/XFA"}
_MARKUP = re.compile(rb"<\s*(?:script|html|body|iframe|svg|object|embed)\b", re.IGNORECASE)


def _unescape(name: bytes) -> bytes:
    return re.sub(rb"#([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), name)


def pdf_problem(data: bytes) -> str:
    """Why this PDF is refused ("" when it is not)."""
    if b"%%EOF" not in data[-2048:]:
        return "it is not a complete PDF (no end-of-file marker)"
    if _MARKUP.search(data):
        return "it carries web-page markup as well as a PDF"
    for match in _PDF_NAME.finditer(data):
        if _unescape(match.group()) in _PDF_REFUSED_NAMES:
            return "it contains scripts, actions or embedded files"
    return ""
