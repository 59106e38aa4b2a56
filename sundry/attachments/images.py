"""Images are decoded and written afresh with Pillow: only pixels survive.

What a photo carries besides its pixels (EXIF with the phone's GPS position,
comments, ICC profiles, anything appended after the image data, a script
hidden in a polyglot) is not copied into the new file. The declared size is
checked before any pixel is decoded, so a small file that would inflate to
gigabytes (a decompression bomb) is refused cheaply.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from sundry.attachments.sniff import JPEG, PNG, WEBP

PIL_FORMATS = {JPEG: "JPEG", PNG: "PNG", WEBP: "WEBP"}
THUMB_BOX = (320, 320)


class ImageRefused(ValueError):
    """The file is not an image Sundry will store; the text says why, for the sender."""


@dataclass(frozen=True)
class Encoded:
    data: bytes
    width: int
    height: int
    thumb: bytes
    thumb_type: str


def _has_alpha(im: Image.Image) -> bool:
    return "A" in im.getbands() or "transparency" in im.info


def reencode(data: bytes, kind: str, *, max_pixels: int) -> Encoded:
    fmt = PIL_FORMATS[kind]
    with warnings.catch_warnings():
        # Pillow's own bomb check only warns below twice its limit; here any warning of it refuses.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data), formats=[fmt])
            width, height = im.size
            if width < 1 or height < 1:
                raise ImageRefused("the image has no pixels")
            if width * height > max_pixels:
                raise ImageRefused(
                    f"the image is {width}×{height} pixels; the limit is {max_pixels / 1_000_000:g} megapixels"
                )
            im.seek(0)  # an animation keeps its first frame only
            im.load()
            upright = ImageOps.exif_transpose(im)  # as the camera meant it, before its EXIF is dropped
        except ImageRefused:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            # Pillow's own check, at open, for sizes far past ours: the same refusal.
            raise ImageRefused(
                f"the image declares more than the limit of {max_pixels / 1_000_000:g} megapixels"
            ) from exc
        except UnidentifiedImageError as exc:
            raise ImageRefused(f"it could not be read as a {fmt} image") from exc
        except (OSError, SyntaxError, ValueError, EOFError, MemoryError) as exc:
            raise ImageRefused(f"it could not be read as a {fmt} image (damaged or truncated)") from exc
    try:
        return _write(upright, kind)
    except (OSError, ValueError) as exc:  # a pixel format with no conversion to RGB(A), say
        raise ImageRefused(f"its {fmt} pixels could not be converted") from exc


def _write(upright: Image.Image, kind: str) -> Encoded:
    mode = "RGBA" if _has_alpha(upright) and kind != JPEG else "RGB"
    pixels = upright.convert(mode)
    # A brand-new image from the pixels alone: no `info` (EXIF, XMP, comments, ICC) comes along.
    clean = Image.frombytes(mode, pixels.size, pixels.tobytes())
    del pixels
    out = io.BytesIO()
    if kind == JPEG:
        clean.save(out, "JPEG", quality=88, optimize=True)
    elif kind == PNG:
        clean.save(out, "PNG")
    else:
        clean.save(out, "WEBP", quality=88)
    thumb_img = clean.copy()
    thumb_img.thumbnail(THUMB_BOX)
    thumb = io.BytesIO()
    if mode == "RGBA":
        thumb_img.save(thumb, "PNG")
        thumb_type = PNG
    else:
        thumb_img.save(thumb, "JPEG", quality=80)
        thumb_type = JPEG
    return Encoded(out.getvalue(), clean.width, clean.height, thumb.getvalue(), thumb_type)
