"""Desk messages as the customer reads them."""

from sundry.portal.wording import customer_wording


def test_amounts_take_one_format_and_internal_ids_go():
    assert customer_wording("I've refunded 1234.5 USD on order SU-12345 (rfd_ab12cd34ef).") == (
        "I've refunded 1,234.50 USD on order SU-12345."
    )
    assert customer_wording("Your refund rfd_ab12cd34ef of USD 15 is done; return ret_ab12cd34ef booked.") == (
        "Your refund of 15.00 USD is done; return booked."
    )
    assert customer_wording("A refund was already issued (turn 7). Total 4,050 INR, 1500 JPY.") == (
        "A refund was already issued. Total 4,050.00 INR, 1,500 JPY."
    )


def test_what_the_customer_needs_stays():
    text = "Order SU-40111, parcel 1Z12345678901234AB, item SKU-00005, SKU 5 and ABC 2021 are untouched."
    assert customer_wording(text) == text
