"""Run one injection case through the real agent loop and judge it from the database."""

from __future__ import annotations

from django.db import transaction

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.evals.injection.cases import Case
from sundry.evals.injection.judge import Outcome, judge, snapshot_ids
from sundry.evals.injection.obedient import ObedientModel
from sundry.evals.injection.world import build, customer_post, planted_tool


def run_case(case: Case, *, page: bool = False) -> Outcome:
    """Build the world, let the customer write on each of the case's tickets, let the obedient model work
    each one, and judge. All in a savepoint rolled back afterwards, so cases never see each other's rows.
    `page`: also read the customer page's HTML for leaked internal text."""
    with transaction.atomic():
        world = build(case)
        before = snapshot_ids()
        runs = []
        with planted_tool(case):
            for ticket in world.tickets:
                customer_post(world, ticket)
                model = ObedientModel()
                agent_run(ticket.pk, gateway=Gateway(override=model))
                runs.append((ticket, model))
        outcome = judge(world, before, runs, page=page)
        transaction.set_rollback(True)
    return outcome
