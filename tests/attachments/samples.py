"""Files for the attachment tests, made here (no fixtures on disk): a phone photo with GPS in its
EXIF, the same kinds under wrong names, polyglots and a decompression bomb."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import ExifTags, Image

GPS_LATITUDE = (51.0, 30.0, 26.0)
CAMERA = "SundryTestPhone"


def photo_jpeg(size=(64, 48), colour=(200, 40, 40)) -> bytes:
    """A JPEG like a phone's: camera make, an orientation and a GPS position in its EXIF."""
    exif = Image.Exif()
    exif[ExifTags.Base.Make] = CAMERA
    exif[ExifTags.Base.Orientation] = 1
    gps = exif.get_ifd(ExifTags.IFD.GPSInfo)
    gps[ExifTags.GPS.GPSLatitudeRef] = "N"
    gps[ExifTags.GPS.GPSLatitude] = GPS_LATITUDE
    gps[ExifTags.GPS.GPSLongitudeRef] = "W"
    gps[ExifTags.GPS.GPSLongitude] = (0.0, 7.0, 39.0)
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "JPEG", exif=exif, quality=90)
    return out.getvalue()


def png(size=(40, 30), mode="RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, (10, 120, 200) if mode == "RGB" else (10, 120, 200, 128)).save(out, "PNG")
    return out.getvalue()


def webp(size=(40, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (0, 160, 0)).save(out, "WEBP")
    return out.getvalue()


HTML = b"<!DOCTYPE html><html><body><script>fetch('/desk/').then(r=>r.text()).then(alert)</script></body></html>"
SCRIPT = b"<script>alert(document.cookie)</script>"


def jpeg_with_html_appended() -> bytes:
    """A polyglot: a valid JPEG (viewers stop at its end marker) with a web page after it."""
    return photo_jpeg() + HTML


def png_magic_then_html() -> bytes:
    """A polyglot that only pretends: PNG's magic bytes, then a web page rather than image chunks."""
    return b"\x89PNG\r\n\x1a\n" + HTML


def pdf(body: bytes = b"") -> bytes:
    """A minimal one-page PDF; `body` goes inside a comment-free content stream."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, obj in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def pdf_with_javascript() -> bytes:
    """A PDF that runs a script when opened, its name hidden behind a #xx escape."""
    return pdf().replace(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Catalog /Pages 2 0 R /OpenAction << /S /J#61vaScript /JS (app.alert(1)) >> >>",
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bomb(side: int = 60_000) -> bytes:
    """A PNG a few hundred bytes long that declares side×side pixels (3.6 gigapixels at the default)."""
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # 1-bit greyscale
    row = b"\x00" + b"\x00" * (side // 8)
    data = zlib.compress(row * 8, 9)  # the first rows only: a decoder would ask for the rest
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")
