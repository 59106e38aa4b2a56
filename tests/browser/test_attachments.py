"""A customer attaches a photo on their page; staff see its thumbnail on the desk. A file the page
refuses is explained next to the box, and the message stays in it."""

from __future__ import annotations

import io
import os

import pytest
from PIL import Image, ImageDraw

from sundry.attachments.models import Attachment
from sundry.desk.lifecycle import ticket_create
from tests.attachments import samples
from tests.browser.test_live_desk import LIVE, open_as, people  # noqa: F401  (people: fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOADED = "(img) => img.complete && img.naturalWidth > 0"


@pytest.fixture(scope="module", autouse=True)
def attachment_dir(tmp_path_factory):
    # Set before the module's own live server starts (below), so its files land here, not in var/.
    folder = tmp_path_factory.mktemp("attachments")
    previous = os.environ.get("SUNDRY_ATTACHMENT_DIR")
    os.environ["SUNDRY_ATTACHMENT_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("SUNDRY_ATTACHMENT_DIR", None)
    else:
        os.environ["SUNDRY_ATTACHMENT_DIR"] = previous


@pytest.fixture(scope="module")
def live_server_url(attachment_dir, private_live_server_url):  # a server of its own, writing to that folder
    return private_live_server_url


def damaged_parcel_photo() -> bytes:
    """A drawn 'photo' of a crushed parcel (so the screenshot shows something), with GPS in its EXIF."""
    im = Image.new("RGB", (640, 480), (222, 226, 230))
    d = ImageDraw.Draw(im)
    d.polygon([(120, 160), (470, 130), (520, 380), (150, 410)], fill=(176, 129, 79), outline=(90, 60, 30))
    d.line([(300, 140), (270, 260), (330, 300), (290, 400)], fill=(60, 40, 20), width=7)  # the split
    d.polygon([(470, 130), (560, 170), (590, 360), (520, 380)], fill=(150, 105, 60), outline=(90, 60, 30))
    d.rectangle([(190, 200), (260, 240)], fill=(245, 245, 245), outline=(120, 120, 120))  # the label
    out = io.BytesIO()
    exif = Image.open(io.BytesIO(samples.photo_jpeg())).getexif()
    im.save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


def test_a_customer_uploads_a_photo_and_staff_see_its_thumbnail(
    browser, live_server_url, people, screenshots, attachment_dir
):
    from playwright.sync_api import expect

    ticket = ticket_create(
        customer=people["alice"].person, ticket_class=people["tclass"], subject="Kettle arrived crushed"
    )
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    words = "The box was crushed and the kettle's lid is cracked. Photo attached."
    customer.fill("#message-text", words)

    # First a web page named .jpg: refused, explained beside the box, the words kept.
    customer.set_input_files(
        "input[name=file]", files=[{"name": "kettle.jpg", "mimeType": "image/jpeg", "buffer": samples.HTML}]
    )
    customer.locator("button", has_text="Send").click()
    expect(customer.locator(".composer .form-error")).to_contain_text("not a JPEG image", timeout=LIVE)
    expect(customer.locator("#message-text")).to_have_value(words)
    assert not Attachment.objects.filter(ticket=ticket).exists()

    customer.set_input_files(
        "input[name=file]", files=[{"name": "IMG_2041.jpg", "mimeType": "image/jpeg", "buffer": damaged_parcel_photo()}]
    )
    customer.locator("button", has_text="Send").click()
    mine = customer.locator("#panel-conversation .turn.customer", has_text="lid is cracked")
    thumb = mine.locator(".attachments img")
    expect(thumb).to_have_count(1, timeout=LIVE)
    customer.wait_for_function(LOADED, arg=thumb.element_handle(), timeout=LIVE)
    expect(customer.locator("#message-text")).to_have_value("")  # sent: the box is cleared
    expect(mine.locator(".attachments")).to_contain_text("IMG_2041.jpg")
    mine.screenshot(path=str(screenshots / "customer-attachment.png"))

    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    message = staff.locator("#panel-conversation .turn.customer.message", has_text="lid is cracked")
    desk_thumb = message.locator(".attachments img")
    expect(desk_thumb).to_have_count(1)
    staff.wait_for_function(LOADED, arg=desk_thumb.element_handle(), timeout=LIVE)
    assert desk_thumb.get_attribute("src").startswith(f"/desk/tickets/{ticket.pk}/files/")
    expect(staff.locator("#panel-conversation")).to_contain_text("The customer attached a file to their message")
    size = desk_thumb.evaluate("(img) => [img.naturalWidth, img.naturalHeight]")
    assert size == [320, 240]  # the thumbnail, not the 640×480 photo
    message.screenshot(path=str(screenshots / "desk-attachment.png"))
    # The photo was stored re-encoded: the GPS position it was sent with is gone.
    stored = Attachment.objects.get(ticket=ticket)
    data = (attachment_dir / stored.key).read_bytes()
    assert samples.CAMERA.encode() not in data and not Image.open(io.BytesIO(data)).getexif()
    for context in (customer.context, staff.context):
        context.close()
