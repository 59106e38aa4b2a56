"""Minor units and text: ISO 4217 exponents, strict parsing, formatting with signs."""

from decimal import Decimal

import pytest

from sundry.core import money


@pytest.mark.parametrize(
    "currency, places", [("USD", 2), ("inr", 2), ("JPY", 0), ("KRW", 0), ("KWD", 3), ("BHD", 3), ("CLF", 4), ("XYZ", 2)]
)
def test_exponents_follow_iso_4217(currency, places):
    assert money.exponent(currency) == places


@pytest.mark.parametrize(
    "raw, currency, minor",
    [
        ("40.00", "USD", 4000),
        ("40", "USD", 4000),
        (" 0.01 ", "EUR", 1),
        ("1500", "JPY", 1500),
        ("1.234", "KWD", 1234),
        (40, "USD", 4000),
        (40.5, "USD", 4050),
        (Decimal("7.25"), "GBP", 725),
        ("0", "USD", 0),
    ],
)
def test_major_units_parse_to_minor_units(raw, currency, minor):
    assert money.parse_major(raw, currency) == minor


@pytest.mark.parametrize(
    "raw, currency, fragment",
    [
        ("NaN", "USD", "plain decimal"),
        (float("nan"), "USD", "finite"),
        (float("inf"), "USD", "finite"),
        (Decimal("Infinity"), "USD", "finite"),
        ("1e3", "USD", "plain decimal"),
        ("4²", "USD", "plain decimal"),
        ("٤٠", "USD", "plain decimal"),
        ("４０", "USD", "plain decimal"),
        ("1" * 40, "USD", "not plausible"),
        ("1,000.00", "USD", "plain decimal"),
        ("$40", "USD", "plain decimal"),
        ("40.", "USD", "plain decimal"),
        ("", "USD", "plain decimal"),
        ("40.001", "USD", "2 decimal places"),
        ("1.5", "JPY", "0 decimal places"),
        ("-1.00", "USD", "negative"),
        (True, "USD", "true/false"),
        (None, "USD", "not NoneType"),
        ("1.00", "dollars", "currency code"),
        ("1.00", "US1", "currency code"),
    ],
)
def test_bad_amounts_are_refused_with_a_reason(raw, currency, fragment):
    with pytest.raises(money.MoneyError, match=fragment):
        money.parse_major(raw, currency)


def test_negative_amounts_only_when_asked():
    assert money.parse_major("-0.05", "USD", allow_negative=True) == -5


@pytest.mark.parametrize(
    "minor, currency, text, plain",
    [
        (123450, "USD", "1,234.50 USD", "1234.50"),
        (-5, "USD", "-0.05 USD", "-0.05"),  # not "-1.95": the sign belongs to the whole amount
        (-123450, "usd", "-1,234.50 USD", "-1234.50"),
        (0, "EUR", "0.00 EUR", "0.00"),
        (150000, "JPY", "150,000 JPY", "150000"),
        (1234, "KWD", "1.234 KWD", "1.234"),
    ],
)
def test_formatting_keeps_the_sign_and_the_currency_places(minor, currency, text, plain):
    assert money.format_money(minor, currency) == text
    assert money.format_money(minor, currency, grouping=False) == f"{plain} {currency.upper()}"
    assert money.major_str(minor, currency) == plain
    assert money.parse_major(plain, currency, allow_negative=True) == minor  # round trip
