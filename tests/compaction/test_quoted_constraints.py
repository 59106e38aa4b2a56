"""Compaction through the database quotes the customer's flagged sentences word for word; only those
the enforce threshold flags become candidate rules; a summary that paraphrases them is refused."""

from __future__ import annotations

import json

import pytest

from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.compaction.models import CompactionRun
from sundry.compaction.offline import OfflineSummariser
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.context.models import PinnedRule
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db

QUOTE_ONLY = "If I can't get the total under $950, can you just cancel the whole order?"
PREFERENCE = "I'd prefer the refund to my PayPal rather than store credit."
ENFORCED = "Never email me, phone only."


def _run():
    tclass = TicketClassFactory(approval_rules={}, recent_turns_kept=2, token_budget=2000, trigger_fraction=0.5)
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Order total")
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text=f"Hello. {QUOTE_ONLY} {PREFERENCE} {ENFORCED}")
    for i in range(12):
        turn_append(
            ticket=ticket,
            author=Turn.Author.AGENT,
            text=f"I am checking the order options for you now; this is update {i} of the search. " * 4,
        )
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text=f"Thanks, any news? ({i})")
    run = compaction_consider(ticket_id=ticket.pk)
    assert run is not None and run.from_turn == 1
    return ticket, run


def test_offline_summary_quotes_them_and_only_the_enforced_one_becomes_a_candidate_rule():
    ticket, run = _run()
    run = compaction_run(run.pk, gateway=Gateway(override=OfflineSummariser()))
    assert run.status == CompactionRun.Status.SUCCEEDED
    assert run.summary.fields["constraints_not_pinned"] == [QUOTE_ONLY, PREFERENCE, ENFORCED]
    made = PinnedRule.objects.filter(ticket=ticket, source="summariser")
    assert list(made.values_list("text", flat=True)) == [ENFORCED]


def test_a_paraphrase_is_refused_and_the_fallback_still_quotes():
    ticket, run = _run()
    paraphrase = json.dumps(
        {
            "decisions": [],
            "actions_taken": [],
            "open_questions": [],
            "narrative": "Order talk.",
            "constraints_not_pinned": ["cancel if over budget", "PayPal refund", "no email"],
        }
    )
    run = compaction_run(run.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=paraphrase)] * 2)))
    assert run.status == CompactionRun.Status.FALLBACK
    assert all("constraint_not_quoted" in a["reasons"] for a in run.attempt_log)
    assert run.summary.fields["constraints_not_pinned"] == [QUOTE_ONLY, PREFERENCE, ENFORCED]
    assert QUOTE_ONLY in run.summary.text
