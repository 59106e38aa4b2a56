"""Offline token counting: exact ids, per-model choice, no network, hash checks."""

import json
import shutil
import socket
from pathlib import Path

import pytest
import tiktoken
from tiktoken_ext import openai_public

from sundry.core import tokens
from sundry.core.tokens import (
    EncodingFileError,
    count_message_tokens,
    count_tokens,
    encoding_name_for,
    get_encoding,
    is_exact,
    load_ranks,
)

TEXT = "Sundry's desk: ticket #4821 — refund £12.50?\n\n  Ça va, 世界! <|endoftext|>"
# Verified against js-tiktoken 1.0.21, an independent implementation.
TEXT_IDS = {
    "cl100k_base": [
        50,
        28346,
        596,
        18496,
        25,
        11989,
        674,
        21984,
        16,
        2001,
        21639,
        7083,
        717,
        13,
        1135,
        1980,
        220,
        64105,
        64,
        11412,
        11,
        220,
        3574,
        244,
        98220,
        0,
        83739,
        8862,
        728,
        428,
        91,
        29,
    ],
    "o200k_base": [
        50,
        980,
        1102,
        885,
        20794,
        25,
        16681,
        1069,
        41522,
        16,
        2733,
        18376,
        8989,
        899,
        13,
        1434,
        1715,
        220,
        95029,
        3423,
        11,
        185558,
        0,
        464,
        91,
        419,
        1440,
        919,
        91,
        29,
    ],
}


def test_hello_world():
    assert count_tokens("hello world", "openai:gpt-4") == 2
    assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert get_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_longer_text_exact_ids(name):
    assert get_encoding(name).encode_ordinary(TEXT) == TEXT_IDS[name]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_matches_tiktoken_own_definition(name, monkeypatch):
    # Run tiktoken's own constructor, with its downloader swapped for our
    # verified local file, and check we built the same encoding.
    def local_load(url, expected_hash):
        assert url.endswith(f"/{name}.tiktoken")
        return load_ranks(tokens.encoding_path(name), expected_hash)

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", local_load)
    theirs = tiktoken.Encoding(**getattr(openai_public, name)())
    ours = get_encoding(name)
    assert ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    for text in (TEXT, "hello world", "def f(x):\n    return x**2  # ok\r\n", "ÅÍÎ ẞ straße I'VE"):
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


@pytest.mark.parametrize(
    "model, encoding, exact",
    [
        ("offline", "o200k_base", True),
        ("openai:gpt-4.1-mini", "o200k_base", True),
        ("openai:gpt-4o", "o200k_base", True),
        ("openai:gpt-5", "o200k_base", True),
        ("openai:o1", "o200k_base", True),
        ("openai:o3-mini", "o200k_base", True),
        ("openai:o4-mini", "o200k_base", True),
        ("openai:gpt-4", "cl100k_base", True),
        ("openai:gpt-4-turbo", "cl100k_base", True),
        ("openai:gpt-3.5-turbo", "cl100k_base", True),
        ("openai:text-embedding-3-small", "cl100k_base", True),
        ("openai:gpt-5.1-mini", "o200k_base", True),
        ("openai:chatgpt-4o-latest", "o200k_base", True),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base", True),
        # gpt-oss uses o200k_harmony: o200k_base plus special tokens ordinary text never yields.
        ("openai-compatible:gpt-oss-120b", "o200k_base", True),
        # tiktoken maps these to encodings not shipped here: counted approximately.
        ("openai:text-davinci-003", "cl100k_base", False),
        ("openai:gpt-4.1x", "cl100k_base", False),
        ("anthropic:claude-3-5-haiku-latest", "cl100k_base", False),
        ("openai-compatible:llama3", "cl100k_base", False),
        ("openai-compatible:qwen2.5", "cl100k_base", False),
    ],
)
def test_model_choice(model, encoding, exact):
    assert encoding_name_for(model) == encoding
    assert is_exact(model) is exact


def test_no_network(tmp_path, monkeypatch):
    def no_socket(*args, **kwargs):
        raise AssertionError("token counting tried to open a socket")

    monkeypatch.setattr(socket, "socket", no_socket)
    monkeypatch.setattr(socket, "create_connection", no_socket)
    # An empty cache dir: nothing tiktoken cached earlier can stand in for a download.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens.clear_caches()
    try:
        assert count_tokens("hello world", "openai:gpt-4") == 2
        assert count_tokens("hello world", "openai:gpt-4o") == 2
        assert count_tokens(TEXT, "anthropic:claude-3-5-haiku-latest") == len(TEXT_IDS["cl100k_base"])
    finally:
        tokens.clear_caches()


def test_corrupted_file_fails_hash(tmp_path):
    name = "cl100k_base"
    bad = tmp_path / "cl100k_base.tiktoken"
    shutil.copyfile(tokens.encoding_path(name), bad)
    data = bytearray(bad.read_bytes())
    data[1000] ^= 0x01
    bad.write_bytes(bytes(data))
    with pytest.raises(EncodingFileError, match=r"cl100k_base\.tiktoken failed its sha256 check"):
        load_ranks(bad, tokens._SPECS[name][2])


