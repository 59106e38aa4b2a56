"""One declaration format for in-process and remote tools (`tooling.domain`).

The demo shop's domain is built from its pydantic models; the same declaration,
dumped to plain data and loaded back, reads JSON results exactly as the models
read themselves — so a remote tool described in a declaration file is read by
the same code. Guards, rules and the summariser go by the declarations.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from sundry.agent.guards.callguards import GuardInput, check_call
from sundry.compaction.summariser import SummaryFields, unsupported_claims
from sundry.context.lanes import LedgerData, MoneyData
from sundry.context.rules import infer_enforcement
from sundry.evals.domains import DOMAINS
from sundry.shop import tools as st
from sundry.shop.domain import DOMAIN as SHOP
from sundry.tooling.domain import Domain, get_domain, select, tool_named, tools_for
from sundry.tooling.tools import REGISTRY

ORDER = st.OrderResult(
    order_number="SU-20481",
    customer_id="cus_4k2m9x1p",
    status="delivered",
    placed_on="2026-01-02",
    currency="INR",
    total_cents=405000,
    items=[
        st.ItemOut(
            item_id="itm_aaaa1111", sku="SKU-AB123", product="Air Fryer 5.5L", quantity=1, unit_price_cents=405000
        )
    ],
    payments=[
        st.PaymentOut(
            payment_id="pay_12345678",
            payment_method_id="pm_abcd1234",
            method="Visa ··42",
            status="captured",
            amount_cents=405000,
        )
    ],
    parcels=[st.ParcelOut(tracking_number="1Z999AA10123456784", carrier="UPS", status="delivered")],
    refunds=[
        st.RefundOut(
            refund_id="rfd_00000001",
            payment_id="pay_12345678",
            amount_cents=10000,
            amount="100.00",
            status="issued",
            reason="late",
            created_on="2026-01-03",
        )
    ],
    returns=[st.ReturnOut(return_id="ret_00000001", item_ids=["itm_aaaa1111"], status="booked", reason="broken")],
    paid_cents=405000,
    refunded_cents=10000,
    refundable_cents=395000,
    refundable="3950.00",
)
CANCEL = st.CancelResult(
    order_number="SU-31377",
    status="cancelled",
    items=["Lamp"],
    currency="USD",
    refund=st.CancelRefundOut(
        refund_id="rfd_00000002", payment_id="pay_87654321", amount_cents=2899, amount="28.99", currency="USD"
    ),
    refunded_cents=2899,
    refundable_cents=0,
)
REFUND = st.RefundResult(
    refund_id="rfd_00000003",
    order_number="SU-20481",
    payment_id="pay_12345678",
    amount="40.00",
    amount_cents=4000,
    currency="INR",
    status="issued",
    refunded_cents=14000,
    refundable_cents=391000,
)
SEARCH = st.SearchOrdersResult(
    customer_id="cus_4k2m9x1p",
    query=None,
    total_matches=1,
    orders=[
        st.OrderSummary(
            order_number="SU-20481",
            status="delivered",
            placed_on="2026-01-02",
            total_cents=405000,
            currency="INR",
            items=["Air Fryer 5.5L"],
        )
    ],
)
SAMPLES = [("get_order", ORDER), ("cancel_order", CANCEL), ("issue_refund", REFUND), ("search_orders", SEARCH)]


def _facts(domain: Domain, tool: str, result):
    return (
        sorted((k, v) for _, k, v in domain.ids(tool, result)),
        domain.owners(tool, result),
        domain.descriptions(tool, result),
        domain.money_moved(tool, result),
        domain.order_totals(tool, result),
    )


@pytest.mark.parametrize("tool, result", SAMPLES)
def test_plain_data_declaration_reads_json_as_the_models_read_themselves(tool, result):
    plain = Domain.from_data(json.loads(SHOP.model_dump_json()))  # no pydantic result models: paths only
    as_json = json.loads(result.model_dump_json())
    by_models = _facts(SHOP, tool, result)
    assert _facts(plain, tool, as_json) == by_models
    assert _facts(SHOP, tool, as_json) == by_models  # the shop's declaration reads a JSON result the same
    assert by_models[0]  # and there was something to read


def test_the_readers_find_money_inside_another_result_and_the_owner_of_nested_ids():
    plain = Domain.from_data(SHOP.model_dump(mode="json"))
    [moved] = plain.money_moved("cancel_order", json.loads(CANCEL.model_dump_json()))
    assert (moved.order, moved.amount_cents, moved.currency, moved.id) == ("SU-31377", 2899, "USD", "rfd_00000002")
    owners = plain.owners("get_order", ORDER.model_dump(mode="json"))
    assert owners["1Z999AA10123456784"] == "SU-20481" and "SU-20481" not in owners
    described = plain.descriptions("get_order", ORDER.model_dump(mode="json"))
    assert described["1Z999AA10123456784"] == "UPS parcel of SU-20481 · delivered"
    assert described["rfd_00000001"] == "refund 100.00 INR on SU-20481 · issued"


def test_a_declaration_file_is_validated_with_clear_errors():
    with pytest.raises(ValidationError, match="lookups"):
        Domain.from_data({"name": "x", "tools": {"find": {"lookups": True}}})  # a misspelt field
    with pytest.raises(ValueError, match="unknown capability 'emails'"):
        Domain.from_data({"name": "x", "tools": {"notify": {"capabilities": ["emails"]}}})
    with pytest.raises(ValueError, match="id pattern 'order'"):
        Domain.from_data({"name": "x", "id_patterns": {"order": "(unclosed"}})
    with pytest.raises(ValueError, match="names 'get_thing', not a tool"):
        Domain.from_data({"name": "x", "lookup_hints": {"order": ["get_thing"]}})
    text = json.dumps(
        {
            "name": "crm",
            "id_patterns": {"ticket": r"T-\d{4}"},
            "tools": [{"name": "get_ticket", "lookup": True, "args": {"ticket_id": "ticket"}}],
        }
    )
    crm = Domain.from_data(text)  # JSON text, tools as a list
    assert crm.lookup_tools == {"get_ticket"} and crm.find_ids("see T-1234 and T-12") == [("ticket", "T-1234")]


def test_rules_block_tools_by_capability_not_by_name():
    crm = Domain.from_data(
        {
            "name": "crm",
            "tools": {
                "notify_by_mail": {"write": True, "capabilities": ["contacts_customer:email"]},
                "ring_customer": {"write": True, "capabilities": ["contacts_customer:phone"]},
                "mail_merge": {"write": True},
            },
        }
    )
    assert infer_enforcement("Phone only, never email please.", crm) == {"block_tools": ["notify_by_mail"]}
    assert infer_enforcement("Only email me, no calls", crm) == {"block_tools": ["ring_customer"]}
    # Control: the same rule over a domain that declares no e-mail capability blocks nothing.
    bare = Domain.from_data({"name": "bare", "tools": {"notify_by_mail": {"write": True}}})
    assert infer_enforcement("Phone only, never email please.", bare) == {}
    assert infer_enforcement("Phone only, never email please.") == {"block_tools": ["send_email"]}  # the shop


def test_the_refund_guard_applies_where_the_declaration_says_so():
    tool = REGISTRY["issue_refund"]
    args = {"order_number": "SU-20481", "amount": "5000.00", "currency": "INR", "reason": "x"}
    ledger = [LedgerData("order", "SU-20481", "order", True, 1, 1)]
    money = [MoneyData("SU-20481", "INR", 405000, 10000)]
    verdict = check_call(GuardInput(tool=tool, arguments=args, ledger=ledger, money=money, domain=SHOP))
    assert (verdict.decision, verdict.guard) == ("reject", "refund_limit")
    # Control: the same tool in a domain whose declaration has no refund limit passes that guard.
    undeclared = SHOP.model_copy(
        update={"tools": {**SHOP.tools, "issue_refund": SHOP.tools["issue_refund"].model_copy(update={"refund": None})}}
    )
    verdict = check_call(GuardInput(tool=tool, arguments=args, ledger=ledger, money=money, domain=undeclared))
    assert verdict.decision == "allow"


def test_lookups_come_from_the_declaration():
    tool = REGISTRY["get_order"]
    typed = [LedgerData("order", "SU-55510", "order", False, 1, 1)]
    assert check_call(GuardInput(tool=tool, arguments={"order_number": "SU-55510"}, ledger=typed, domain=SHOP)).allowed
    not_lookup = SHOP.model_copy(
        update={"tools": {**SHOP.tools, "get_order": SHOP.tools["get_order"].model_copy(update={"lookup": False})}}
    )
    not_lookup.__dict__.pop("lookup_tools", None)
    verdict = check_call(GuardInput(tool=tool, arguments={"order_number": "SU-55510"}, ledger=typed, domain=not_lookup))
    assert verdict.guard == "unverified_id"


def test_summary_claims_are_checked_against_capabilities():
    fields = SummaryFields(
        decisions=[],
        actions_taken=["Refunded the order in full."],
        constraints_not_pinned=[],
        open_questions=[],
        narrative="The customer wrote in about an order.",
    )
    assert unsupported_claims(fields, {"issue_refund"}, SHOP) == []
    assert unsupported_claims(fields, {"book_return"}, SHOP)  # a return is not a refund
    crm = Domain.from_data({"name": "crm", "tools": {"credit_back": {"write": True, "capabilities": ["refunds"]}}})
    assert unsupported_claims(fields, {"credit_back"}, crm) == []
    # A class with tool servers: the done tools' capabilities come from their declarations.
    assert unsupported_claims(fields, {"credit_back"}, SHOP, {"credit_back": ["refunds"]}) == []
    assert unsupported_claims(fields, {"credit_back"}, SHOP, {"credit_back": []})


def test_a_ticket_in_a_domain_calls_only_its_tools_and_sundrys_own():
    assert get_domain() is SHOP and get_domain("demo_shop") is SHOP
    names = [t.name for t in tools_for(SHOP)]
    assert {"get_order", "request_staff_follow_up", "pin_constraint"} <= set(names)
    crm = Domain.from_data({"name": "crm", "tools": {"get_ticket": {"lookup": True}}})
    assert tool_named(crm, "get_order") is None and tool_named(crm, "pin_constraint") is not None
    assert "get_order" not in [t.name for t in tools_for(crm)]
    with pytest.raises(LookupError, match="unknown domain 'nowhere'"):
        get_domain("nowhere")


def test_the_harness_domains_are_production_declarations():
    for name in ("retail", "airline", "telecom"):
        domain = DOMAINS[name].domain
        assert isinstance(domain, Domain)
        # Plain data round trip; compared as data, since a domain in use keeps private caches (IDs found).
        assert Domain.from_data(json.loads(domain.model_dump_json())).model_dump() == domain.model_dump()
    assert DOMAINS["demo_shop"].domain is SHOP
    assert select({"a": [{"b": 1}]}, "a[].b") == [1]


def test_order_figures_summed_from_a_payment_history_and_refund_rows_picked_by_kind():
    """A store whose records name no currency and keep dollars (τ² retail): `totals` with a history
    and `money` with `where` read what moved; a declaration giving no currency is refused."""
    data = {
        "tools": {
            "cancel": {
                "totals": [
                    {
                        "order": "order_id",
                        "currency_code": "USD",
                        "amount_unit": "major",
                        "history": "payment_history[]",
                        "history_kind": "transaction_type",
                        "paid": "payment",
                        "refunded": "refund",
                    }
                ],
                "money": [
                    {
                        "at": "payment_history[]",
                        "where": {"transaction_type": "refund"},
                        "amount": "amount",
                        "amount_unit": "major",
                        "currency_code": "USD",
                    }
                ],
                "results": {"order_id": "order"},
                "owner": "order_id",
            }
        },
        "name": "store",
    }
    store = Domain.from_data(data)
    cancelled = {
        "order_id": "#W8770097",
        "payment_history": [
            {"transaction_type": "payment", "amount": 544.29, "payment_method_id": "paypal_6151711"},
            {"transaction_type": "refund", "amount": 544.29, "payment_method_id": "paypal_6151711"},
        ],
    }
    [totals] = store.order_totals("cancel", cancelled)
    assert (totals.order, totals.currency, totals.paid_cents, totals.refunded_cents) == (
        "#W8770097",
        "USD",
        54429,
        54429,
    )
    [moved] = store.money_moved("cancel", cancelled)
    assert (moved.order, moved.amount_cents, moved.currency) == ("#W8770097", 54429, "USD")
    assert store.money_moved("cancel", {**cancelled, "payment_history": cancelled["payment_history"][:1]}) == []
    del data["tools"]["cancel"]["money"][0]["currency_code"]
    with pytest.raises(ValidationError, match="currency"):
        Domain.from_data(data)
