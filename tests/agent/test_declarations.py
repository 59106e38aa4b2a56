"""Result declarations: checked when a tool registers, read by schema wherever they sit."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import BaseModel

import sundry.shop.tools  # noqa: F401  (registers the shop tools)
from sundry.tooling.declarations import (
    Describe,
    MoneyMoved,
    check_declarations,
    descriptions,
    model_declares,
    money_moved,
)
from sundry.tooling.tools import REGISTRY, IdField


def test_a_declaration_naming_a_missing_field_fails_when_checked():
    class Bad(BaseModel):
        describe: ClassVar = Describe("order_number", "{items} · {colour}")
        order_number: str = IdField("order")
        items: list[str] = []

    with pytest.raises(TypeError, match="colour"):
        check_declarations(Bad)

    class Inner(BaseModel):
        moves_money: ClassVar = MoneyMoved("refund", "amount_cents", "currency")
        amount: int = 0

    class Outer(BaseModel):
        inner: Inner | None = None

    with pytest.raises(TypeError, match="amount_cents"):
        check_declarations(Outer)


def test_every_registered_tool_that_moves_money_declares_it():
    movers = {name for name, tool in REGISTRY.items() if model_declares(tool.result_model, "moves_money")}
    assert movers == {"issue_refund", "cancel_order"}
    assert {name for name, tool in REGISTRY.items() if model_declares(tool.result_model, "reports_totals")} == {
        "get_order",
        "issue_refund",
        "cancel_order",
    }


def test_a_nested_movement_takes_its_order_from_the_result_and_descriptions_are_bounded():
    cancel = REGISTRY["cancel_order"].result_model.model_validate(
        {
            "order_number": "SU-1",
            "status": "cancelled",
            "items": ["Lamp " * 40],
            "currency": "INR",
            "refund": {
                "refund_id": "rfd_1",
                "payment_id": "pay_1",
                "amount_cents": 500,
                "amount": "5.00",
                "currency": "INR",
            },
            "refunded_cents": 500,
            "refundable_cents": 0,
        }
    )
    [moved] = money_moved(cancel)
    assert (moved.order, moved.amount_cents, moved.currency, moved.id) == ("SU-1", 500, "INR", "rfd_1")
    described = descriptions(cancel)
    assert len(described["SU-1"]) <= 100 and described["SU-1"].endswith("…")
    assert described["rfd_1"] == "refund 5.00 INR on SU-1, with its cancellation"
