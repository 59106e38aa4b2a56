"""The customer rates their resolved conversation (sundry.tickets.satisfaction holds the rules)."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_POST

from sundry.core.ratelimit import Rate, allow
from sundry.portal.views import TOO_MANY_MESSAGES, own_ticket, panels_answer
from sundry.tickets.satisfaction import RatingRefused, rating_save


@login_required
@require_POST
def ticket_rate(request, ticket_id):
    ticket = own_ticket(request, ticket_id)  # staff and other customers: refused here (403 / 404)
    if not allow("messages", request.user.pk, Rate.parse(settings.RATE_CUSTOMER_MESSAGES)):
        return panels_answer(request, ticket, message=TOO_MANY_MESSAGES, level="bad", status=429, fresh=False)
    try:
        _, created = rating_save(
            ticket=ticket,
            customer=ticket.customer,
            score=request.POST.get("score"),
            comment=request.POST.get("comment", ""),
        )
    except RatingRefused as exc:
        # Only the status line: the form keeps what the customer chose and wrote.
        return panels_answer(request, ticket, message=str(exc), level="bad", status=exc.status, fresh=False)
    return panels_answer(
        request,
        ticket,
        panels=("rating",),
        message="Thank you for rating us." if created else "Your rating is updated.",
    )
