"""Production settings pass Django's deployment checklist with no warning."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def deploy_check(tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SUNDRY_", "DJANGO_"))}
    clean.update(SUNDRY_VAR_DIR=str(tmp_path / "var"), **env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_are_deploy_clean(tmp_path):
    done = deploy_check(
        tmp_path,
        SUNDRY_ENV="production",
        SUNDRY_SECRET_KEY=secrets.token_urlsafe(64),
        SUNDRY_ALLOWED_HOSTS="sundry.example.com",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_the_check_does_catch_development_settings(tmp_path):
    # The same command on development settings must fail, or the test above proves nothing.
    done = deploy_check(tmp_path, SUNDRY_ENV="development")
    assert done.returncode != 0
    report = done.stdout + done.stderr
    assert "security.W018" in report  # DEBUG on
    assert "security.W009" in report  # the built-in insecure key


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    done = deploy_check(tmp_path, SUNDRY_ENV="production", SUNDRY_ALLOWED_HOSTS="sundry.example.com")
    assert done.returncode != 0
    assert "SUNDRY_SECRET_KEY" in done.stderr


def test_production_refuses_a_weak_secret_key(tmp_path):
    for weak in ("changeme", "x" * 64, "changeme-" + secrets.token_urlsafe(48), "abcd" * 20):
        done = deploy_check(
            tmp_path, SUNDRY_ENV="production", SUNDRY_SECRET_KEY=weak, SUNDRY_ALLOWED_HOSTS="sundry.example.com"
        )
        assert done.returncode != 0 and "SUNDRY_SECRET_KEY is refused in production" in done.stderr, weak
        assert weak not in done.stderr  # the key itself is never printed


def test_the_check_warns_of_tool_server_limits_left_wide_open(tmp_path):
    done = deploy_check(
        tmp_path,
        SUNDRY_ENV="production",
        SUNDRY_SECRET_KEY=secrets.token_urlsafe(64),
        SUNDRY_ALLOWED_HOSTS="sundry.example.com",
        SUNDRY_TOOL_ENV_PREFIX="",
        SUNDRY_TOOL_HOSTS="tools.example.com,*",
        SUNDRY_TOOL_COMMANDS="/usr/local/bin/crm-mcp --stdio\npython",
        SUNDRY_TOOL_DECLARATIONS_DIR="/",
    )
    assert done.returncode != 0
    report = done.stdout + done.stderr
    for warning in (
        "sundry.toolservers.W001",
        "sundry.toolservers.W002",
        "sundry.toolservers.W003",
        "sundry.toolservers.W004",
    ):
        assert warning in report, report
    # Named hosts, a whole command line, a folder of its own: nothing to warn of (the clean run above
    # has the defaults; these are a deployment's own).
    done = deploy_check(
        tmp_path,
        SUNDRY_ENV="production",
        SUNDRY_SECRET_KEY=secrets.token_urlsafe(64),
        SUNDRY_ALLOWED_HOSTS="sundry.example.com",
        SUNDRY_TOOL_ENV_PREFIX="ACME_TOOLS_",
        SUNDRY_TOOL_HOSTS="tools.example.com:8443,10.0.0.7",
        SUNDRY_TOOL_COMMANDS="python -m acme.crm_mcp\n/usr/local/bin/billing-mcp --stdio",
        SUNDRY_TOOL_DECLARATIONS_DIR=str(tmp_path / "declarations"),
    )
    assert done.returncode == 0 and "no issues" in done.stdout, done.stdout + done.stderr
