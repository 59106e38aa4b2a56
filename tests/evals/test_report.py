"""Reports: the summary table, JSON and a self-contained HTML page with inline SVG charts."""

from __future__ import annotations

import json
from pathlib import Path

from sundry.evals import importers, report
from sundry.evals.harness import HarnessConfig, run_all

FIXTURES = Path(__file__).parent / "fixtures"


def _report():
    tickets = importers.tau2_results(FIXTURES / "tau2_retail_small.json")
    tickets += importers.tau2_results(FIXTURES / "tau2_telecom_small.json")
    return run_all(tickets, HarnessConfig(budget=1800, keep_recent=4))


def test_summary_table_and_failure_lines():
    r = _report()
    table = report.summary_table(r)
    assert "ID survival (guard accepts)" in table and "Sliding window" in table
    assert "retail" in table and "telecom" in table
    lines = report.failure_lines(r)
    # The one Sundry failure: the product infers no structured check from "never turn on
    # roaming", so nothing refuses enable_roaming on the telecom ticket.
    sundry = r.failures("sundry")
    assert lines[0] == f"Sundry lanes: {len(sundry)} failure(s)"
    assert {(f.ticket.split("-")[0], f.check) for f in sundry} == {("telecom", "planted_not_enforced")}
    assert any("gift_card_0000000" in line and "truly wrong: made up" in line for line in lines)


def test_json_and_html_reports(tmp_path):
    r = _report()
    data = json.loads(report.write_json(r, tmp_path / "r.json").read_text())
    assert data["rates"]["sundry"]["ID survival (guard accepts)"]["rate"] == 1.0
    assert data["rates"]["window"]["ID survival (guard accepts)"]["rate"] < 1.0
    assert {t["id"] for t in data["tickets"]} == {t.id for t in r.tickets}
    html = report.write_html(r, tmp_path / "r.html").read_text()
    assert html.count("<svg") >= 2 and "<polyline" in html and "<rect" in html
    assert "<script" not in html and "http" not in html.split("<body>", 1)[1]  # no CDN, nothing fetched
