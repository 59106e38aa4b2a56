"""`manage.py budget_lab` prints the lab's comparison: the same figures as the page, for the hand-worked history."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from tests.tickets.test_budget_lab import GPT, PROPOSED_REQUESTS, RECORDED, recorded_class  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = io.StringIO()
    call_command("budget_lab", *args, stdout=out)
    return out.getvalue()


def _row(text: str, name: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith(name))
    return re.split(r"\s{2,}", line.strip())[1:]


def test_the_command_prints_the_pages_comparison(recorded_class):
    text = _run(
        "--class", recorded_class.slug, "--budget", "2000", "--kept", "2", "--tickets", "200", "--price-as", GPT
    )
    assert "Replayed the latest 1 of 1 tickets with recorded steps; costs at openai:gpt-4.1-mini's prices" in text
    assert _row(text, "token budget") == ["8,000", "2,000"]
    assert _row(text, "request tokens, peak") == ["2,188", "2,188", "1,756"]
    assert _row(text, "compactions") == ["0", "0", "1"]
    assert _row(text, "input tokens") == [f"{sum(RECORDED):,}", f"{sum(RECORDED):,}", f"{sum(PROPOSED_REQUESTS):,}"]
    assert _row(text, "IDs used later still usable") == ["no checks", "no checks"]  # the history makes no calls
    assert "Warning: Every request carries a fixed part" in text
    # Control: at the class's own settings the proposal is the current column and nothing warns.
    same = _run("--class", recorded_class.slug, "--price-as", GPT)
    assert _row(same, "request tokens, peak") == ["2,188", "2,188", "2,188"] and "Warning" not in same


@pytest.mark.parametrize(
    "args, error",
    [
        (["--class", "nope"], "No ticket class 'nope'. Classes: "),
        (["--budget", "6e999"], "--budget: Enter a whole number."),
        (["--tickets", "500"], "--tickets: Ensure this value is less than or equal to 200."),
        (["--trigger", "2"], "--trigger: Ensure this value is less than or equal to 0.95."),
    ],
)
def test_bad_options_are_refused_with_the_reason(recorded_class, args, error):
    args = args if args[0] == "--class" else ["--class", recorded_class.slug, *args]
    with pytest.raises(CommandError, match=re.escape(error)):
        _run(*args)
