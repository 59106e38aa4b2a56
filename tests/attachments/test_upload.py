"""Posting files with a message on the customer page and the desk; who may open them; what the agent reads."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from PIL import Image

from sundry.agent.services import customer_message_post
from sundry.attachments.models import Attachment
from sundry.attachments.services import FOLLOW_UP_TOOL
from sundry.context import render
from sundry.context.assembly import assemble
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.tools import REGISTRY
from tests.attachments import samples
from tests.attachments.conftest import stored_files
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def photo(name="damaged box.jpg", data=None, content_type="image/jpeg"):
    return SimpleUploadedFile(name, data if data is not None else samples.photo_jpeg(), content_type=content_type)


@pytest.fixture
def desk():
    users = get_user_model().objects
    alice_user, bob_user = users.create_user("alice"), users.create_user("bob")
    staff = users.create_user("sam", is_staff=True)  # force_login: no password to hash
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    tclass = TicketClassFactory()
    ticket = ticket_create(customer=alice.person, ticket_class=tclass, subject="Arrived broken")
    bobs = ticket_create(customer=bob.person, ticket_class=tclass, subject="Bob's")
    clients = {}
    for name, user in (("alice", alice_user), ("bob", bob_user), ("staff", staff)):
        clients[name] = Client()
        clients[name].force_login(user)
    clients["anon"] = Client()
    return {"ticket": ticket, "bobs": bobs, "c": clients, "staff": staff}


def post(client, ticket, text="The box was crushed, photo attached.", files=(), **extra):
    return client.post(f"/help/tickets/{ticket.pk}/message", {"text": text, "file": list(files), **extra}, **HX)


def urls(ticket, a, where="help"):
    base = f"/{where}/tickets/{ticket.pk}/files/{a.pk}"
    return base, base + "/thumb"


def test_a_customer_attaches_a_photo_and_sees_it_in_the_conversation(desk, attachment_dir):
    ticket, alice = desk["ticket"], desk["c"]["alice"]
    r = post(alice, ticket, files=[photo()])
    assert r.status_code == 200 and "Sent." in r.content.decode()
    a = Attachment.objects.get(ticket=ticket)
    assert (a.name, a.content_type, a.width, a.height) == ("damaged box.jpg", "image/jpeg", 64, 48)
    assert a.turn.author == "customer" and a.turn.kind == "message" and a.uploaded_by.username == "alice"
    assert a.turn.payload["attachments"][0]["id"] == a.pk
    assert len(stored_files(attachment_dir)) == 2  # the image and its thumbnail, under random names
    assert all("damaged" not in p.name for p in stored_files(attachment_dir))
    file_url, thumb_url = urls(ticket, a)
    page = alice.get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert f'src="{thumb_url}"' in page and f'href="{file_url}"' in page
    got = alice.get(file_url)
    assert got.status_code == 200 and got["Content-Type"] == "image/jpeg"
    assert got["X-Content-Type-Options"] == "nosniff" and "sandbox" in got["Content-Security-Policy"]
    assert "no-store" in got["Cache-Control"] and got["Content-Disposition"].startswith("inline")
    body = b"".join(got.streaming_content)
    assert not Image.open(io.BytesIO(body)).getexif()  # what is served is the re-encoded copy
    thumb = alice.get(thumb_url)
    assert thumb.status_code == 200 and Image.open(io.BytesIO(b"".join(thumb.streaming_content))).format == "JPEG"


def test_staff_see_the_thumbnail_on_the_desk_and_open_the_file(desk):
    ticket, staff = desk["ticket"], desk["c"]["staff"]
    post(desk["c"]["alice"], ticket, files=[photo()])
    a = Attachment.objects.get(ticket=ticket)
    file_url, thumb_url = urls(ticket, a, "desk")
    page = staff.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert f'src="{thumb_url}"' in page
    assert "The customer attached a file to their message" in page  # the event the agent read, shown to staff
    assert staff.get(file_url).status_code == 200 and staff.get(thumb_url).status_code == 200


def test_another_customer_gets_404_for_the_file_and_the_thumbnail_and_nobody_else_gets_in(desk):
    ticket = desk["ticket"]
    post(desk["c"]["alice"], ticket, files=[photo()])
    a = Attachment.objects.get(ticket=ticket)
    file_url, thumb_url = urls(ticket, a)
    bob = desk["c"]["bob"]
    assert bob.get(file_url).status_code == 404 and bob.get(thumb_url).status_code == 404
    # Nor through his own ticket's URL with her file's number.
    assert bob.get(f"/help/tickets/{desk['bobs'].pk}/files/{a.pk}").status_code == 404
    assert bob.get(f"/help/tickets/{desk['bobs'].pk}/files/{a.pk}/thumb").status_code == 404
    # The desk's URLs are for staff; the customer's for the customer; no session, no file.
    assert desk["c"]["alice"].get(urls(ticket, a, "desk")[0]).status_code == 403
    assert desk["c"]["staff"].get(file_url).status_code == 403
    anon = desk["c"]["anon"].get(file_url)
    assert anon.status_code == 302 and "/login/" in anon["Location"]
    # Control: the owner does get it.
    assert desk["c"]["alice"].get(file_url).status_code == 200


def test_a_refused_file_stores_nothing_and_says_the_text_is_kept(desk, attachment_dir, settings):
    ticket, alice = desk["ticket"], desk["c"]["alice"]
    before = Turn.objects.filter(ticket=ticket).count(), Ticket.objects.get(pk=ticket.pk).version
    for upload, reason in (
        (photo("box.jpg", samples.HTML), "not a JPEG image"),
        (photo("box.jpg", samples.png_magic_then_html()), "could not be read as a PNG"),
    ):
        r = post(alice, ticket, files=[upload])
        assert r.status_code == 422 and reason in r.content.decode() and "still in the box" in r.content.decode()
    settings.ATTACHMENT_MAX_BYTES = 2048
    r = post(alice, ticket, files=[photo("big.png", samples.png(size=(300, 300)) + b"\0" * 4096, "image/png")])
    assert r.status_code == 422 and "the limit is 2 KB a file" in r.content.decode()
    # With one good file and one bad, neither goes.
    r = post(alice, ticket, files=[photo(), photo("x.jpg", samples.HTML)])
    assert r.status_code == 422
    assert (Turn.objects.filter(ticket=ticket).count(), Ticket.objects.get(pk=ticket.pk).version) == before
    assert not Attachment.objects.exists() and stored_files(attachment_dir) == []


def test_the_agents_request_names_the_attachment_but_not_its_content(desk):
    ticket = desk["ticket"]
    post(desk["c"]["alice"], ticket, text="It arrived crushed.", files=[photo()])
    event = Turn.objects.get(ticket=ticket, kind="event", payload__attachments_of__isnull=False)
    request = assemble(lane_snapshot(ticket), model="offline").request
    notices = [m.content for m in request.messages if "attached a file" in m.content]
    assert len(notices) == 1, [m.content for m in request.messages]
    notice = notices[0]
    assert notice.startswith(render.SYSTEM_EVENT_PREFIX)  # an event, never the customer's own words
    assert "“damaged box.jpg” (JPEG image, " in notice and "KB, 64×48 pixels)" in notice
    assert f"turn {event.number - 1}" in notice and FOLLOW_UP_TOOL in notice
    assert FOLLOW_UP_TOOL in REGISTRY  # the tool it names exists
    a = Attachment.objects.get(ticket=ticket)
    assert a.key not in notice and a.sha256 not in notice and "/files/" not in notice
    customer_says = [m.content for m in request.messages if render.is_customer_message(m)]
    assert customer_says == ["It arrived crushed."]


def test_negative_control_without_a_file_the_request_mentions_none(desk):
    ticket = desk["ticket"]
    post(desk["c"]["alice"], ticket, text="It arrived crushed.")
    request = assemble(lane_snapshot(ticket), model="offline").request
    assert not [m for m in request.messages if "attached" in m.content]
    assert not Turn.objects.filter(ticket=ticket, kind="event").exists()


def test_a_photo_alone_is_a_message_that_names_it(desk):
    ticket = desk["ticket"]
    assert post(desk["c"]["alice"], ticket, text="", files=[photo()]).status_code == 200
    assert Turn.objects.get(ticket=ticket, kind="message").text == "Attached damaged box.jpg."
    assert post(desk["c"]["alice"], ticket, text="").status_code == 422  # no words and no file: refused as before


def test_a_resent_message_stores_its_file_once_and_leaves_no_stray_copy(desk, attachment_dir):
    ticket = desk["ticket"]
    for _ in range(2):
        assert post(desk["c"]["alice"], ticket, files=[photo()], client_key="k-photo-1").status_code == 200
    assert Attachment.objects.count() == 1 and len(stored_files(attachment_dir)) == 2


def test_staff_attach_a_pdf_to_a_reply_and_the_customer_downloads_it(desk):
    ticket, staff = desk["ticket"], desk["c"]["staff"]
    staff.post(f"/desk/tickets/{ticket.pk}/update", {"field": "assignee", "value": "me"}, **HX)
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff")
    pdf = SimpleUploadedFile("return label.pdf", samples.pdf(), content_type="application/pdf")
    r = staff.post(
        f"/desk/tickets/{ticket.pk}/post", {"action": "reply", "text": "Here is your label.", "file": [pdf]}, **HX
    )
    assert r.status_code == 200, r.content.decode()
    a = Attachment.objects.get(ticket=ticket)
    assert a.turn.author == "staff" and a.uploaded_by == desk["staff"] and not a.thumb_key
    got = desk["c"]["alice"].get(urls(ticket, a)[0])
    assert got.status_code == 200 and got["Content-Type"] == "application/pdf"
    assert (
        got["Content-Disposition"].startswith("attachment")
        and 'filename="return label.pdf"' in got["Content-Disposition"]
    )
    assert desk["c"]["alice"].get(urls(ticket, a)[1]).status_code == 404  # a PDF has no thumbnail
    page = desk["c"]["alice"].get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert "return label.pdf" in page


def test_a_file_with_a_staff_note_is_refused_and_nothing_is_written(desk, attachment_dir):
    ticket, staff = desk["ticket"], desk["c"]["staff"]
    before = Turn.objects.filter(ticket=ticket).count()
    for action in ("note", "internal"):
        r = staff.post(
            f"/desk/tickets/{ticket.pk}/post", {"action": action, "text": "see photo", "file": [photo()]}, **HX
        )
        assert r.status_code == 422 and "Files go with a reply" in r.content.decode()
    assert Turn.objects.filter(ticket=ticket).count() == before and stored_files(attachment_dir) == []


def test_a_file_on_a_turn_the_customer_does_not_see_is_not_theirs_to_open(desk):
    # Defence in depth: should a file ever hang on an event or note, the customer's URL does not serve it.
    ticket = desk["ticket"]
    post(desk["c"]["alice"], ticket, files=[photo()])
    a = Attachment.objects.get(ticket=ticket)
    event = Turn.objects.get(ticket=ticket, kind="event")
    Attachment.objects.filter(pk=a.pk).update(turn=event)
    assert desk["c"]["alice"].get(urls(ticket, a)[0]).status_code == 404
    assert desk["c"]["staff"].get(urls(ticket, a, "desk")[0]).status_code == 200


def test_the_service_refuses_before_writing_when_called_directly(desk):
    from sundry.attachments.prepare import AttachmentRefused

    with pytest.raises(AttachmentRefused):
        customer_message_post(ticket=desk["ticket"], text="hi", uploads=[photo("a.jpg", samples.HTML)])
    assert not Turn.objects.filter(ticket=desk["ticket"]).exists()


def test_a_file_past_the_limit_is_counted_not_kept_and_refused_with_the_limit(desk, settings, monkeypatch):
    from django.core.files.uploadhandler import TemporaryFileUploadHandler

    settings.ATTACHMENT_MAX_BYTES = 64 * 1024
    kept = []
    real = TemporaryFileUploadHandler.receive_data_chunk
    monkeypatch.setattr(
        TemporaryFileUploadHandler,
        "receive_data_chunk",
        lambda self, raw, start: kept.append(len(raw)) or real(self, raw, start),
    )
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # every file to the temporary-file handler, where we count
    big = photo("huge.png", samples.png() + b"\0" * (1024 * 1024), "image/png")
    r = post(desk["c"]["alice"], desk["ticket"], files=[big])
    assert r.status_code == 422 and "is 1.0 MB; the limit is 64 KB a file" in r.content.decode()
    assert sum(kept) <= 64 * 1024 + 64 * 1024  # at most the limit and one chunk reached the disk, not 1 MB
    assert not Turn.objects.filter(ticket=desk["ticket"]).exists()


def test_negative_control_without_the_capping_handler_the_whole_file_is_spooled(desk, settings, monkeypatch):
    from django.core.files.uploadhandler import TemporaryFileUploadHandler

    settings.ATTACHMENT_MAX_BYTES = 64 * 1024
    settings.FILE_UPLOAD_HANDLERS = settings.FILE_UPLOAD_HANDLERS[1:]
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0
    kept = []
    real = TemporaryFileUploadHandler.receive_data_chunk
    monkeypatch.setattr(
        TemporaryFileUploadHandler,
        "receive_data_chunk",
        lambda self, raw, start: kept.append(len(raw)) or real(self, raw, start),
    )
    big = photo("huge.png", samples.png() + b"\0" * (1024 * 1024), "image/png")
    assert post(desk["c"]["alice"], desk["ticket"], files=[big]).status_code == 422  # still refused, by size
    assert sum(kept) > 1024 * 1024  # but all of it was written to a temporary file first
