"""Customer satisfaction: who may rate which ticket and when, bad input, the credit rule, the desk's
line, and CSAT per class and per agent on the figures page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.services import customer_message_post, staff_reply_post, ticket_set_handler
from sundry.desk.lifecycle import ticket_create, ticket_set_status
from sundry.tickets.models import Rating
from sundry.tickets.satisfaction import COMMENT_LIMIT, csat_by_agent, csat_by_class
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world():
    users = get_user_model().objects
    ann = users.create_user("ann", is_staff=True)
    ada = users.create_superuser("ada")
    alice_user, bob_user = users.create_user("alice"), users.create_user("bob")
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    tclass = TicketClassFactory(name="Orders", slug="orders")
    ticket = ticket_create(customer=alice.person, ticket_class=tclass, subject="Broken kettle")
    customer_message_post(ticket=ticket, text="My kettle is broken.", wake=False)
    turn_append(ticket=ticket, author="agent", text="A replacement is on its way.")
    clients = {}
    for name, user in (("alice", alice_user), ("bob", bob_user), ("ann", ann), ("ada", ada)):
        clients[name] = Client()
        clients[name].force_login(user)
    return {"ann": ann, "alice": alice, "bob": bob, "tclass": tclass, "ticket": ticket, "clients": clients}


def rate(client, ticket, score="5", comment=""):
    return client.post(f"/help/tickets/{ticket.pk}/rating", {"score": score, "comment": comment}, **HTMX)


def resolved(world, ticket=None):
    ticket = ticket or world["ticket"]
    ticket_set_status(ticket=ticket, status="resolved", user=world["ann"])
    return ticket


def test_only_the_tickets_customer_rates_it_once_resolved_and_may_change_it(world):
    alice, ticket = world["clients"]["alice"], world["ticket"]
    # Not resolved yet: refused, nothing stored, and the page asks for nothing.
    r = rate(alice, ticket)
    assert r.status_code == 409 and "once it is resolved" in r.content.decode()
    assert 'class="rating" aria-label="Your rating" hidden' in alice.get(f"/help/tickets/{ticket.pk}/").content.decode()
    resolved(world)
    page = alice.get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert "How did we do?" in page and 'value="5"' in page
    # Another customer, a member of staff, an admin and nobody signed in: refused, nothing stored.
    assert rate(world["clients"]["bob"], ticket).status_code == 404
    assert rate(world["clients"]["ann"], ticket).status_code == 403
    assert rate(world["clients"]["ada"], ticket).status_code == 403
    assert rate(Client(), ticket).status_code == 401  # an htmx post without a session: sign in again
    assert not Rating.objects.exists()

    r = rate(alice, ticket, "4", "Quick, but the box was damaged.")
    assert r.status_code == 200 and "Thank you for rating us." in r.content.decode()
    assert "4 of 5 — Good" in r.content.decode()  # the panel comes back with the answer
    r = rate(alice, ticket, "2", "The replacement never came.")
    assert r.status_code == 200 and "Your rating is updated." in r.content.decode()
    assert list(Rating.objects.values_list("ticket", "score", "comment")) == [
        (ticket.pk, 2, "The replacement never came.")
    ]  # one rating per ticket, the latest word
    # The desk shows it on the ticket, with whom it is credited to.
    head = world["clients"]["ann"].get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "2 of 5 — Poor" in head and "The replacement never came." in head and "credited to AI agent" in head
    # Reopened by writing again: the rating stays, and a new one waits for the next resolution.
    customer_message_post(ticket=ticket, text="Still nothing.", wake=False)
    assert rate(alice, ticket, "1").status_code == 409
    assert Rating.objects.get().score == 2


def test_a_bad_score_is_refused_plainly_and_stores_nothing(world):
    ticket = resolved(world)
    for score in ["0", "6", "45", "-1", "4.0", "²", "٤", "four", "", " ", "[4]"]:
        r = rate(world["clients"]["alice"], ticket, score, "kept")
        assert r.status_code == 422, score
        assert "Choose a rating from 1 (very poor) to 5 (very good)." in r.content.decode()
    assert not Rating.objects.exists()
    assert rate(world["clients"]["alice"], ticket, "1", "kept").status_code == 200  # control: a good score is taken


def test_a_comment_over_the_limit_is_refused_and_the_earlier_rating_stands(world):
    alice, ticket = world["clients"]["alice"], resolved(world)
    assert rate(alice, ticket, "5", "Great").status_code == 200
    r = rate(alice, ticket, "1", "x" * (COMMENT_LIMIT + 1))
    assert r.status_code == 422 and f"the limit is {COMMENT_LIMIT:,}" in r.content.decode()
    assert alice.post(f"/help/tickets/{ticket.pk}/rating", {"comment": "no score"}, **HTMX).status_code == 422
    assert list(Rating.objects.values_list("score", "comment")) == [(5, "Great")]


def test_the_rating_is_credited_to_the_author_of_the_last_reply(world):
    alice, ticket = world["clients"]["alice"], resolved(world)
    rate(alice, ticket, "5")
    assert (Rating.objects.get().credited, Rating.objects.get().credited_staff) == ("agent", None)
    # Ann takes over and answers; the customer changes the rating: it now counts for Ann.
    customer_message_post(ticket=ticket, text="One more thing.", wake=False)
    ticket_set_handler(ticket=ticket, handler="staff", user=world["ann"])
    staff_reply_post(ticket=ticket, text="Ann here: sorted.", user=world["ann"])
    resolved(world)
    rate(alice, ticket, "3")
    rating = Rating.objects.get()
    assert (rating.credited, rating.credited_staff) == ("staff", world["ann"])


def _rated(world, tclass, score: int, by=None):
    ticket = ticket_create(customer=world["alice"].person, ticket_class=tclass, subject=f"Rated {score}")
    customer_message_post(ticket=ticket, text="Hello", wake=False)
    if by is None:
        turn_append(ticket=ticket, author="agent", text="Done.")
    else:
        ticket_set_handler(ticket=ticket, handler="staff", user=by)
        staff_reply_post(ticket=ticket, text="Done.", user=by)
    resolved(world, ticket)
    assert rate(world["clients"]["alice"], ticket, str(score)).status_code == 200


def test_csat_per_class_and_per_agent_on_the_figures_page(world):
    ann, ben = world["ann"], get_user_model().objects.create_user("ben", is_staff=True)
    orders, returns = world["tclass"], TicketClassFactory(name="Returns", slug="returns")
    TicketClassFactory(name="Quiet", slug="quiet")  # rated by nobody
    # Control before any rating: no figure is made up (no 0%), and the agents' table says so.
    page = world["clients"]["ada"].get("/desk/figures/").content.decode()
    assert "No ratings yet." in page
    assert [(c.label, c.ratings, c.share) for c in csat_by_class()] == [
        ("Orders", 0, None),
        ("Quiet", 0, None),
        ("Returns", 0, None),
    ]

    for score, by in ((5, None), (4, None), (2, None), (3, ann)):
        _rated(world, orders, score, by)
    for score, by in ((1, ann), (5, ben), (3, None)):
        _rated(world, returns, score, by)

    by_class = {c.label: (c.ratings, c.satisfied, c.share, c.mean) for c in csat_by_class()}
    assert by_class == {"Orders": (4, 2, 50, 3.5), "Returns": (3, 1, 33, 3.0), "Quiet": (0, 0, None, None)}
    by_agent = [(c.label, c.ratings, c.satisfied, c.share, c.mean) for c in csat_by_agent()]
    assert by_agent == [("AI agent", 4, 2, 50, 3.5), ("ann", 2, 0, 0, 2.0), ("ben", 1, 1, 100, 5.0)]
    # Control on the threshold: a 3 is "okay", not satisfied — Returns' mean is 3.0 and its CSAT a third.
    page = world["clients"]["ada"].get("/desk/figures/").content.decode()
    assert '<tr data-csat="Orders"><th scope="row">Orders</th><td>4</td><td>50%' in page
    assert '<tr data-csat="ann"><th scope="row">ann</th><td>2</td><td>0%' in page
    assert '<tr data-csat="Quiet"><th scope="row">Quiet</th><td>0</td><td>–' in page
    # Staff who are not admins do not see the figures.
    assert world["clients"]["ann"].get("/desk/figures/").status_code == 403
