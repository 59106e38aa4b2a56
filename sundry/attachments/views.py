"""The only way to a stored file: a view that checks who is asking, for which ticket.

A customer reaches the files of their own tickets' conversation (their messages and
staff replies); staff reach any ticket's. Someone else's file looks exactly like a
missing one (404). The response is the file's sniffed type, never sniffed again by
the browser, sandboxed, not cached, and a PDF always downloads rather than opens.
"""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404
from django.views.decorators.http import require_GET

from sundry.attachments import storage
from sundry.attachments.models import Attachment
from sundry.attachments.sniff import JPEG, PNG
from sundry.core.people import is_desk_staff
from sundry.people.selectors import customer_of
from sundry.tickets.models import Turn

VARIANTS = ("file", "thumb")


def _serve(attachment: Attachment, variant: str) -> FileResponse:
    if variant not in VARIANTS:
        raise Http404("No such view of this file.")
    thumb = variant == "thumb"
    key = attachment.thumb_key if thumb else attachment.key
    if not key:
        raise Http404("This file has no thumbnail.")
    try:
        handle = storage.open_file(key)
    except (FileNotFoundError, OSError) as exc:
        raise Http404("The file is missing from storage.") from exc
    content_type = (PNG if key.endswith(".png") else JPEG) if thumb else attachment.content_type
    response = FileResponse(
        handle, content_type=content_type, as_attachment=not attachment.is_image, filename=attachment.name
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; img-src 'self'; sandbox"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Cache-Control"] = "private, no-store"
    return response


@login_required
@require_GET
def customer_file(request, ticket_id: int, attachment_id: int, variant: str = "file"):
    customer = customer_of(request.user)
    if customer is None:
        raise PermissionDenied("This page is for customers.")
    attachment = Attachment.objects.filter(
        pk=attachment_id, ticket_id=ticket_id, ticket__customer=customer, turn__kind=Turn.Kind.MESSAGE
    ).first()
    if attachment is None:
        raise Http404("No such file on this conversation.")
    return _serve(attachment, variant)


@login_required
@require_GET
def desk_file(request, ticket_id: int, attachment_id: int, variant: str = "file"):
    if not is_desk_staff(request.user):
        raise PermissionDenied("This page is for staff.")
    attachment = Attachment.objects.filter(pk=attachment_id, ticket_id=ticket_id).first()
    if attachment is None:
        raise Http404("No such file on this ticket.")
    return _serve(attachment, variant)
