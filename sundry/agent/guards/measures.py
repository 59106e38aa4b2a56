"""A number joined to a measure word by a hyphen — "20-hour", "500-piece", "34-inch", "2-in-1" — is a
measure, not an identifier. Pure.

The reply check reads any token mixing letters and digits as an identifier the request must have shown
(`replycheck.id_tokens`). Measured on the 882 recorded GPT-4.1 replies of τ²-bench, the only tokens it
refused as invented were measures written by this rule of English: "500-piece", "20-hour" (twice),
"34-inch". The words come from a general list of units and quantities, never from a domain: time, length,
weight, volume, power, data, and the counts goods are sold and rated in.

The grammar (`is_measure`), on one token as the reply check cuts it (no spaces; "1,000-count" reaches
here as "000-count"):

    NUMBER [ "-" ("to" | "or") "-" NUMBER | "-" NUMBER ] "-" MEASURE [ "-" word ]{0,2}
    NUMBER "-in-" NUMBER                                            ("2-in-1")

NUMBER is one to six digits or an ordinal ("2nd"); MEASURE a word of the list, singular or plural, in
lower case or capitalised ("20-Hour Battery"), never in capitals; the words after it lower case letters
only ("2-year-old", "30-day-return"). So "SO-1042", "48213-B", "1Z-999-AA1", "20-HOUR" or "500-piece-A1"
stay identifiers, as does anything a domain's own ID patterns find (`replycheck.id_tokens` adds those
first).
"""

from __future__ import annotations

import re

# Units and quantities, in general use. Single letters ("m", "g", "v") are left out: "48213-V" is as likely
# a reference as a measure.
WORDS = frozenset(
    """
    second sec minute min hour hr day night week weekend month year yr decade century lifetime
    inch foot feet ft yard yd mile mi millimeter millimetre mm centimeter centimetre cm meter metre km
    kilometer kilometre
    ounce oz pound lb lbs gram kilogram kg ton tonne
    liter litre ml milliliter millilitre gallon gal quart qt pint cup fl
    watt kw kilowatt volt amp mah ohm hz khz mhz ghz horsepower hp
    bit byte kb mb gb tb megapixel mp pixel
    piece pc pcs pack count ct set pair box case roll sheet ream page serving dose tablet capsule bottle can
    unit item bag carton bundle
    star point step stage speed gear tier level layer ply port seat person people player door drawer shelf
    burner slot bay outlet button channel core thread blade wheel lane bedroom room bed floor storey story
    degree percent times fold way sided side color colour inning lap hole course stop cycle setting mode
    zone socket plug stitch tooth
    """.split()
)
_WORD = "|".join(sorted(WORDS, key=len, reverse=True))
_NUMBER = r"\d{1,6}(?:st|nd|rd|th)?"
_MEASURE = re.compile(
    rf"{_NUMBER}(?:-(?:to|or)-{_NUMBER}|-{_NUMBER})?-(?:{_WORD})(?:e?s)?(?:-[a-z]+){{0,2}}|{_NUMBER}-in-{_NUMBER}"
)

ON = True  # the tests' negative control switches it off


def is_measure(token: str) -> bool:
    """Whether a whole token is a number hyphenated to a measure word (see the module's grammar)."""
    # Each part may be capitalised ("20-Hour"), none written in capitals ("20-HOUR" is read as a reference).
    lowered = "-".join(part[:1].lower() + part[1:] for part in token.split("-"))
    return ON and _MEASURE.fullmatch(lowered) is not None
