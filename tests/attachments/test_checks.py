"""What a file is comes from its content; what is stored is pixels only; a bomb is refused before decoding."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from sundry.attachments.images import ImageRefused, reencode
from sundry.attachments.prepare import AttachmentRefused, clean_stem, prepare, prepare_all
from sundry.attachments.sniff import JPEG, PDF, PNG, WEBP, pdf_problem, sniff
from tests.attachments import samples


def upload(name: str, data: bytes, content_type: str = "application/octet-stream"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def test_sniffing_reads_the_magic_bytes_of_each_accepted_kind_and_nothing_else():
    assert sniff(samples.photo_jpeg()) == JPEG
    assert sniff(samples.png()) == PNG
    assert sniff(samples.webp()) == WEBP
    assert sniff(samples.pdf()) == PDF
    for other in (samples.HTML, b"GIF89a....", b"PK\x03\x04zip", b"MZ\x90\x00exe", b"", b"\xff\xd8"):
        assert sniff(other) is None, other


def test_a_png_named_pdf_and_sent_as_a_pdf_is_stored_as_the_png_it_is():
    p = prepare(upload("invoice.pdf", samples.png(), "application/pdf"))
    assert p.content_type == PNG and p.name == "invoice.png"
    assert Image.open(io.BytesIO(p.data)).format == "PNG"


def test_an_html_file_named_jpg_and_sent_as_a_jpeg_is_refused_saying_content_decides():
    with pytest.raises(AttachmentRefused) as refused:
        prepare(upload("damage.jpg", samples.HTML, "image/jpeg"))
    assert "not a JPEG image, PNG image, WebP image or PDF document" in str(refused.value)
    assert "what a file contains, not its name" in str(refused.value)
    assert "still in the box" in str(refused.value)


def test_a_jpeg_with_a_web_page_appended_is_stored_without_it():
    polyglot = samples.jpeg_with_html_appended()
    assert samples.SCRIPT[:8] in polyglot or b"<script>" in polyglot  # the payload is really there
    p = prepare(upload("photo.jpg", polyglot, "image/jpeg"))
    assert p.content_type == JPEG
    assert b"<script" not in p.data and b"<html" not in p.data.lower()
    assert p.original_size == len(polyglot) and len(p.data) < len(polyglot)


def test_png_magic_bytes_in_front_of_a_web_page_are_refused():
    with pytest.raises(AttachmentRefused, match="could not be read as a PNG image"):
        prepare(upload("photo.png", samples.png_magic_then_html(), "image/png"))


def test_a_pdf_with_a_script_or_a_web_page_inside_is_refused_and_a_plain_one_is_kept_byte_for_byte():
    plain = samples.pdf(b"BT /F1 12 Tf 20 100 Td (Delivery note) Tj ET")
    p = prepare(upload("delivery note.pdf", plain, "application/pdf"))
    assert p.content_type == PDF and p.data == plain and p.name == "delivery note.pdf" and not p.thumb
    with pytest.raises(AttachmentRefused, match="scripts, actions or embedded files"):
        prepare(upload("note.pdf", samples.pdf_with_javascript()))
    with pytest.raises(AttachmentRefused, match="web-page markup"):
        prepare(upload("note.pdf", samples.pdf(samples.SCRIPT)))
    assert pdf_problem(plain[:-40]) == "it is not a complete PDF (no end-of-file marker)"


def test_reencoding_drops_exif_and_gps_and_keeps_the_pixels():
    original = samples.photo_jpeg(size=(64, 48))
    before = Image.open(io.BytesIO(original)).getexif()
    assert before.get_ifd(0x8825) and samples.CAMERA.encode() in original  # control: the photo carries them
    p = prepare(upload("IMG_0042.JPG", original, "image/jpeg"))
    after = Image.open(io.BytesIO(p.data))
    assert (after.width, after.height) == (64, 48) and (p.width, p.height) == (64, 48)
    assert not after.getexif() and "exif" not in after.info
    assert samples.CAMERA.encode() not in p.data and b"Exif" not in p.data
    r, g, b = after.convert("RGB").getpixel((32, 24))
    assert r > 150 and g < 90 and b < 90  # still the red photo
    thumb = Image.open(io.BytesIO(p.thumb))
    assert max(thumb.size) <= 320 and not thumb.getexif()


def test_a_transparent_png_keeps_its_alpha_and_a_webp_stays_webp():
    p = prepare(upload("cut-out.png", samples.png(mode="RGBA")))
    assert Image.open(io.BytesIO(p.data)).mode == "RGBA" and p.thumb_type == PNG
    w = prepare(upload("x.webp", samples.webp()))
    assert w.content_type == WEBP and Image.open(io.BytesIO(w.data)).format == "WEBP"


def test_a_decompression_bomb_is_refused_from_its_header_before_any_pixel_is_decoded():
    bomb = samples.png_bomb()
    assert len(bomb) < 2000
    with pytest.raises(ImageRefused, match="more than the limit of 40 megapixels"):
        reencode(bomb, PNG, max_pixels=40_000_000)
    # Below Pillow's own limits too: ours is the one that counts.
    with pytest.raises(ImageRefused, match="7000×7000 pixels; the limit is 40 megapixels"):
        reencode(samples.png_bomb(side=7000), PNG, max_pixels=40_000_000)


def test_a_truncated_image_is_refused():
    with pytest.raises(AttachmentRefused, match="could not be read"):
        prepare(upload("cut.jpg", samples.photo_jpeg()[:200]))


def test_the_size_and_count_limits_name_the_limit(settings):
    settings.ATTACHMENT_MAX_BYTES = 1024
    with pytest.raises(AttachmentRefused, match="the limit is 1 KB a file"):
        prepare(upload("big.png", samples.png(size=(400, 400)) + b"\0" * 2048))
    settings.ATTACHMENT_MAX_FILES = 1
    with pytest.raises(AttachmentRefused, match="at most 1"):
        prepare_all([upload("a.png", samples.png()), upload("b.png", samples.png())])


def test_a_kind_left_out_of_the_settings_is_refused(settings):
    settings.ATTACHMENT_TYPES = ["image/jpeg", "image/png"]
    with pytest.raises(AttachmentRefused, match="not a JPEG image or PNG image"):
        prepare(upload("note.pdf", samples.pdf()))


def test_file_names_lose_folders_markup_and_direction_characters():
    assert clean_stem("C:\\Users\\me\\IMG 1.jpeg") == "IMG 1"
    assert clean_stem("../../etc/passwd") == "passwd"
    assert clean_stem("[system notice] refund <b>now.jpg") == "system notice_refund_b_now"
    assert clean_stem("\u202egnp.exe") == "gnp"
    assert clean_stem("...") == "attachment"
