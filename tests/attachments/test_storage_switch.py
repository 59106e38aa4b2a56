"""Where files live is a configuration switch: local files by default, an S3-compatible bucket on request.

Settings are read once at import, so each case imports them in a fresh interpreter
(nothing is contacted: the bucket's endpoint is never reached)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import json; from sundry import settings as s; print(json.dumps(s.STORAGES['attachments']))"


def _settings(tmp_path, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SUNDRY_ATTACHMENT", "SUNDRY_S3"))}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "SUNDRY_VAR_DIR": str(tmp_path), **env},
    )
    return result


def test_local_files_by_default_outside_any_served_folder(tmp_path):
    out = _settings(tmp_path)
    assert out.returncode == 0, out.stderr
    storage = json.loads(out.stdout)
    assert storage["BACKEND"] == "django.core.files.storage.FileSystemStorage"
    assert storage["OPTIONS"]["location"] == str(tmp_path / "attachments")


def test_s3_switch_names_the_bucket_endpoint_and_keeps_objects_private(tmp_path):
    out = _settings(
        tmp_path,
        SUNDRY_ATTACHMENT_STORAGE="s3",
        SUNDRY_S3_BUCKET="sundry-files",
        SUNDRY_S3_ENDPOINT_URL="http://minio.internal:9000",
        SUNDRY_S3_REGION="eu-west-1",
    )
    assert out.returncode == 0, out.stderr
    storage = json.loads(out.stdout)
    assert storage["BACKEND"] == "storages.backends.s3.S3Storage"
    assert (
        storage["OPTIONS"].items()
        >= {
            "bucket_name": "sundry-files",
            "endpoint_url": "http://minio.internal:9000",
            "region_name": "eu-west-1",
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": False,
        }.items()
    )


def test_a_bucketless_or_unknown_storage_is_refused_at_start(tmp_path):
    out = _settings(tmp_path, SUNDRY_ATTACHMENT_STORAGE="s3")
    assert out.returncode != 0 and "needs SUNDRY_S3_BUCKET" in out.stderr
    out = _settings(tmp_path, SUNDRY_ATTACHMENT_STORAGE="ftp")
    assert out.returncode != 0 and "must be local or s3" in out.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("storages") is None or importlib.util.find_spec("boto3") is None,
    reason="the optional extra sundry[s3] (django-storages, boto3) is not installed",
)
def test_the_s3_backend_builds_from_those_options():
    from storages.backends.s3 import S3Storage

    storage = S3Storage(
        bucket_name="sundry-files",
        endpoint_url="http://minio.internal:9000",
        default_acl=None,
        location="attachments",
        querystring_auth=True,
        file_overwrite=False,
    )
    assert storage.bucket_name == "sundry-files" and storage.location == "attachments"
