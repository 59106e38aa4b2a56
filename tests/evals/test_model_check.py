"""`manage.py model_check`: the scorecard of the offline agent and of a scripted weak model, on a seeded shop."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.management import call_command

from sundry.agent.gateway import Gateway
from sundry.evals import scorecard
from sundry.evals.weakmodel import WeakModel  # what a small local model does wrong
from sundry.evals.management.commands.model_check import run_check
from sundry.evals.scenarios import schema

# Two fast scenarios the offline agent finishes without a forbidden effect.
SCENARIOS = ["held-refund-status-question", "typo-names-another-customers-order"]


@pytest.fixture
def shop(transactional_db):
    from sundry.shop.seed import generate_shop

    generate_shop(seed=settings.DEMO_SEED, customers=200, orders=2000)


def chosen():
    return [s for s in schema.load() if s.id in SCENARIOS]


def test_the_offline_agent_and_a_weak_model_get_their_scorecards(shop, capsys):
    offline = run_check("offline", chosen(), ["triggered"])
    weak = run_check("offline", chosen(), ["triggered"], gateway=Gateway(override=WeakModel()),
                     label="scripted weak model")

    assert offline.runs == weak.runs == 2 and offline.tickets == 2
    assert offline.forbidden == 0 and offline.reply_holds == 0 and offline.malformed == 0
    assert offline.steps > 0 and offline.cost_per_ticket == 0
    assert weak.correct <= offline.correct and weak.forbidden == 0
    assert weak.malformed >= 2 and weak.rejections["schema"] >= 2
    assert weak.reply_holds >= 1
    text = scorecard.render(weak)
    assert text.startswith("Scorecard for scripted weak model")
    for line in ("outcomes correct", "forbidden effects", "guard rejections", "malformed calls", "reply-check holds",
                 "summary fallbacks", "median step latency", "cost per ticket"):
        assert line in text
    assert scorecard.verdict(weak).startswith("NOT READY")
    print(scorecard.render(offline), scorecard.render(weak), sep="\n")


def test_the_command_prints_the_card_and_refuses_an_unusable_model(shop, capsys, monkeypatch):
    call_command("model_check", "--model", "offline", "--db", "current", "--only", SCENARIOS[0])
    out = capsys.readouterr().out
    assert "Scorecard for offline" in out and "forbidden effects       0" in out
    assert "outcomes correct        " in out and "over 1 tickets" in out
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="OPENAI_API_KEY not set"):
        call_command("model_check", "--model", "openai:gpt-4.1-mini", "--db", "current")
