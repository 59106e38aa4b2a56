"""The budget lab's comparison as plain text, for `manage.py budget_lab`: the same figures the page shows,
read from the same result (`evals.labrun.lab_figures`)."""

from __future__ import annotations

from decimal import Decimal


def _n(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _cost(value) -> str:
    return "no known price" if value is None else f"${Decimal(value):.4f}"


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def _money(value) -> str:
    return "no known price" if value is None else f"${Decimal(value):,.2f}"


def _table(title: str, heads: list[str], rows: list[tuple]) -> list[str]:
    width = max(len(title), max(len(r[0]) for r in rows) + 2) + 2
    cols = [max(len(h), *(len(str(r[i + 1])) for r in rows)) + 2 for i, h in enumerate(heads)]
    out = [title.ljust(width) + "".join(h.rjust(c) for h, c in zip(heads, cols))]
    out += ["  " + r[0].ljust(width - 2) + "".join(str(v).rjust(c) for v, c in zip(r[1:], cols)) for r in rows]
    return out + [""]


def lab_text(lab: dict, class_name: str) -> str:
    cur, prop = lab["current"], lab["proposed"]
    fc, fp = lab["fit_current"], lab["fit_proposed"]
    r, c, p = lab["recorded"], lab["replayed_current"], lab["replayed_proposed"]
    cache, volume, models = lab["cache"], lab["volume"], lab["models"]
    source = lab.get("source") or {"kind": "window"}
    replayed = (
        f"Replayed the latest {lab['tickets']} of {lab['tickets_with_steps']} tickets with recorded steps"
        if source["kind"] == "window"
        else f"Replayed {source['text']}"
    )
    lines = [
        f"Budget lab: {class_name}. {replayed}; costs at {lab['price_model']}'s prices (genai-prices).",
        f"Proposed column priced at {lab['proposed_price_model']}; summaries at {lab['summariser_price_model']} "
        f"(current) and {lab['proposed_summariser_price_model']} (proposed).",
        f"Prompt cache at the class's recorded shares: {_pct(cache['read'])} of input read, "
        f"{_pct(cache['write'])} written"
        + (f" (over {cache['steps']:,} recorded requests)." if cache["steps"] else " (no recorded provider usage)."),
        f"Volume: {volume['per_month']:g} tickets a month ({volume['basis']}).",
        "",
    ]
    lines += _table(
        "Settings",
        ["current", "proposed"],
        [
            ("token budget", _n(cur["budget"]), _n(prop["budget"])),
            (
                "trigger",
                f"{cur['trigger_fraction']} ({_n(cur['trigger'])})",
                f"{prop['trigger_fraction']} ({_n(prop['trigger'])})",
            ),
            ("recent turns kept", cur["recent_turns_kept"], prop["recent_turns_kept"]),
            ("working model", models["current"]["working"], models["proposed"]["working"]),
            ("summariser model", models["current"]["summariser"], models["proposed"]["summariser"]),
            (
                "ledger share",
                f"{cur['ledger_share']} ({_n(cur['ledger_allowance'])})",
                f"{prop['ledger_share']} ({_n(prop['ledger_allowance'])})",
            ),
        ],
    )
    lines += _table(
        "Room in each request",
        ["current", "proposed"],
        [
            ("fixed part", f"{_n(fc['fixed'])} ({fc['fixed_share']}%)", f"{_n(fp['fixed'])} ({fp['fixed_share']}%)"),
            ("left under the trigger", _n(fc["left"]), _n(fp["left"])),
            (
                "ledger allowance",
                f"{_n(cur['ledger_allowance'])} (peak {_n(lab['ledger_peak'])})",
                _n(prop["ledger_allowance"]),
            ),
        ],
    )
    if source.get("note"):
        lines += [source["note"], ""]
    heads = [c.split(",")[0].lower() for c in lab.get("columns") or ["recorded", "current", "proposed"]]
    lines += _table(
        "Replayed",
        heads,
        [
            ("steps", _n(r["steps"]), _n(c["steps"]), _n(p["steps"])),
            ("request tokens, median", _n(r["median"]), _n(c["median"]), _n(p["median"])),
            ("request tokens, p95", _n(r["p95"]), _n(c["p95"]), _n(p["p95"])),
            ("request tokens, peak", _n(r["peak"]), _n(c["peak"]), _n(p["peak"])),
            (
                "steps over the budget",
                f"{r['over_budget']} ({r['over_share']}%)",
                f"{c['over_budget']} ({c['over_share']}%)",
                f"{p['over_budget']} ({p['over_share']}%)",
            ),
            ("compactions", r["compactions"], c["compactions"], p["compactions"]),
            ("input tokens", _n(r["input_tokens"]), _n(c["input_tokens"]), _n(p["input_tokens"])),
            ("cost of the steps, cache included", _cost(r["cost"]), _cost(c["cost"]), _cost(p["cost"])),
            ("summariser calls", r["summariser_calls"], c["summariser_calls"], p["summariser_calls"]),
            ("summariser cost", _cost(r["summariser_cost"]), _cost(c["summariser_cost"]), _cost(p["summariser_cost"])),
            ("cost per ticket", _cost(r["cost_per_ticket"]), _cost(c["cost_per_ticket"]), _cost(p["cost_per_ticket"])),
            ("cost per month", _money(r["cost_per_month"]), _money(c["cost_per_month"]), _money(p["cost_per_month"])),
            ("steps whose ledger the share would trim", "-", c["ledger_over"], p["ledger_over"]),
        ],
    )
    fid = lab.get("fidelity") or {}
    if fid.get("checked"):

        def rate(f):
            return "no checks" if f["rate"] is None else f"{f['rate']}% ({f['ok']} of {f['checks']})"

        lines += _table(
            "What the agent still knows (the harness's checks)",
            ["current", "proposed"],
            [
                (fid["current"][k]["label"], rate(fid["current"][k]), rate(fid["proposed"][k]))
                for k in ("ids", "actions", "constraints")
            ],
        )
    elif fid:
        lines += [f"What the agent still knows: not checked (the harness has no declaration for {fid['domain']}).", ""]
    if spent := fid.get("summariser"):
        answered = ", ".join(f"{name} {n}" for name, n in sorted(spent["answered"].items())) or "none"
        lines += [
            f"Summariser called: {spent['model']}, {spent['calls']} calls ({spent['failed']} failed); answered by: "
            f"{answered}; spent ${Decimal(spent['cost']):.4f} ({spent['input_tokens']:,} input, "
            f"{spent['output_tokens']:,} output tokens).",
            "",
        ]
    if sc := lab.get("scenarios"):
        lines += _scenario_lines(sc)
    if fp["tight"]:
        lines += [f"Warning: {fp['problem']}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _scenario_lines(sc: dict) -> list[str]:
    """The outcome scenarios: the totals, then each scenario's verdict at the current settings and the proposal."""
    cur, prop, n = sc["current"], sc["proposed"], sc["cast"]
    lines = _table(
        "Scenario outcomes",
        ["current", "proposed"],
        [
            ("scenarios correct", f"{cur['correct']} of {n}", f"{prop['correct']} of {n}"),
            ("forbidden effects", cur["forbidden"], prop["forbidden"]),
            ("expected effects missing", cur["missing"], prop["missing"]),
            ("effects changed by compaction", cur["damage"], prop["damage"]),
            ("reply facts said", f"{cur['facts_ok']} of {sc['facts']}", f"{prop['facts_ok']} of {sc['facts']}"),
        ],
    )

    def verdict(side: dict) -> str:
        extra = [f"{side[k]} {k}" for k in ("missing", "forbidden") if side[k]]
        extra += [f"{side['damage']} changed"] if side["damage"] else []
        return side["verdict"] + (f" ({', '.join(extra)})" if extra else "") + f", c{side['compactions']}"

    if sc["rows"]:
        lines += _table(
            "Per scenario",
            ["current", "proposed"],
            [(r["id"], verdict(r["current"]), verdict(r["proposed"])) for r in sc["rows"]],
        )
    for missing in sc.get("not_cast") or []:
        lines.append(f"Not run: {missing['id']} ({missing['error']})")
    return lines + ([""] if sc.get("not_cast") else [])
