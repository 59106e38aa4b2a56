"""An upload becomes something safe to store, or a refusal that says why.

Size first (before reading), then the content's own magic bytes decide the
type; images are re-encoded (images.py), PDFs checked (sniff.pdf_problem).
Nothing here touches the database or the storage: a refusal leaves no trace.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from django.conf import settings

from sundry.attachments.images import ImageRefused, reencode
from sundry.attachments.sniff import EXTENSIONS, LABELS, PDF, pdf_problem, sniff
from sundry.tickets.services import MessageRefused

KEPT = " Nothing was sent; your message is still in the box."


class AttachmentRefused(MessageRefused):
    """A file that cannot be attached: the message it came with is not stored either."""


@dataclass(frozen=True)
class Prepared:
    name: str
    content_type: str
    data: bytes
    original_size: int
    sha256: str
    width: int | None = None
    height: int | None = None
    thumb: bytes = b""
    thumb_type: str = ""


def human_size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    return f"{max(1, round(n / 1024))} KB"


def clean_stem(raw: str) -> str:
    """The sender's file name without folders or extension, in plain characters: it is shown to staff
    and named to the model, so no markup, brackets, control or direction characters."""
    base = re.split(r"[\\/]", raw or "")[-1]
    stem = base.rsplit(".", 1)[0] if "." in base.strip(".") else base
    stem = re.sub(r"[^A-Za-z0-9 _\-]+", "_", stem)
    stem = re.sub(r"[_ ]{2,}", "_", stem).strip(" _-")[:80]
    return stem or "attachment"


def allowed_types() -> list[str]:
    return [t for t in settings.ATTACHMENT_TYPES if t in EXTENSIONS]


def _what_is_allowed() -> str:
    labels = [LABELS[t] for t in allowed_types()]
    return ", ".join(labels[:-1]) + (" or " if len(labels) > 1 else "") + labels[-1]


def prepare(upload) -> Prepared:
    """One uploaded file (Django's UploadedFile) → Prepared, or AttachmentRefused."""
    stem = clean_stem(getattr(upload, "name", "") or "")
    shown = f"“{stem}”"
    size, limit = upload.size or 0, settings.ATTACHMENT_MAX_BYTES
    if size > limit:
        raise AttachmentRefused(f"{shown} is {human_size(size)}; the limit is {human_size(limit)} a file.{KEPT}")
    if size == 0:
        raise AttachmentRefused(f"{shown} is empty.{KEPT}")
    upload.seek(0)
    data = upload.read(limit + 1)
    if len(data) > limit:  # the size the upload claimed was wrong
        raise AttachmentRefused(f"{shown} is over the limit of {human_size(limit)} a file.{KEPT}")
    kind = sniff(data[:16])
    if kind not in allowed_types():
        raise AttachmentRefused(
            f"{shown} is not a {_what_is_allowed()} — Sundry goes by what a file contains, not its name.{KEPT}"
        )
    name = f"{stem}.{EXTENSIONS[kind]}"
    if kind == PDF:
        if problem := pdf_problem(data):
            raise AttachmentRefused(f"{shown} cannot be attached: {problem}.{KEPT}")
        return Prepared(name, kind, data, len(data), hashlib.sha256(data).hexdigest())
    try:
        enc = reencode(data, kind, max_pixels=settings.ATTACHMENT_MAX_PIXELS)
    except ImageRefused as exc:
        raise AttachmentRefused(f"{shown} cannot be attached: {exc}.{KEPT}") from exc
    return Prepared(
        name,
        kind,
        enc.data,
        len(data),
        hashlib.sha256(enc.data).hexdigest(),
        enc.width,
        enc.height,
        enc.thumb,
        enc.thumb_type,
    )


def prepare_all(uploads: list) -> list[Prepared]:
    """Every file of one message, or a refusal naming the first that cannot go (then none goes)."""
    most = settings.ATTACHMENT_MAX_FILES
    if len(uploads) > most:
        raise AttachmentRefused(f"{len(uploads)} files; a message takes at most {most}.{KEPT}")
    return [prepare(u) for u in uploads]
