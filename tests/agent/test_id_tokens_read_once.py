"""A text's identifier-like tokens are read once per process (`replycheck._id_tokens`): every step reads
the whole request's texts for the reply check (`known_identifiers`), and a step's request repeats the
texts of the steps before it. The tokens are kept with what read them — the domain's formats, the
measure reading on or off — so a change of either reads afresh. Control: kept under one key whatever
read them, a text read with the measure reading on keeps its answer when it is switched off."""

from __future__ import annotations

from sundry.agent.guards import measures, replycheck

TEXT = "Your 20-hour battery pack, order SU-10480, ships from bay AB12345."


def test_a_text_is_read_once(monkeypatch):
    calls = []
    real = replycheck.find_ids
    monkeypatch.setattr(replycheck, "find_ids", lambda text: calls.append(text) or real(text))
    first = replycheck.known_identifiers([TEXT, "The lanes: SU-10480."])
    again = replycheck.known_identifiers([TEXT, "The lanes: SU-10480.", "A new message about XY98765."])
    assert calls == [TEXT, "The lanes: SU-10480.", "A new message about XY98765."]  # the new text only
    assert first == {"SU-10480", "AB12345"} and again == first | {"XY98765"}
    assert replycheck.id_tokens(TEXT) == {"SU-10480", "AB12345"}  # a copy: the caller may change it
    replycheck.id_tokens(TEXT).add("changed")
    assert replycheck.id_tokens(TEXT) == {"SU-10480", "AB12345"}


def test_a_change_of_reading_reads_afresh(monkeypatch):
    assert "20-hour" not in replycheck.id_tokens(TEXT)
    monkeypatch.setattr(measures, "ON", False)
    assert "20-hour" in replycheck.id_tokens(TEXT)


def test_control_kept_under_one_key_the_old_reading_answers(monkeypatch):
    monkeypatch.setattr(replycheck, "_reading", lambda: ("one key",))
    assert "20-hour" not in replycheck.id_tokens(TEXT)
    monkeypatch.setattr(measures, "ON", False)
    assert "20-hour" not in replycheck.id_tokens(TEXT)  # stale: what the key is for
