"""Attachments are stored in a folder of the test's own: nothing lands in var/, and a test can list
what the storage holds."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def attachment_dir(settings, tmp_path):
    folder = tmp_path / "attachments"
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(folder)}},
    }
    return folder


def stored_files(folder) -> list:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []
