"""The soak's verdict on web-process memory: the slopes over the first and last thirds, the
steady state, and whether RSS levelled off — shown failing where memory keeps growing."""

from __future__ import annotations

from bench.soakbench import levelling


def _samples(rss_at) -> list[dict]:
    return [{"t_s": t, "rss_mb": rss_at(t)} for t in range(0, 601, 30)]


def test_memory_that_rises_then_holds_levels_off():
    # The first renders and sockets take memory, then it holds within a few MB.
    verdict = levelling(_samples(lambda t: 120 + min(t, 90) + (t % 60) / 30))
    assert verdict["levelled_off"] is True
    assert abs(verdict["rss_slope_last_third_mb_per_min"]) < 1
    assert 210 < verdict["rss_steady_mb"] < 213


def test_memory_that_keeps_climbing_does_not_level_off():
    # The negative control: 3 MB a minute to the end (as renderings kept for ever would give).
    verdict = levelling(_samples(lambda t: 200 + t / 20))
    assert verdict["levelled_off"] is False
    assert verdict["rss_slope_first_third_mb_per_min"] == verdict["rss_slope_last_third_mb_per_min"] == 3.0


def test_a_slow_climb_after_a_steep_start_has_not_levelled_off():
    # 40 MB a minute at first, 2 a minute at the end: a tenth of the start, and still climbing.
    verdict = levelling(_samples(lambda t: 120 + (40 * t / 60 if t <= 200 else 133 + 2 * (t - 200) / 60)))
    assert verdict["rss_slope_last_third_mb_per_min"] == 2.0
    assert verdict["levelled_off"] is False
