"""τ²-bench's retail store as an MCP tool server, written with the `mcp` SDK.

    python examples/tau2_retail_mcp/server.py --data path/to/tau2/domains/retail            # stdio
    python examples/tau2_retail_mcp/server.py --data ... --transport streamable-http --port 8765

The store (users, orders, products) is read from the data directory's `db.json`
and kept in memory for as long as this process runs: a cancellation, exchange or
return changes what later calls see, and nothing is written back to disk. The
tools follow the domain's `tools.json` — the same names, arguments, checks and
error messages — and return the records as structured output with their JSON
Schema, so a client can read both.

It depends only on the SDK and pydantic; it imports nothing from Sundry.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

# --- the records, as the store keeps them ---------------------------------------------


class Address(BaseModel):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class Name(BaseModel):
    first_name: str
    last_name: str


class PaymentMethod(BaseModel):
    source: Literal["credit_card", "gift_card", "paypal"]
    id: str
    brand: str | None = None
    last_four: str | None = None
    balance: float | None = None


class User(BaseModel):
    user_id: str
    name: Name
    address: Address
    email: str
    payment_methods: dict[str, PaymentMethod]
    orders: list[str]


class Variant(BaseModel):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(BaseModel):
    name: str
    product_id: str
    variants: dict[str, Variant]


class OrderItem(BaseModel):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class Fulfillment(BaseModel):
    tracking_id: list[str]
    item_ids: list[str]


class Payment(BaseModel):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(BaseModel):
    order_id: str
    user_id: str
    address: Address
    items: list[OrderItem]
    status: str
    fulfillments: list[Fulfillment] = Field(default_factory=list)
    payment_history: list[Payment] = Field(default_factory=list)
    cancel_reason: str | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


class Store(BaseModel):
    users: dict[str, User]
    orders: dict[str, Order]
    products: dict[str, Product]

    @classmethod
    def load(cls, data_dir: Path) -> "Store":
        return cls.model_validate_json((data_dir / "db.json").read_text())

    # --- lookups that raise the domain's own errors -------------------------------------

    def order(self, order_id: str) -> Order:
        if order_id not in self.orders:
            raise ToolError("Order not found")
        return self.orders[order_id]

    def user(self, user_id: str) -> User:
        if user_id not in self.users:
            raise ToolError("User not found")
        return self.users[user_id]

    def product(self, product_id: str) -> Product:
        if product_id not in self.products:
            raise ToolError("Product not found")
        return self.products[product_id]

    def variant(self, product_id: str, item_id: str) -> Variant:
        product = self.product(product_id)
        if item_id not in product.variants:
            raise ToolError("Variant not found")
        return product.variants[item_id]

    def payment_method(self, user_id: str, payment_method_id: str) -> PaymentMethod:
        methods = self.user(user_id).payment_methods
        if payment_method_id not in methods:
            raise ToolError("Payment method not found")
        return methods[payment_method_id]


def _fold(text: str) -> str:
    """Case- and accent-insensitive form of a name or email, as the domain matches them."""
    decomposed = unicodedata.normalize("NFKD", text or "")
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold().strip()


def _items_present(order: Order, item_ids: list[str]) -> bool:
    """Every item id in the list is in the order at least as many times as the list names it."""
    held = [i.item_id for i in order.items]
    return all(item_ids.count(i) <= held.count(i) for i in item_ids)


def _price_difference(store: Store, order: Order, item_ids: list[str], new_item_ids: list[str],
                      *, must_differ: bool) -> tuple[float, list[tuple[OrderItem, Variant]]]:
    """What swapping `item_ids` for `new_item_ids` (same products, available) costs, and the pairs."""
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match.")
    diff, pairs = 0.0, []
    for old_id, new_id in zip(item_ids, new_item_ids):
        if must_differ and old_id == new_id:
            raise ToolError("The new item id should be different from the old item id")
        item = next((i for i in order.items if i.item_id == old_id), None)
        if item is None:
            raise ToolError(f"Item {old_id} not found")
        variant = store.variant(item.product_id, new_id)
        if not variant.available:
            raise ToolError(f"New item {new_id} not found or available")
        diff += variant.price - item.price
        pairs.append((item, variant))
    return round(diff, 2), pairs


# --- the server -----------------------------------------------------------------------

READ = ToolAnnotations(readOnlyHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False)
IRREVERSIBLE = ToolAnnotations(readOnlyHint=False, destructiveHint=True)


def build_server(data_dir: Path) -> MCPServer:
    """The MCP server over the store in `data_dir` (its db.json), state held in this process."""
    store = Store.load(data_dir)
    policy = (data_dir / "policy.md").read_text() if (data_dir / "policy.md").exists() else ""
    mcp = MCPServer("tau2-retail", instructions=policy or None, version="1")

    @mcp.tool(annotations=READ)
    def find_user_id_by_email(email: str) -> str:
        """Find user id by email. If the user is not found, the function will return an error message.

        Args:
            email: The email of the user, such as 'something@example.com'.
        """
        wanted = _fold(email)
        for user_id, user in store.users.items():
            if _fold(user.email) == wanted:
                return user_id
        raise ToolError("User not found")

    @mcp.tool(annotations=READ)
    def find_user_id_by_name_zip(first_name: str, last_name: str, zip: str) -> str:
        """Find user id by first name, last name, and zip code. If the user is not found, the function
        will return an error message. By default, find user id by email, and only call this function
        if the user is not found by email or cannot remember email.

        Args:
            first_name: The first name of the customer, such as 'John'.
            last_name: The last name of the customer, such as 'Doe'.
            zip: The zip code of the customer, such as '12345'.
        """
        for user_id, user in store.users.items():
            if (_fold(user.name.first_name) == _fold(first_name) and _fold(user.name.last_name) == _fold(last_name)
                    and user.address.zip == zip.strip()):
                return user_id
        raise ToolError("User not found")

    @mcp.tool(annotations=READ)
    def get_user_details(user_id: str) -> User:
        """Get the details of a user, including their orders.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return store.user(user_id)

    @mcp.tool(annotations=READ)
    def get_order_details(order_id: str) -> Order:
        """Get the status and details of an order.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
        """
        return store.order(order_id)

    @mcp.tool(annotations=READ)
    def get_product_details(product_id: str) -> Product:
        """Get the inventory details of a product.

        Args:
            product_id: The product id, such as '6086499569'. Be careful the product id is different from the item id.
        """
        return store.product(product_id)

    @mcp.tool(annotations=READ)
    def get_item_details(item_id: str) -> Variant:
        """Get the inventory details of an item.

        Args:
            item_id: The item id, such as '6086499569'. Be careful the item id is different from the product id.
        """
        for product in store.products.values():
            if item_id in product.variants:
                return product.variants[item_id]
        raise ToolError("Item not found")

    @mcp.tool(annotations=READ)
    def list_all_product_types() -> str:
        """List the name and product id of all product types.
        Each product type has a variety of different items with unique item ids and options.
        There are only 50 product types in the store.

        Returns a JSON string mapping product names to their product IDs, sorted alphabetically by name.
        """
        return json.dumps({p.name: p.product_id for p in store.products.values()}, sort_keys=True)

    @mcp.tool(annotations=IRREVERSIBLE)
    def cancel_pending_order(order_id: str, reason: str) -> Order:
        """Cancel a pending order. If the order is already processed or delivered,
        it cannot be cancelled. The agent needs to explain the cancellation detail
        and ask for explicit user confirmation (yes/no) to proceed. If the user confirms,
        the order status will be changed to 'cancelled' and the payment will be refunded.
        The refund will be added to the user's gift card balance immediately if the payment
        was made using a gift card, otherwise the refund would take 5-7 business days to process.
        The function returns the order details after the cancellation.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
            reason: The reason for cancellation, which should be either 'no longer needed' or 'ordered by mistake'.
        """
        order = store.order(order_id)
        if order.status != "pending":
            raise ToolError("Non-pending order cannot be cancelled")
        if reason not in ("no longer needed", "ordered by mistake"):
            raise ToolError("Invalid reason")
        refunds = []
        for payment in order.payment_history:
            method = store.payment_method(order.user_id, payment.payment_method_id)
            refunds.append(Payment(transaction_type="refund", amount=payment.amount,
                                   payment_method_id=payment.payment_method_id))
            if method.source == "gift_card":  # a gift card is refunded at once
                method.balance = round((method.balance or 0) + payment.amount, 2)
        order.status, order.cancel_reason = "cancelled", reason
        order.payment_history.extend(refunds)
        return order

    @mcp.tool(annotations=WRITE)
    def exchange_delivered_order_items(order_id: str, item_ids: list[str], new_item_ids: list[str],
                                       payment_method_id: str) -> Order:
        """Exchange items in a delivered order to new items of the same product type.
        For a delivered order, return or exchange can be only done once by the agent.
        The agent needs to explain the exchange detail and ask for explicit user confirmation (yes/no) to proceed.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
            item_ids: The item ids to be exchanged, each such as '1008292230'. There could be duplicate items in the list.
            new_item_ids: The item ids to be exchanged for, each such as '1008292230'.
                There could be duplicate items in the list. Each new item id should match the item id
                in the same position and be of the same product.
            payment_method_id: The payment method id to pay or receive refund for the item price difference,
                such as 'gift_card_0000000' or 'credit_card_0000000'. These can be looked up
                from the user or order details.
        """
        order = store.order(order_id)
        if order.status != "delivered":
            raise ToolError("Non-delivered order cannot be exchanged")
        if not _items_present(order, item_ids):
            missing = next(i for i in item_ids if item_ids.count(i) > [x.item_id for x in order.items].count(i))
            raise ToolError(f"Number of {missing} not found.")
        diff, _pairs = _price_difference(store, order, item_ids, new_item_ids, must_differ=False)
        method = store.payment_method(order.user_id, payment_method_id)
        if method.source == "gift_card" and (method.balance or 0) < diff:
            raise ToolError("Insufficient gift card balance to pay for the price difference")
        order.status = "exchange requested"
        order.exchange_items, order.exchange_new_items = sorted(item_ids), sorted(new_item_ids)
        order.exchange_payment_method_id, order.exchange_price_difference = payment_method_id, diff
        return order

    @mcp.tool(annotations=WRITE)
    def modify_pending_order_address(order_id: str, address1: str, address2: str, city: str, state: str,
                                     country: str, zip: str) -> Order:
        """Modify the shipping address of a pending order. The agent needs to explain the modification
        detail and ask for explicit user confirmation (yes/no) to proceed.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
            address1: The first line of the address, such as '123 Main St'.
            address2: The second line of the address, such as 'Apt 1' or ''.
            city: The city, such as 'San Francisco'.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code, such as '12345'.
        """
        order = store.order(order_id)
        if "pending" not in order.status:
            raise ToolError("Non-pending order cannot be modified")
        order.address = Address(address1=address1, address2=address2, city=city, state=state, country=country,
                                zip=zip)
        return order

    @mcp.tool(annotations=WRITE)
    def modify_pending_order_items(order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> Order:
        """Modify items in a pending order to new items of the same product type. For a pending order,
        this function can only be called once. The agent needs to explain the exchange detail and ask
        for explicit user confirmation (yes/no) to proceed.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
            item_ids: The item ids to be modified, each such as '1008292230'. There could be duplicate items in the list.
            new_item_ids: The item ids to be modified for, each such as '1008292230'. There could be duplicate
                items in the list. Each new item id should match the item id in the same position and be of the same product.
            payment_method_id: The payment method id to pay or receive refund for the item price difference,
                such as 'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
        """
        order = store.order(order_id)
        if order.status != "pending":
            raise ToolError("Non-pending order cannot be modified")
        if not _items_present(order, item_ids):
            missing = next(i for i in item_ids if item_ids.count(i) > [x.item_id for x in order.items].count(i))
            raise ToolError(f"{missing} not found")
        diff, pairs = _price_difference(store, order, item_ids, new_item_ids, must_differ=True)
        method = store.payment_method(order.user_id, payment_method_id)
        if method.source == "gift_card" and (method.balance or 0) < diff:
            raise ToolError("Insufficient gift card balance to pay for the new item")
        order.payment_history.append(Payment(transaction_type="payment" if diff > 0 else "refund", amount=abs(diff),
                                             payment_method_id=payment_method_id))
        if method.source == "gift_card":
            method.balance = round((method.balance or 0) - diff, 2)
        for item, variant in pairs:
            item.item_id, item.price, item.options = variant.item_id, variant.price, dict(variant.options)
        order.status = "pending (item modified)"
        return order

    @mcp.tool(annotations=WRITE)
    def modify_pending_order_payment(order_id: str, payment_method_id: str) -> Order:
        """Modify the payment method of a pending order. The agent needs to explain the modification detail
        and ask for explicit user confirmation (yes/no) to proceed.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
            payment_method_id: The payment method id to pay or receive refund for the item price difference,
                such as 'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
        """
        order = store.order(order_id)
        if "pending" not in order.status:
            raise ToolError("Non-pending order cannot be modified")
        method = store.payment_method(order.user_id, payment_method_id)
        history = order.payment_history
        if len(history) != 1 or history[0].transaction_type != "payment":
            raise ToolError("There should be exactly one payment for a pending order")
        if history[0].payment_method_id == payment_method_id:
            raise ToolError("The new payment method should be different from the current one")
        amount, old_id = history[0].amount, history[0].payment_method_id
        if method.source == "gift_card" and (method.balance or 0) < amount:
            raise ToolError("Insufficient gift card balance to pay for the order")
        history.extend([Payment(transaction_type="payment", amount=amount, payment_method_id=payment_method_id),
                        Payment(transaction_type="refund", amount=amount, payment_method_id=old_id)])
        if method.source == "gift_card":
            method.balance = round((method.balance or 0) - amount, 2)
        old = store.payment_method(order.user_id, old_id)
        if old.source == "gift_card":
            old.balance = round((old.balance or 0) + amount, 2)
        return order

    @mcp.tool(annotations=WRITE)
    def modify_user_address(user_id: str, address1: str, address2: str, city: str, state: str, country: str,
                            zip: str) -> User:
        """Modify the default address of a user. The agent needs to explain the modification detail and
        ask for explicit user confirmation (yes/no) to proceed.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
            address1: The first line of the address, such as '123 Main St'.
            address2: The second line of the address, such as 'Apt 1' or ''.
            city: The city, such as 'San Francisco'.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code, such as '12345'.
        """
        user = store.user(user_id)
        user.address = Address(address1=address1, address2=address2, city=city, state=state, country=country,
                               zip=zip)
        return user

    @mcp.tool(annotations=WRITE)
    def return_delivered_order_items(order_id: str, item_ids: list[str], payment_method_id: str) -> Order:
        """Return some items of a delivered order.
        The order status will be changed to 'return requested'.
        The agent needs to explain the return detail and ask for explicit user confirmation (yes/no) to proceed.
        The user will receive follow-up email for how and where to return the item.

        Args:
            order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.
            item_ids: The item ids to be returned, each such as '1008292230'. There could be duplicate items in the list.
            payment_method_id: The payment method id to pay or receive refund for the item price difference,
                such as 'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
        """
        order = store.order(order_id)
        if order.status != "delivered":
            raise ToolError("Non-delivered order cannot be returned")
        method = store.payment_method(order.user_id, payment_method_id)
        if method.source != "gift_card" and payment_method_id != order.payment_history[0].payment_method_id:
            raise ToolError("Payment method should be the original payment method")
        if not _items_present(order, item_ids):
            raise ToolError("Some item not found")
        order.status = "return requested"
        order.return_items, order.return_payment_method_id = sorted(item_ids), payment_method_id
        return order

    @mcp.tool(annotations=READ)
    def calculate(expression: str) -> str:
        """Calculate the result of a mathematical expression.

        Args:
            expression: The mathematical expression to calculate, such as '2 + 2'. The expression can contain
                numbers, operators (+, -, *, /), parentheses, and spaces.
        """
        if not expression.strip() or not all(c in "0123456789+-*/(). " for c in expression):
            raise ToolError("Invalid characters in expression")
        try:
            return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))  # digits and operators only
        except (SyntaxError, ZeroDivisionError, TypeError) as exc:
            raise ToolError(f"Invalid expression: {exc}") from None

    @mcp.tool(annotations=READ)
    def transfer_to_human_agents(summary: str) -> str:
        """Transfer the user to a human agent, with a summary of the user's issue.
        Only transfer if
         -  the user explicitly asks for a human agent
         -  given the policy and the available tools, you cannot solve the user's issue.

        Args:
            summary: A summary of the user's issue.
        """
        return "Transfer successful"

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path,
                        help="the retail domain's directory (db.json, and policy.md for the instructions)")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    if not (args.data / "db.json").is_file():
        parser.error(f"{args.data}: no db.json there (give the retail domain's directory)")
    server = build_server(args.data)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    sys.exit(main())