def test_missing_file_raises_instead_of_estimating(tmp_path, monkeypatch):
    monkeypatch.setattr(tokens, "encoding_path", lambda name: tmp_path / f"{name}.tiktoken")
    tokens.clear_caches()
    try:
        with pytest.raises(EncodingFileError, match=r"o200k_base\.tiktoken is missing"):
            count_tokens("hello world", "openai:gpt-4o")
    finally:
        tokens.clear_caches()


def test_empty_text_loads_nothing(monkeypatch):
    monkeypatch.setattr(tokens, "get_encoding", lambda name: pytest.fail("loaded an encoding"))
    assert count_tokens("") == 0
    assert count_message_tokens([], "openai:gpt-4o") == 0


def test_message_tokens():
    model = "openai:gpt-4"
    tool_calls = [{"id": "c1", "name": "lookup_order", "arguments": {"order": 4821}}]
    messages = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "hello world", "name": "bob"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
    ]
    c = lambda s: count_tokens(s, model)  # noqa: E731
    expected = (
        3  # reply priming
        + 3
        + c("system")
        + c("You are a support agent.")
        + 3
        + c("user")
        + c("hello world")
        + c("bob")
        + 1  # name costs 1 more
        + 3
        + c("assistant")
        + c('[{"id":"c1","name":"lookup_order","arguments":{"order":4821}}]')
    )
    assert count_message_tokens(messages, model) == expected
    # The well-known cl100k figures: "system"/"user" are single tokens.
    assert count_message_tokens([{"role": "user", "content": "hello world"}], model) == 3 + 1 + 2 + 3


def test_pydantic_messages_count_exactly_as_their_dumps():
    from sundry.tooling.messages import Message, ToolCall

    messages = [
        Message(role="system", content="Rules: phone only.", lane="rules"),
        Message(role="user", content="Where is SU-10480? Ünïcode too."),
        Message(
            role="assistant",
            content="",
            turns=[3],
            tool_calls=[
                ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-10480"}),
                ToolCall(id="c2", name="track_parcel", arguments='{"tracking": "1Z9A"'),
            ],
        ),
        Message(role="tool", content='{"status": "shipped"}', tool_call_id="c1", tool_name="get_order"),
    ]
    for model in ("gpt-4o", "gpt-4", "offline"):
        assert count_message_tokens(messages, model) == count_message_tokens([m.model_dump() for m in messages], model)


def _tricky_texts():
    """Line starts and ends that sit at the edge of the pre-tokenizers' rules, plus real lane text."""
    from sundry.context import render
    from sundry.context.lanes import LedgerData, MoneyData

    starts = [
        "-",
        "/",
        "//",
        " ",
        "  x",
        "\t",
        "1",
        "12345",
        "(",
        ")",
        "'s",
        "’",
        "é",
        "世界",
        "\u00a0",
        "#",
        "*",
        ".",
        "",
    ]
    ends = ["", ".", ")", ":", " ", "  ", "/", "\\", "'", "?!", "…", "1", "x"]
    lines = [f"{s}word{i} {e}" for i, (s, e) in enumerate((s, e) for s in starts for e in ends)]
    yield "\n".join(lines)
    yield "\r\n".join(lines)
    yield "\n\n".join(lines) + "\n"
    yield "\n".join(f"{a}\n{b}" for a, b in zip(starts, ends * 2))
    ledger = [
        LedgerData(
            role=f"order_{i}",
            value=f"SU-{10480 + i}",
            kind="order",
            verified=bool(i % 2),
            first_seen_turn=i,
            last_used_turn=2 * i,
            note="of C-1 / “gift”",
        )
        for i in range(30)
    ]
    yield render.render_ledger(ledger)
    money = [
        MoneyData(order=f"SU-{10480 + i}", currency="EUR", paid_cents=1000 * i + 7, refunded_cents=i) for i in range(25)
    ]
    yield render.render_state([], [], money)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_counting_a_long_text_chunk_by_chunk_is_exact(name):
    whole = get_encoding(name)
    texts = list(_tricky_texts())
    corpus = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "tau2" / "traces"
    for path in sorted(corpus.glob("*.json"))[:3]:  # real conversations, where ../shared is present
        strings = []

        def walk(node):
            if isinstance(node, str) and len(node) > 20:
                strings.append(node)
            elif isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(json.loads(path.read_text(encoding="utf-8")))
        texts.append("\n".join(strings)[:300_000])
    assert texts
    for text in texts:
        tokens.clear_caches()
        chunks = tokens._CHUNK_BOUNDARY.split(text)
        assert len(chunks) > 1 and "".join(chunks) == text
        assert tokens._count(text, name) == len(whole.encode_ordinary(text))
