"""Approval rules as a table an admin fills in: tool, currency, threshold in the currency's major units.

The guard reads the JSON structure `agent.approvals` defines, in minor units; this module writes
that structure from the table's rows and reads it back into rows, so the two always agree
(`core.money` does the unit conversion, with the currency's own decimal places):

    tool, no currency, no threshold   → {"tool": {}}                    every call is held
    tool, USD, 200                    → {"tool": {"above": {"USD": 20000}}}
    tool, *, 10000                    → {"tool": {"above_cents": 10000}} any currency not listed,
                                        in minor units (currencies differ, so no major unit applies)

A row left blank is ignored; a bad row is refused with its number and the reason, and nothing is
saved until every row reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.utils.html import format_html, format_html_join

from sundry.core.money import MoneyError, currency_code, major_str, parse_decimal, to_minor

ANY_CURRENCY = "*"
# Empty rows offered under the filled ones, for new rules.
BLANK_ROWS = 3
PREFIX = "approval_table"


@dataclass(frozen=True)
class Row:
    tool: str
    currency: str = ""
    threshold: str = ""

    @property
    def blank(self) -> bool:
        return not (self.tool or self.currency or self.threshold)


def rows_from_rules(rules) -> list[Row]:
    """The stored rules as rows, in the tool's order, each currency's threshold in major units."""
    rows = []
    for tool, options in (rules or {}).items() if isinstance(rules, dict) else []:
        options = options or {}
        per = options.get("above") or {}
        for code, minor in per.items():
            rows.append(Row(tool, code, major_str(minor, code)))
        if options.get("above_cents") is not None:
            rows.append(Row(tool, ANY_CURRENCY, str(options["above_cents"])))
        if not per and options.get("above_cents") is None:
            rows.append(Row(tool))
    return rows


def rules_from_rows(rows: list[Row]) -> tuple[dict, list[str]]:
    """(the rules the guard reads, the problems: one sentence per bad row). The tool names are checked
    against the class's tools by the caller (`approvals.problems`)."""
    rules: dict[str, dict] = {}
    always: set[str] = set()
    problems = []
    for n, row in enumerate(rows, 1):
        if row.blank:
            continue
        tool, currency, threshold = row.tool.strip(), row.currency.strip(), row.threshold.strip()
        where = f"Row {n}" + (f" ({tool})" if tool else "")
        if not tool:
            problems.append(f"{where}: name the tool.")
            continue
        options = rules.setdefault(tool, {})
        if not currency and not threshold:
            always.add(tool)
            continue
        if not threshold:
            problems.append(
                f"{where}: give a threshold for {currency}, or leave the currency empty to hold every call."
            )
            continue
        if not currency:
            problems.append(
                f"{where}: name the currency of the threshold {threshold} (e.g. USD), or {ANY_CURRENCY} "
                "for any currency not listed, in minor units."
            )
            continue
        try:
            if currency == ANY_CURRENCY:
                amount = parse_decimal(threshold)
                if amount != amount.to_integral_value():
                    raise MoneyError(
                        f"for {ANY_CURRENCY} the threshold is in minor units (cents): a whole number, not {threshold}"
                    )
                if "above_cents" in options:
                    raise MoneyError(f"{ANY_CURRENCY} is given twice for this tool")
                options["above_cents"] = int(amount)
                continue
            code = currency_code(currency)
            minor = to_minor(parse_decimal(threshold), code)
        except MoneyError as exc:
            problems.append(f"{where}: {exc}.")
            continue
        per = options.setdefault("above", {})
        if code in per:
            problems.append(f"{where}: {code} is given twice for this tool.")
            continue
        per[code] = minor
    for tool in sorted(always):
        if rules[tool]:
            problems.append(
                f"{tool}: a row without a currency holds every call, so it cannot also have "
                "thresholds; keep one or the other."
            )
    return rules, problems


class ApprovalTableWidget(forms.Widget):
    """The rows as a table of text inputs (three lists posted in step) and a marker that the table was sent."""

    def value_from_datadict(self, data, files, name):
        if f"{name}-present" not in data:
            return None  # not sent (a client posting the JSON alone): the JSON field decides
        tools, currencies, thresholds = (
            data.getlist(f"{name}-{k}") if hasattr(data, "getlist") else data.get(f"{name}-{k}", [])
            for k in ("tool", "currency", "threshold")
        )
        width = max(len(tools), len(currencies), len(thresholds))
        pad = [""] * width
        return [
            Row(*(str(v)[:200] for v in cells))
            for cells in zip((tools + pad)[:width], (currencies + pad)[:width], (thresholds + pad)[:width])
        ]

    def render(self, name, value, attrs=None, renderer=None):
        rows = [r for r in (value or []) if not r.blank] + [Row("")] * BLANK_ROWS
        cells = format_html_join(
            "",
            (
                '<tr><td><input type="text" name="{0}-tool" value="{1}" aria-label="Tool, row {4}"></td>'
                '<td><input type="text" name="{0}-currency" value="{2}" size="4" aria-label="Currency, row {4}"></td>'
                '<td><input type="text" name="{0}-threshold" value="{3}" size="12" inputmode="decimal" '
                'aria-label="Threshold, row {4}"></td></tr>'
            ),
            ((name, r.tool, r.currency, r.threshold, n) for n, r in enumerate(rows, 1)),
        )
        return format_html(
            '<input type="hidden" name="{}-present" value="1"><table class="approval-table" id="{}">'
            '<thead><tr><th scope="col">Tool</th><th scope="col">Currency</th>'
            '<th scope="col">Hold above (major units)</th></tr></thead><tbody>{}</tbody></table>',
            name,
            (attrs or {}).get("id", f"id_{name}"),
            cells,
        )


class ApprovalTableField(forms.Field):
    widget = ApprovalTableWidget

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value):
        return value  # rows, or None when the table was not sent; read in the form's clean()

    def has_changed(self, initial, data):
        if data is None:
            return False
        return [r for r in data if not r.blank] != [r for r in (initial or []) if not r.blank]
