"""The retail example server on its own: a real subprocess, over stdio and over streamable HTTP.

Its tools are τ²-bench's retail tools (names and arguments from the domain's tools.json) and
behave like them: lookups, a cancellation refunds (a gift card at once), an exchange or return
only on a delivered order, a modification only on a pending one, state kept per process.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import pytest
from mcp import Client, StdioServerParameters

from sundry.tooling import mcp_client
from tests.toolservers.conftest import EXAMPLE, retail_command

PENDING_GIFT = "#W9300146"  # aarav_anderson_8794's pending order


@pytest.fixture
def store(retail_dir):
    conn = mcp_client.Connection(mcp_client.ServerSpec(name="retail", command=retail_command(retail_dir))).open()
    yield lambda name, **args: conn.call(name, args, 20)
    conn.close()


def test_it_serves_every_tool_of_the_domain_with_its_arguments(retail_dir):
    declared = {t["name"]: [a["name"] for a in t["args"]] for t in json.loads((retail_dir / "tools.json").read_text())}

    async def listing():
        params = StdioServerParameters(
            command=sys.executable, args=[str(EXAMPLE / "server.py"), "--data", str(retail_dir)]
        )
        async with Client(params) as client:
            return (await client.list_tools()).tools

    tools = asyncio.run(listing())
    assert {t.name: list(t.input_schema["properties"]) for t in tools} == declared
    reads = {t.name for t in tools if t.annotations and t.annotations.read_only_hint}
    assert "get_order_details" in reads and "cancel_pending_order" not in reads


def test_lookups(store):
    assert store("find_user_id_by_email", email="AARAV.anderson9752@example.com").data == "aarav_anderson_8794"
    assert (
        store("find_user_id_by_name_zip", first_name="aarav", last_name="Anderson", zip="19031").data
        == "aarav_anderson_8794"
    )
    missing = store("find_user_id_by_name_zip", first_name="Aarav", last_name="Anderson", zip="00000")
    assert not missing.ok and "User not found" in missing.text
    user = store("get_user_details", user_id="aarav_anderson_8794").data
    assert PENDING_GIFT in user["orders"] and "gift_card_7245904" in user["payment_methods"]
    assert store("get_item_details", item_id="4238115171").data["price"] == 91.78
    products = store("list_all_product_types").data
    assert len(products) == 50 and products["Tea Kettle"] == "9832717871"
    assert store("calculate", expression="(94.8 - 91.78) * 2").data == 6.04
    assert not store("calculate", expression="__import__('os')").ok


def test_cancelling_a_pending_order_refunds_it_and_a_gift_card_at_once(store):
    before = store("get_user_details", user_id="aarav_anderson_8794").data["payment_methods"]["gift_card_7245904"]
    order = store("get_order_details", order_id=PENDING_GIFT).data
    paid = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment")
    assert not store("cancel_pending_order", order_id=PENDING_GIFT, reason="too slow").ok  # not a listed reason
    done = store("cancel_pending_order", order_id=PENDING_GIFT, reason="no longer needed").data
    assert done["status"] == "cancelled" and done["cancel_reason"] == "no longer needed"
    refunds = [p for p in done["payment_history"] if p["transaction_type"] == "refund"]
    assert sum(p["amount"] for p in refunds) == paid
    assert order["payment_history"][0]["payment_method_id"] == "gift_card_7245904"
    after = store("get_user_details", user_id="aarav_anderson_8794").data["payment_methods"]["gift_card_7245904"]
    assert after["balance"] == round(before["balance"] + paid, 2)
    again = store("cancel_pending_order", order_id=PENDING_GIFT, reason="no longer needed")
    assert not again.ok and "Non-pending order cannot be cancelled" in again.text  # state kept in the process


def test_exchange_and_return_only_on_a_delivered_order_once(store):
    swap = dict(
        order_id="#W4316152",
        item_ids=["7292993796"],
        new_item_ids=["4238115171"],
        payment_method_id="gift_card_7245904",
    )
    assert not store("exchange_delivered_order_items", **{**swap, "new_item_ids": ["9612497925"]}).ok  # a T-shirt
    done = store("exchange_delivered_order_items", **swap).data
    assert done["status"] == "exchange requested" and done["exchange_price_difference"] == -3.02
    assert not store("exchange_delivered_order_items", **swap).ok
    assert not store(
        "return_delivered_order_items",
        order_id="#W4316152",
        item_ids=["7292993796"],
        payment_method_id="gift_card_7245904",
    ).ok
    # A return takes the original payment method or a gift card only.
    user = store("get_user_details", user_id="noah_brown_6181").data
    order = store("get_order_details", order_id=user["orders"][0]).data
    assert order["status"] == "delivered"
    other = next(p for p in user["payment_methods"] if p != order["payment_history"][0]["payment_method_id"])
    refused = store(
        "return_delivered_order_items",
        order_id=order["order_id"],
        item_ids=[order["items"][0]["item_id"]],
        payment_method_id=other,
    )
    assert not refused.ok and "original payment method" in refused.text
    returned = store(
        "return_delivered_order_items",
        order_id=order["order_id"],
        item_ids=[order["items"][0]["item_id"]],
        payment_method_id=order["payment_history"][0]["payment_method_id"],
    )
    assert returned.data["status"] == "return requested"


def test_modifying_a_pending_order(store):
    order = store("get_order_details", order_id=PENDING_GIFT).data
    moved = store(
        "modify_pending_order_address",
        order_id=PENDING_GIFT,
        address1="1 New St",
        address2="",
        city="Austin",
        state="TX",
        country="USA",
        zip="73301",
    ).data
    assert moved["address"]["city"] == "Austin"
    item = order["items"][0]
    product = store("get_product_details", product_id=item["product_id"]).data
    other = next(v for k, v in product["variants"].items() if k != item["item_id"] and v["available"])
    changed = store(
        "modify_pending_order_items",
        order_id=PENDING_GIFT,
        item_ids=[item["item_id"]],
        new_item_ids=[other["item_id"]],
        payment_method_id=order["payment_history"][0]["payment_method_id"],
    )
    if changed.ok:
        assert changed.data["status"] == "pending (item modified)"
        assert other["item_id"] in [i["item_id"] for i in changed.data["items"]]
    else:  # a gift card too small for a dearer item: the domain's own refusal
        assert "Insufficient gift card balance" in changed.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_it_serves_streamable_http_too(retail_dir):
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE / "server.py"),
            "--data",
            str(retail_dir),
            "--transport",
            "streamable-http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP server exited"
                time.sleep(0.2)
        spec = mcp_client.ServerSpec(name="retail-http", url=f"http://127.0.0.1:{port}/mcp")
        tools, samples = mcp_client.probe(spec, timeout=20, samples=[("get_order_details", {"order_id": "#W4316152"})])
        assert len(tools) == 16
        assert samples[0].data["user_id"] == "aarav_anderson_8794"
    finally:
        proc.terminate()
        proc.wait(10)


def test_it_refuses_a_directory_without_the_store(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "server.py"), "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no db.json there" in done.stderr
