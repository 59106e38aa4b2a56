"""The attachments' storage: Django's storage API under the alias `attachments` (settings.STORAGES).

Local files by default, an S3-compatible bucket when SUNDRY_ATTACHMENT_STORAGE=s3. Keys are random,
never the sender's file name, and nothing is served from the storage directly: every read goes
through a view that checks who is asking (views.py).
"""

from __future__ import annotations

import uuid

from django.core.files.base import ContentFile
from django.core.files.storage import storages

ALIAS = "attachments"


def storage():
    return storages[ALIAS]


def new_key(ticket_id: int, extension: str, suffix: str = "") -> str:
    return f"t{ticket_id}/{uuid.uuid4().hex}{suffix}.{extension}"


def save(key: str, data: bytes) -> str:
    return storage().save(key, ContentFile(data))


def open_file(key: str):
    return storage().open(key, "rb")


def delete(keys) -> None:
    for key in keys:
        if key:
            storage().delete(key)
