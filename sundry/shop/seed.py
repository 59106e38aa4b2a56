"""A deterministic demo shop.

`generate_shop(seed=N)` fills the shop tables with customers, addresses,
payment methods, products, orders, items, payments, parcels, tracking events,
refunds, returns and cancellations (contacts start empty: only the agent's
tools write them). The same seed always produces the same rows, primary keys
included: every random draw comes from one `random.Random(seed)`, every
timestamp is `EPOCH` plus a seeded offset, and every identifier is drawn from
that generator (never uuid4, never the clock).

The demo world's "today" is `AS_OF` (EPOCH + 330 days): nothing happens after
it, and order statuses follow from how long before it an order was placed.

Order numbers are dense on purpose: they are drawn without replacement from a
block about 4/3 the size of the order count, so a one-character slip in an
order number often names another customer's real order.

Money: `Product.price_cents` is the list price in US cents. An order is priced
in its customer's currency (USD, EUR, GBP or INR); item prices are the list
price converted and rounded to a shop-style price point (x.99, ₹x,xx9).
Shipping is free, so an order's total is the sum of its lines, and its one
captured payment equals that total.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.management.color import no_style
from django.db import connection, transaction
from django.db.models import ProtectedError

from sundry.people.services import customers_link_many, customers_unlink

from .ids import DOMAIN_NAME
from .models import (
    Address,
    Cancellation,
    Contact,
    Customer,
    Order,
    OrderItem,
    Parcel,
    Payment,
    PaymentMethod,
    Product,
    Refund,
    Return,
    TrackingEvent,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
AS_OF = EPOCH + timedelta(days=330)  # the demo world's "now"; no row is dated after it
ORDER_NUMBER_START = 20000
ORDER_BLOCK_FACTOR = 4 / 3  # 6000 orders -> SU-20000..SU-27999
BATCH_SIZE = 500

HOUR = 3600
DAY = 24 * HOUR

_LOWER_ALNUM = string.digits + string.ascii_lowercase
_UPPER_ALNUM = string.digits + string.ascii_uppercase

# Deletion order for replace=True: leaves first (PROTECT relations point up).
SHOP_MODELS_DELETE_ORDER = [
    Contact,
    Cancellation,
    Refund,
    Return,
    TrackingEvent,
    Parcel,
    Payment,
    OrderItem,
    Order,
    PaymentMethod,
    Address,
    Customer,
    Product,
]


class SeedError(Exception):
    """The shop cannot be seeded as asked."""


# --------------------------------------------------------------------------- #
# Reference data
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Country:
    code: str
    currency: str
    weight: float
    first_names: tuple[str, ...]
    last_names: tuple[str, ...]
    cities: tuple[tuple[str, str], ...]  # (city, postcode seed used by _postcode)
    streets: tuple[str, ...]
    carriers: tuple[str, ...]
    warehouse: str
    hubs: tuple[str, ...]


COUNTRIES: tuple[Country, ...] = (
    Country(
        "US",
        "USD",
        0.30,
        (
            "James",
            "Mary",
            "Robert",
            "Patricia",
            "Michael",
            "Jennifer",
            "David",
            "Linda",
            "Daniel",
            "Emily",
            "Chris",
            "Ashley",
            "Marcus",
            "Keisha",
            "Tyler",
            "Megan",
            "Carlos",
            "Sofia",
            "Kevin",
            "Hannah",
            "Brandon",
            "Olivia",
            "Jamal",
            "Grace",
            "Ethan",
            "Madison",
            "Luis",
            "Chloe",
        ),
        (
            "Smith",
            "Johnson",
            "Williams",
            "Brown",
            "Jones",
            "Garcia",
            "Miller",
            "Davis",
            "Rodriguez",
            "Martinez",
            "Wilson",
            "Anderson",
            "Taylor",
            "Thomas",
            "Moore",
            "Jackson",
            "Lee",
            "Harris",
            "Clark",
            "Lewis",
            "Walker",
            "Young",
            "Nguyen",
            "Hill",
            "Carter",
            "Mitchell",
        ),
        (
            ("Austin, TX", "787"),
            ("Seattle, WA", "981"),
            ("Denver, CO", "802"),
            ("Chicago, IL", "606"),
            ("Brooklyn, NY", "112"),
            ("Portland, OR", "972"),
            ("Atlanta, GA", "303"),
            ("San Diego, CA", "921"),
            ("Columbus, OH", "432"),
            ("Raleigh, NC", "276"),
            ("Minneapolis, MN", "554"),
            ("Phoenix, AZ", "850"),
        ),
        (
            "Maple Avenue",
            "Oak Street",
            "Cedar Lane",
            "Pine Street",
            "Elm Drive",
            "Washington Boulevard",
            "Lakeview Road",
            "Sunset Drive",
            "Highland Avenue",
            "Park Place",
            "Willow Court",
            "Ridge Road",
        ),
        ("UPS", "FedEx", "USPS"),
        "Reno, NV, US",
        ("Louisville, KY, US", "Memphis, TN, US", "Indianapolis, IN, US", "Ontario, CA, US"),
    ),
    Country(
        "GB",
        "GBP",
        0.20,
        (
            "Oliver",
            "Amelia",
            "George",
            "Isla",
            "Harry",
            "Ava",
            "Jack",
            "Mia",
            "Noah",
            "Poppy",
            "Alfie",
            "Freya",
            "Oscar",
            "Evie",
            "Arjun",
            "Priya",
            "Callum",
            "Niamh",
            "Rhys",
            "Zoë",
            "Tom",
            "Lucy",
        ),
        (
            "Smith",
            "Jones",
            "Taylor",
            "Brown",
            "Williams",
            "Wilson",
            "Davies",
            "Evans",
            "Thomas",
            "Roberts",
            "Walker",
            "Wright",
            "Robinson",
            "Thompson",
            "Hughes",
            "Patel",
            "Khan",
            "O'Brien",
            "MacLeod",
            "Green",
        ),
        (
            ("London", "N1|SE15|E8|SW11|NW5|W12"),
            ("Manchester", "M4|M14|M20"),
            ("Leeds", "LS6|LS8"),
            ("Bristol", "BS6|BS8"),
            ("Edinburgh", "EH3|EH6|EH9"),
            ("Glasgow", "G12|G41"),
            ("Cardiff", "CF10|CF24"),
            ("Birmingham", "B13|B15"),
            ("Brighton", "BN1|BN2"),
            ("Norwich", "NR2|NR3"),
        ),
        (
            "Elm Road",
            "Church Street",
            "Victoria Road",
            "Station Road",
            "Park Lane",
            "Mill Lane",
            "Queens Road",
            "The Crescent",
            "Albert Street",
            "Kingsway",
            "Windsor Close",
            "Manor Gardens",
        ),
        ("Royal Mail", "DPD", "Evri"),
        "Daventry, GB",
        ("Birmingham, GB", "Coventry, GB", "Warrington, GB"),
    ),
    Country(
        "IN",
        "INR",
        0.20,
        (
            "Aarav",
            "Ananya",
            "Vihaan",
            "Diya",
            "Arjun",
            "Isha",
            "Rohan",
            "Kavya",
            "Aditya",
            "Priya",
            "Rahul",
            "Sneha",
            "Karthik",
            "Meera",
            "Vikram",
            "Asha",
            "Siddharth",
            "Pooja",
            "Nikhil",
            "Lakshmi",
        ),
        (
            "Sharma",
            "Patel",
            "Iyer",
            "Reddy",
            "Nair",
            "Gupta",
            "Singh",
            "Kumar",
            "Menon",
            "Das",
            "Rao",
            "Chatterjee",
            "Mehta",
            "Joshi",
            "Pillai",
            "Verma",
            "Bose",
            "Kulkarni",
        ),
        (
            ("Mumbai", "4000"),
            ("Bengaluru", "5600"),
            ("New Delhi", "1100"),
            ("Chennai", "6000"),
            ("Pune", "4110"),
            ("Hyderabad", "5000"),
            ("Kolkata", "7000"),
            ("Ahmedabad", "3800"),
        ),
        (
            "MG Road",
            "Linking Road",
            "Residency Road",
            "Anna Salai",
            "Park Street",
            "FC Road",
            "Banjara Hills Road",
            "Lajpat Nagar Main Road",
            "100 Feet Road",
            "SV Road",
        ),
        ("Delhivery", "Blue Dart", "Ekart"),
        "Bhiwandi, IN",
        ("Nagpur, IN", "Gurugram, IN", "Bengaluru, IN"),
    ),
    Country(
        "DE",
        "EUR",
        0.10,
        (
            "Lukas",
            "Anna",
            "Leon",
            "Marie",
            "Felix",
            "Sophie",
            "Jonas",
            "Lena",
            "Paul",
            "Hannah",
            "Jürgen",
            "Katrin",
            "Max",
            "Laura",
            "Tobias",
            "Julia",
        ),
        (
            "Müller",
            "Schmidt",
            "Schneider",
            "Fischer",
            "Weber",
            "Meyer",
            "Wagner",
            "Becker",
            "Hoffmann",
            "Schulz",
            "Koch",
            "Richter",
            "Klein",
            "Wolf",
        ),
        (
            ("Berlin", "10"),
            ("München", "80"),
            ("Hamburg", "20"),
            ("Köln", "50"),
            ("Frankfurt am Main", "60"),
            ("Leipzig", "04"),
        ),
        (
            "Lindenstraße",
            "Hauptstraße",
            "Bahnhofstraße",
            "Gartenweg",
            "Schillerstraße",
            "Goethestraße",
            "Bergstraße",
            "Kirchgasse",
        ),
        ("DHL", "DPD", "Hermes"),
        "Venlo, NL",
        ("Kassel, DE", "Hannover, DE", "Nürnberg, DE"),
    ),
    Country(
        "FR",
        "EUR",
        0.08,
        (
            "Louis",
            "Emma",
            "Gabriel",
            "Chloé",
            "Hugo",
            "Léa",
            "Arthur",
            "Manon",
            "Jules",
            "Camille",
            "Théo",
            "Inès",
            "Lucas",
            "Juliette",
        ),
        (
            "Martin",
            "Bernard",
            "Dubois",
            "Thomas",
            "Robert",
            "Richard",
            "Petit",
            "Durand",
            "Leroy",
            "Moreau",
            "Lefèvre",
            "Girard",
            "Fournier",
        ),
        (
            ("Paris", "750"),
            ("Lyon", "6900"),
            ("Marseille", "130"),
            ("Toulouse", "310"),
            ("Bordeaux", "330"),
            ("Lille", "590"),
        ),
        (
            "rue des Lilas",
            "avenue Victor Hugo",
            "rue de la République",
            "boulevard Voltaire",
            "rue Pasteur",
            "rue du Moulin",
            "place de la Mairie",
        ),
        ("Colissimo", "Chronopost", "DPD"),
        "Venlo, NL",
        ("Roissy, FR", "Lyon-Saint-Exupéry, FR"),
    ),
    Country(
        "IE",
        "EUR",
        0.04,
        ("Seán", "Aoife", "Conor", "Ciara", "Darragh", "Saoirse", "Cian", "Róisín", "Liam", "Niamh"),
        ("Murphy", "Kelly", "O'Sullivan", "Walsh", "Byrne", "Ryan", "O'Connor", "Doyle", "McCarthy", "Gallagher"),
        (("Dublin", "D02|D04|D06|D08|D07"), ("Cork", "T12|T23"), ("Galway", "H91"), ("Limerick", "V94")),
        ("Seaview Terrace", "Main Street", "Church Road", "Castle Street", "Harbour Road", "Abbey Lane"),
        ("An Post", "DPD"),
        "Venlo, NL",
        ("Dublin, IE", "Athlone, IE"),
    ),
    Country(
        "NL",
        "EUR",
        0.04,
        ("Daan", "Emma", "Sem", "Julia", "Lucas", "Tess", "Finn", "Sara", "Bram", "Fenna"),
        ("de Jong", "Jansen", "de Vries", "van den Berg", "Bakker", "Visser", "Smit", "Meijer", "de Boer", "Mulder"),
        (("Amsterdam", "10"), ("Rotterdam", "30"), ("Utrecht", "35"), ("Den Haag", "25"), ("Eindhoven", "56")),
        ("Prinsengracht", "Kerkstraat", "Dorpsstraat", "Molenweg", "Stationsplein", "Lindenlaan"),
        ("PostNL", "DHL"),
        "Venlo, NL",
        ("Nieuwegein, NL", "Amsterdam, NL"),
    ),
    Country(
        "ES",
        "EUR",
        0.04,
        ("Hugo", "Lucía", "Martín", "Sofía", "Pablo", "María", "Alejandro", "Paula", "Daniel", "Carmen"),
        ("García", "Fernández", "González", "Rodríguez", "López", "Martínez", "Sánchez", "Pérez", "Gómez", "Ruiz"),
        (("Madrid", "280"), ("Barcelona", "080"), ("Valencia", "460"), ("Sevilla", "410"), ("Bilbao", "480")),
        (
            "Calle Mayor",
            "Calle de Alcalá",
            "Avenida de la Constitución",
            "Calle del Sol",
            "Paseo de Gracia",
            "Calle Real",
        ),
        ("Correos", "SEUR"),
        "Venlo, NL",
        ("Madrid, ES", "Zaragoza, ES"),
    ),
)

# Conversion from the USD list price (fixed demo rates).
_FX = {"USD": 1.0, "EUR": 0.93, "GBP": 0.79, "INR": 83.0}

EMAIL_DOMAINS = ("example.com", "example.net", "example.org", "mail.example", "inbox.example")
UPI_BANKS = ("okaxis", "oksbi", "okhdfcbank", "okicici", "ybl", "paytm")

# (name, USD price, popularity weight)
PRODUCTS: tuple[tuple[str, float, float], ...] = (
    # Kitchen
    ("Countertop Blender 1200W", 89.99, 3.0),
    ("Electric Kettle 1.7L", 39.99, 4.0),
    ("Stand Mixer", 279.00, 1.2),
    ('Cast Iron Skillet 10"', 34.50, 2.5),
    ("Chef's Knife 8\"", 59.00, 2.0),
    ("Burr Coffee Grinder", 119.00, 1.8),
    ("Pour-Over Coffee Set", 42.00, 1.5),
    ("2-Slice Toaster", 44.99, 2.5),
    ("Air Fryer 5.5L", 129.99, 3.5),
    ("Nonstick Frying Pan 28cm", 29.99, 2.5),
    ("Bamboo Cutting Board", 24.99, 2.0),
    ("Glass Food Storage Set (10 pc)", 36.99, 1.8),
    ("Stainless Steel Water Bottle 750ml", 24.00, 3.0),
    ("French Press 1L", 32.00, 1.5),
    ("Espresso Machine", 349.00, 1.0),
    # Garden
    ("Acacia Garden Table", 249.00, 1.0),
    ("Folding Garden Chairs (pair)", 119.00, 1.0),
    ("Expandable Garden Hose 30m", 49.99, 1.6),
    ("Bypass Pruning Shears", 21.99, 1.4),
    ("Ceramic Planter, Large", 64.00, 1.2),
    ("Solar Path Lights (8 pack)", 39.99, 1.6),
    ("Raised Garden Bed Kit", 139.00, 0.8),
    ("Cordless Hedge Trimmer", 169.00, 0.7),
    ("Wooden Bird Feeder", 27.50, 1.0),
    ("Outdoor String Lights 15m", 34.99, 1.8),
    ("Patio Umbrella 2.7m", 149.00, 0.7),
    # Electronics
    ("Wireless Noise-Cancelling Headphones", 229.00, 3.0),
    ("True Wireless Earbuds", 99.00, 3.5),
    ("Bluetooth Speaker", 79.99, 2.5),
    ("USB-C Charger 65W", 45.00, 3.0),
    ("USB-C Cable 2m (2 pack)", 14.99, 4.0),
    ("Portable Power Bank 20000mAh", 49.99, 2.5),
    ("Smart Plug (4 pack)", 39.99, 1.8),
    ("Mechanical Keyboard", 129.00, 1.5),
    ("Wireless Mouse", 34.99, 2.5),
    ('27" 4K Monitor', 399.00, 1.0),
    ("1080p Webcam", 69.99, 1.3),
    ("Fitness Tracker", 89.00, 1.5),
    ('E-Reader 6"', 139.99, 1.2),
    ("Smartwatch", 279.00, 1.2),
    # Home
    ("LED Desk Lamp", 49.00, 2.0),
    ("Wool Throw Blanket", 79.00, 1.5),
    ("Memory Foam Pillow", 54.99, 2.0),
    ("Cotton Bath Towel Set", 59.99, 1.5),
    ("Blackout Curtains (2 panels)", 64.99, 1.2),
    ("Scented Soy Candle", 19.99, 2.5),
    ("Robot Vacuum", 299.00, 1.0),
    ("Cordless Stick Vacuum", 249.99, 1.2),
    ("HEPA Air Purifier", 189.00, 1.0),
    ("Minimalist Wall Clock", 32.00, 1.0),
    ("Linen Duvet Cover, Double", 119.00, 1.0),
    # Outdoor and sport
    ("2-Person Camping Tent", 159.00, 0.8),
    ("Hiking Backpack 35L", 94.99, 1.2),
    ("Yoga Mat", 39.00, 2.0),
    ("Adjustable Dumbbells (pair)", 299.00, 0.7),
    ("Insulated Travel Mug", 27.99, 2.5),
    ("Trail Running Socks (3 pack)", 22.00, 2.0),
    ("Bike Helmet", 69.00, 1.2),
    ("Rechargeable Camping Lantern", 29.99, 1.2),
    ("Waterproof Picnic Blanket", 34.00, 1.2),
)

CANCEL_REASONS = (
    "customer changed their mind before dispatch",
    "customer ordered the wrong item",
    "item out of stock",
    "duplicate order",
    "delivery address could not be served",
)
RETURN_REASONS = (
    "No longer needed",
    "Item arrived damaged",
    "Not as described",
    "Wrong item received",
    "Changed my mind",
    "Stopped working after a week",
    "Better price found elsewhere",
)
GOODWILL_REASONS = (
    ("item", "Item arrived damaged; refund for the damaged item"),
    ("item", "Missing item from the parcel"),
    ("share", "Goodwill credit for late delivery"),
    ("share", "Price adjustment after promotion"),
    ("share", "Partial refund for cosmetic damage, customer kept the item"),
)
LOST_REFUND_REASON = "Parcel lost in transit; full refund"


# --------------------------------------------------------------------------- #
# Small helpers
# --------------------------------------------------------------------------- #


class _Ids:
    """Unique random identifiers from the seeded generator."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.seen: set[str] = set()

    def make(self, prefix: str, alphabet: str, length: int) -> str:
        while True:
            value = prefix + "".join(self.rng.choices(alphabet, k=length))
            if value not in self.seen:
                self.seen.add(value)
                return value

    def lower(self, prefix: str) -> str:
        return self.make(prefix, _LOWER_ALNUM, 8)


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()


def _slug(text: str) -> str:
    return "".join(c for c in _ascii(text) if c.isalnum())


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(string.digits, k=n))


def _at(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


AS_OF_S = int((AS_OF - EPOCH).total_seconds())


def _local_price(usd_cents: int, currency: str) -> int:
    """List price converted to `currency`, rounded to a price point just under a step (x.99, ₹x9)."""
    converted = usd_cents * _FX[currency]
    if currency == "INR":
        # Whole rupees ending in 9: ₹7,469 -> 746900 paise.
        rupees = max(9, int(round(converted / 100 / 10)) * 10 - 1)
        return rupees * 100
    # Whole units less a cent: 83.69 -> 83.99.
    return max(99, int(round(converted / 100)) * 100 - 1)


def _postcode(rng: random.Random, country: str, seed: str) -> str:
    if country == "US":
        return seed + _digits(rng, 2)
    if country == "GB":
        outward = rng.choice(seed.split("|"))
        return f"{outward} {rng.randint(1, 9)}{''.join(rng.choices('ABDEFGHJLNPQRSTUWXYZ', k=2))}"
    if country == "IN":
        return seed + _digits(rng, 2)
    if country in ("DE", "ES"):
        return seed + _digits(rng, 5 - len(seed))
    if country == "FR":
        # Paris postcodes name the arrondissement: 75001..75020.
        return seed + (f"{rng.randint(1, 20):02d}" if seed == "750" else _digits(rng, 5 - len(seed)))
    if country == "IE":
        key = rng.choice(seed.split("|"))
        return f"{key} {rng.choice('ACDEFHKNPRTVWXY')}{_digits(rng, 1)}{rng.choice('ACDEFHKNPRTVWXY')}{_digits(rng, 1)}"
    if country == "NL":
        return f"{seed}{_digits(rng, 2)} {''.join(rng.choices('ABCDEGHJKLMNPRSTVWXZ', k=2))}"
    raise ValueError(country)


def _line1(rng: random.Random, country: str, street: str) -> str:
    n = rng.randint(1, 240)
    if country == "US":
        line = f"{rng.randint(100, 9899)} {street}"
        if rng.random() < 0.25:
            line += f", Apt {rng.randint(1, 24)}{rng.choice('ABCDEF')}"
        return line
    if country in ("GB", "IE"):
        if rng.random() < 0.2:
            return f"Flat {rng.randint(1, 30)}, {n} {street}"
        return f"{n} {street}"
    if country == "IN":
        return (
            f"Flat {rng.randint(1, 18)}{rng.randint(0, 9):02d}, "
            f"{rng.choice(['Lotus', 'Sai', 'Green', 'Royal', 'Shanti', 'Prestige'])} "
            f"{rng.choice(['Residency', 'Apartments', 'Heights', 'Enclave'])}, {street}"
        )
    if country in ("DE", "NL"):
        return f"{street} {n}"
    if country == "FR":
        return f"{n} {street}"
    if country == "ES":
        return f"{street} {n}, {rng.randint(1, 8)}º {rng.choice('ABCD')}"
    raise ValueError(country)


def _phone(rng: random.Random, country: str) -> str:
    d = lambda k: _digits(rng, k)  # noqa: E731
    return {
        "US": lambda: f"+1 {rng.choice(['512', '206', '303', '312', '718', '503', '404', '619'])}-555-01{d(2)}",
        "GB": lambda: f"+44 7700 900{d(3)}",
        "IN": lambda: f"+91 {rng.choice('6789')}{d(4)} {d(5)}",
        "DE": lambda: f"+49 15{rng.choice('129')} {d(7)}",
        "FR": lambda: f"+33 {rng.choice('67')} {d(2)} {d(2)} {d(2)} {d(2)}",
        "IE": lambda: f"+353 8{rng.choice('35679')} {d(3)} {d(4)}",
        "NL": lambda: f"+31 6 {d(8)}",
        "ES": lambda: f"+34 6{d(2)} {d(3)} {d(3)}",
    }[country]()


def _email(rng: random.Random, first: str, last: str, taken: set[str]) -> str:
    f, la = _slug(first), _slug(last)
    pattern = rng.randrange(5)
    local = [f"{f}.{la}", f"{f}{la}", f"{f[0]}.{la}", f"{f}_{la}", f"{la}.{f}"][pattern]
    if rng.random() < 0.35:
        local += str(rng.randint(1, 99))
    domain = rng.choice(EMAIL_DOMAINS)
    email = f"{local}@{domain}"
    while email in taken:
        email = f"{local}{rng.randint(100, 999)}@{domain}"
    taken.add(email)
    return email


def _spread(rng: random.Random, start: int, gaps: list[tuple[int, int]], latest: int) -> list[int]:
    """Times from `start` separated by random gaps; squeezed to end by `latest` if they would run past it."""
    times, t = [], start
    for lo, hi in gaps:
        t += rng.randint(lo, hi)
        times.append(t)
    if times and times[-1] > latest:
        span, room = times[-1] - start, max(len(times), latest - start)
        times = [start + (x - start) * room // span for x in times]
        # keep strictly increasing after integer scaling
        for i in range(1, len(times)):
            if times[i] <= times[i - 1]:
                times[i] = times[i - 1] + 1
    return times


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #


def shop_is_empty() -> bool:
    return not any(model.objects.exists() for model in SHOP_MODELS_DELETE_ORDER)


def clear_shop() -> None:
    """Delete every shop row. Raises SeedError if rows outside the shop still point at them."""
    try:
        # The desk's records of the shop's customers go first: a ticket protects its customer.
        customers_unlink(domain=DOMAIN_NAME)
        for model in SHOP_MODELS_DELETE_ORDER:
            model.objects.all().delete()
    except ProtectedError as exc:
        blockers = sorted({f"{o._meta.label}" for o in exc.protected_objects})
        raise SeedError(
            f"Cannot replace the shop: rows outside it still reference shop rows ({', '.join(blockers)}). "
            "Delete those first."
        ) from exc


def link_customers() -> None:
    """Give every shop customer its desk record (the bulk insert bypassed `Customer.save`)."""
    rows = Customer.objects.values("customer_id", "name", "email", "phone", "user_id")
    customers_link_many(
        domain=DOMAIN_NAME,
        rows=[{"external_key": r.pop("customer_id"), **r} for r in rows],
    )


def generate_shop(*, seed: int, customers: int = 600, orders: int = 6000, replace: bool = False) -> dict:
    """Seed the demo shop deterministically from `seed`; return row counts by kind.

    Refuses (SeedError) if the shop already has rows, unless `replace=True`,
    which deletes all shop rows first. Everything runs in one transaction.
    """
    if customers < 1:
        raise SeedError("customers must be at least 1")
    if orders < 0:
        raise SeedError("orders must not be negative")
    block = max(orders, round(orders * ORDER_BLOCK_FACTOR))
    if ORDER_NUMBER_START + block > 100000:
        raise SeedError(f"{orders} orders do not fit in five-digit order numbers")

    with transaction.atomic():
        if not shop_is_empty():
            if not replace:
                raise SeedError("The shop already has data; pass replace=True to delete it and reseed.")
            clear_shop()
        counts = _Builder(random.Random(seed), customers, orders, block).build()
        _reset_sequences()
        link_customers()
    return counts


def one_char_mutations(number: str) -> list[str]:
    """Every string differing from `number` by one digit replaced with another digit."""
    out = []
    for i, ch in enumerate(number):
        if ch in string.digits:
            for d in string.digits:
                if d != ch:
                    out.append(number[:i] + d + number[i + 1 :])
    return out


def mutation_hit_share(numbers: set[str]) -> float:
    """Share of all one-digit mutations of all `numbers` that are themselves in `numbers`."""
    total = hits = 0
    for number in numbers:
        for mutated in one_char_mutations(number):
            total += 1
            hits += mutated in numbers
    return hits / total if total else 0.0


def fingerprint() -> str:
    """SHA-256 of every shop row (all columns, primary keys included) in a canonical order."""
    through = Return.items.through
    keyed = [
        (Customer, "customer_id"),
        (Address, "address_id"),
        (PaymentMethod, "payment_method_id"),
        (Product, "sku"),
        (Order, "number"),
        (OrderItem, "item_id"),
        (Payment, "payment_id"),
        (Parcel, "tracking_number"),
        (TrackingEvent, None),
        (Refund, "refund_id"),
        (Return, "return_id"),
        (through, None),
        (Cancellation, "idempotency_key"),
        (Contact, "contact_id"),
    ]
    h = hashlib.sha256()
    for model, key in keyed:
        fields = [f.attname for f in model._meta.concrete_fields]
        order = [key] if key else ["pk"]
        h.update(model._meta.label.encode())
        for row in model.objects.order_by(*order).values_list(*fields):
            h.update(json.dumps(row, default=str, ensure_ascii=False).encode())
            h.update(b"\n")
    return h.hexdigest()


def _reset_sequences() -> None:
    """Rows were inserted with explicit primary keys; move sequences past them (PostgreSQL)."""
    models = [*SHOP_MODELS_DELETE_ORDER, Return.items.through]
    statements = connection.ops.sequence_reset_sql(no_style(), models)
    if statements:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)


# --------------------------------------------------------------------------- #
# The builder
# --------------------------------------------------------------------------- #


class _Builder:
    def __init__(self, rng: random.Random, n_customers: int, n_orders: int, block: int):
        self.rng = rng
        self.ids = _Ids(rng)
        self.n_customers = n_customers
        self.n_orders = n_orders
        self.block = block
        self.rows: dict[str, list] = {
            k: []
            for k in (
                "products",
                "customers",
                "addresses",
                "payment_methods",
                "orders",
                "order_items",
                "payments",
                "parcels",
                "tracking_events",
                "refunds",
                "returns",
                "return_items",
                "cancellations",
            )
        }
        self.pk = {k: 0 for k in self.rows}

    def next_pk(self, kind: str) -> int:
        self.pk[kind] += 1
        return self.pk[kind]

    # -- catalogue and people ------------------------------------------------

    def products(self):
        self.product_weights = []
        for name, usd, weight in PRODUCTS:
            self.rows["products"].append(
                Product(
                    id=self.next_pk("products"),
                    sku=self.ids.make("SKU-", _UPPER_ALNUM, 5),
                    name=name,
                    price_cents=int(round(usd * 100)),
                )
            )
            self.product_weights.append(weight)

    def customers(self):
        rng = self.rng
        countries = list(COUNTRIES)
        cweights = [c.weight for c in countries]
        emails: set[str] = set()
        self.customer_info = []  # (customer, country, [addresses], [(method, weight)], created_s, order_weight)
        for _ in range(self.n_customers):
            country = rng.choices(countries, weights=cweights)[0]
            first, last = rng.choice(country.first_names), rng.choice(country.last_names)
            created_s = rng.randrange(0, 200 * DAY)
            customer = Customer(
                id=self.next_pk("customers"),
                customer_id=self.ids.lower("cus_"),
                name=f"{first} {last}",
                email=_email(rng, first, last, emails),
                phone=_phone(rng, country.code),
                created_at=_at(created_s),
            )
            self.rows["customers"].append(customer)

            addresses = []
            for _ in range(rng.choices((1, 2, 3), weights=(70, 25, 5))[0]):
                city, pc_seed = rng.choice(country.cities)
                address = Address(
                    id=self.next_pk("addresses"),
                    address_id=self.ids.lower("adr_"),
                    customer_id=customer.id,
                    line1=_line1(rng, country.code, rng.choice(country.streets)),
                    city=city,
                    postcode=_postcode(rng, country.code, pc_seed),
                    country=country.code,
                )
                addresses.append(address)
                self.rows["addresses"].append(address)

            methods, labels = [], set()
            for i in range(rng.choices((1, 2, 3), weights=(50, 35, 15))[0]):
                kind, label = self.payment_label(country, first, last, customer.email, first_method=(i == 0))
                while label in labels:
                    kind, label = self.payment_label(country, first, last, customer.email, first_method=(i == 0))
                labels.add(label)
                method = PaymentMethod(
                    id=self.next_pk("payment_methods"),
                    payment_method_id=self.ids.lower("pm_"),
                    customer_id=customer.id,
                    kind=kind,
                    label=label[:60],
                )
                methods.append((method, 6 if i == 0 else 2))
                self.rows["payment_methods"].append(method)

            # Skewed ordering habits: some customers order often, most now and then.
            order_weight = min(rng.paretovariate(2.0), 6.0)
            self.customer_info.append((customer, country, addresses, methods, created_s, order_weight))

    def payment_label(self, country: Country, first: str, last: str, email: str, first_method: bool):
        rng = self.rng
        if country.code == "IN":
            kinds, weights = ("upi", "card", "paypal", "gift_card"), (50, 42, 4, 4)
            brands = ("Visa", "Mastercard", "RuPay")
        else:
            kinds, weights = ("card", "paypal", "gift_card"), (70, 25, 5)
            brands = ("Visa", "Visa", "Mastercard", "Mastercard", "Amex")
        if first_method:
            weights = tuple(0 if k == "gift_card" else w for k, w in zip(kinds, weights))
        kind = rng.choices(kinds, weights=weights)[0]
        if kind == "card":
            brand = rng.choice(brands)
            last4 = "4242" if rng.random() < 0.03 else _digits(rng, 4)
            return "card", f"{brand} ending {last4}"
        if kind == "upi":
            handle = rng.choice(
                [
                    f"{_slug(first)}.{_slug(last)[:1]}",
                    f"{_slug(first)}{_slug(last)}",
                    f"{_slug(first)}{_digits(rng, 2)}",
                ]
            )
            return "upi", f"UPI {handle}@{rng.choice(UPI_BANKS)}"
        if kind == "paypal":
            return "paypal", f"PayPal {email}"
        return "gift_card", f"Gift card ending {_digits(rng, 4)}"

    # -- orders ----------------------------------------------------------------

    def orders(self):
        rng = self.rng
        n = self.n_orders
        cum, acc = [], 0.0
        for info in self.customer_info:
            acc += info[5]
            cum.append(acc)
        draws = []
        for i in range(n):
            info = rng.choices(self.customer_info, cum_weights=cum)[0]
            created_s = info[4]
            span = AS_OF_S - created_s - HOUR
            if rng.random() < 0.25:
                age = rng.randrange(120, 10 * DAY)  # recent orders, so some are still in flight
            else:
                age = rng.randrange(120, span)
            age = min(age, span)
            draws.append((AS_OF_S - age, i, info))
        draws.sort(key=lambda d: (d[0], d[1]))
        numbers = sorted(rng.sample(range(ORDER_NUMBER_START, ORDER_NUMBER_START + self.block), n))
        for (placed_s, _, info), number in zip(draws, numbers):
            self.order(f"SU-{number:05d}", placed_s, info)

    def order(self, number: str, placed_s: int, info):
        rng = self.rng
        customer, country, addresses, methods, _, _ = info
        address = rng.choice(addresses)
        method = rng.choices([m for m, _ in methods], weights=[w for _, w in methods])[0]
        currency = country.currency
        age = AS_OF_S - placed_s

        order = Order(
            id=self.next_pk("orders"),
            number=number,
            customer_id=customer.id,
            address_id=address.id,
            payment_method_id=method.id,
            status="",
            currency=currency,
            total_cents=0,
            placed_at=_at(placed_s),
        )
        n_items = rng.choices((1, 2, 3, 4), weights=(45, 30, 17, 8))[0]
        products = []
        while len(products) < n_items:
            p = rng.choices(self.rows["products"], weights=self.product_weights)[0]
            if p not in products:
                products.append(p)
        items = []
        for product in products:
            cheap = product.price_cents < 4000
            qty = rng.choices((1, 2, 3), weights=(70, 20, 10) if cheap else (92, 8, 0))[0]
            item = OrderItem(
                id=self.next_pk("order_items"),
                item_id=self.ids.lower("itm_"),
                order_id=order.id,
                product_id=product.id,
                quantity=qty,
                unit_price_cents=_local_price(product.price_cents, currency),
            )
            items.append(item)
        order.total_cents = sum(i.quantity * i.unit_price_cents for i in items)
        self.rows["order_items"].extend(items)

        payment = Payment(
            id=self.next_pk("payments"),
            payment_id=self.ids.lower("pay_"),
            order_id=order.id,
            method_id=method.id,
            amount_cents=order.total_cents,
            currency=currency,
            status=Payment.Status.CAPTURED,
            created_at=_at(placed_s + rng.randint(2, 40)),
        )
        self.rows["payments"].append(payment)

        order.status = self.pick_status(age)
        self.rows["orders"].append(order)
        self.fulfil(order, items, payment, placed_s, country, address)

    def pick_status(self, age: int) -> str:
        rng = self.rng
        if age < DAY:
            table = (("placed", 88), ("cancelled", 12))
        elif age < 3 * DAY:
            table = (("placed", 20), ("shipped", 72), ("cancelled", 8))
        elif age < 8 * DAY:
            table = (("shipped", 35), ("delivered", 60), ("cancelled", 5))
        else:
            table = (("delivered", 84), ("returned", 8), ("cancelled", 6), ("shipped", 2))
        return rng.choices([s for s, _ in table], weights=[w for _, w in table])[0]

    # -- parcels, refunds, returns --------------------------------------------

    def fulfil(self, order, items, payment, placed_s, country, address):
        rng = self.rng
        status = order.status
        if status == "placed":
            return
        if status == "cancelled":
            latest = min(AS_OF_S, placed_s + 20 * HOUR)
            at = min(AS_OF_S, rng.randint(placed_s + 5 * 60, max(placed_s + 6 * 60, latest)))
            # As shop.services.order_cancel does it: a full refund and a Cancellation pointing at it.
            reason = rng.choice(CANCEL_REASONS)
            refund = self.refund(order, payment, order.total_cents, f"Order cancelled: {reason}", at)
            self.rows["cancellations"].append(
                Cancellation(
                    id=self.next_pk("cancellations"),
                    order_id=order.id,
                    reason=reason,
                    refund_id=refund.id,
                    idempotency_key=f"seed-cancel-{order.number}",
                    created_at=_at(at),
                )
            )
            return

        old = AS_OF_S - placed_s >= 8 * DAY
        lost = status == "shipped" and old
        n_parcels = 2 if len(items) >= 2 and rng.random() < 0.06 else 1
        if status == "shipped" and not lost:
            stage = rng.choices(("label_created", "in_transit", "out_for_delivery"), weights=(15, 65, 20))[0]
        else:
            stage = "lost" if lost else "delivered"
        last_event_at = placed_s
        for p in range(n_parcels):
            start = placed_s + (p * rng.randint(12 * HOUR, 36 * HOUR) if p else 0)
            start = min(start, AS_OF_S - 2 * HOUR)
            end = self.parcel(order, start, stage, country, address)
            last_event_at = max(last_event_at, end)

        if status == "returned":
            self.returned(order, items, payment, last_event_at)
        elif status == "delivered":
            roll = rng.random()
            if AS_OF_S - last_event_at < 30 * DAY and roll < 0.12:
                # Only recent deliveries have a return still waiting to be sent back.
                self.booked_return(order, items, last_event_at)
            elif 0.12 <= roll < 0.18:
                self.goodwill(order, items, payment, last_event_at)
        elif lost and rng.random() < 0.3:
            at = last_event_at + rng.randint(DAY, 14 * DAY)
            self.refund(order, payment, order.total_cents, LOST_REFUND_REASON, at)

    def parcel(self, order, start: int, stage: str, country: Country, address) -> int:
        """Create a parcel and its events; return the time of its last event."""
        rng = self.rng
        carrier = rng.choice(country.carriers)
        hub = rng.choice(country.hubs)
        home = f"{address.city}, {address.country}"
        chain = [
            ("Shipping label created", country.warehouse, (4 * HOUR, 40 * HOUR)),
            (f"Picked up by {carrier}", country.warehouse, (2 * HOUR, 10 * HOUR)),
            ("Departed facility", country.warehouse, (1 * HOUR, 6 * HOUR)),
            ("Arrived at sorting hub", hub, (8 * HOUR, 30 * HOUR)),
            ("Departed sorting hub", hub, (2 * HOUR, 8 * HOUR)),
            ("Out for delivery", home, (6 * HOUR, 20 * HOUR)),
        ]
        if stage == "label_created":
            chain = chain[:1]
        elif stage == "in_transit":
            chain = chain[: rng.randint(2, 5)]
        elif stage == "lost":
            chain = chain[:4] + [
                ("Delayed: package held at facility", hub, (2 * DAY, 3 * DAY)),
                ("Exception: package could not be located, investigation opened", hub, (1 * DAY, 2 * DAY)),
            ]
        elif stage == "delivered":
            if rng.random() < 0.08:
                chain += [
                    ("Delivery attempted: no one available, card left", home, (1 * HOUR, 9 * HOUR)),
                    ("Out for delivery", home, (14 * HOUR, 24 * HOUR)),
                ]
            final = rng.choice(
                (
                    "Delivered: left at front door",
                    "Delivered: handed to resident",
                    "Delivered: left with neighbour",
                    "Delivered to parcel locker",
                    "Delivered: signed for",
                )
            )
            chain.append((final, home, (1 * HOUR, 9 * HOUR)))
        times = _spread(rng, start, [gap for _, _, gap in chain], AS_OF_S - 30 * 60)
        parcel = Parcel(
            id=self.next_pk("parcels"),
            tracking_number=self.ids.make("1Z", _UPPER_ALNUM, 14),
            order_id=order.id,
            carrier=carrier,
            status=stage,
        )
        self.rows["parcels"].append(parcel)
        for (description, location, _), t in zip(chain, times):
            self.rows["tracking_events"].append(
                TrackingEvent(
                    id=self.next_pk("tracking_events"),
                    parcel_id=parcel.id,
                    at=_at(t),
                    location=location,
                    description=description,
                )
            )
        return times[-1]

    def refund(self, order, payment, amount: int, reason: str, at: int, status: str = "issued"):
        rid = self.ids.lower("rfd_")
        refund = Refund(
            id=self.next_pk("refunds"),
            refund_id=rid,
            order_id=order.id,
            payment_id=payment.id,
            amount_cents=amount,
            currency=order.currency,
            reason=reason,
            status=status,
            idempotency_key=f"seed-{rid}",
            created_at=_at(min(at, AS_OF_S)),
        )
        self.rows["refunds"].append(refund)
        return refund

    def return_row(self, order, items, reason: str, status: str, at: int):
        rid = self.ids.lower("ret_")
        ret = Return(
            id=self.next_pk("returns"),
            return_id=rid,
            order_id=order.id,
            reason=reason,
            status=status,
            idempotency_key=f"seed-{rid}",
            created_at=_at(min(at, AS_OF_S)),
        )
        self.rows["returns"].append(ret)
        for item in items:
            self.rows["return_items"].append((self.next_pk("return_items"), ret.id, item.id))
        return ret

    def pick_items(self, items):
        rng = self.rng
        if len(items) == 1 or rng.random() < 0.7:
            return list(items)
        k = rng.randint(1, len(items) - 1)
        chosen = set(rng.sample(range(len(items)), k))
        return [item for i, item in enumerate(items) if i in chosen]

    def _within(self, start: int, lo: int, hi: int) -> int:
        """start + a random gap in [lo, hi], never after AS_OF."""
        return min(AS_OF_S, start + self.rng.randint(lo, max(lo, hi)))

    def returned(self, order, items, payment, delivered_at: int):
        rng = self.rng
        booked_at = self._within(delivered_at, DAY, min(30 * DAY, AS_OF_S - delivered_at - 2 * DAY))
        received_at = self._within(booked_at, 2 * DAY, 7 * DAY)
        back = self.pick_items(items)
        # A recently received return may still be waiting for its refund.
        pending = AS_OF_S - received_at < 10 * DAY and rng.random() < 0.5
        self.return_row(order, back, rng.choice(RETURN_REASONS), "received" if pending else "closed", booked_at)
        if not pending:
            amount = sum(i.quantity * i.unit_price_cents for i in back)
            self.refund(order, payment, amount, "Refund for returned items", self._within(received_at, HOUR, 4 * DAY))

    def booked_return(self, order, items, delivered_at: int):
        rng = self.rng
        at = self._within(delivered_at, HOUR, min(14 * DAY, AS_OF_S - delivered_at))
        self.return_row(order, self.pick_items(items), rng.choice(RETURN_REASONS), "booked", at)

    def goodwill(self, order, items, payment, delivered_at: int):
        rng = self.rng
        how, reason = rng.choice(GOODWILL_REASONS)
        if how == "item":
            item = rng.choice(items)
            amount = item.unit_price_cents
        else:
            amount = max(1, order.total_cents * rng.randint(10, 25) // 100)
        at = self._within(delivered_at, HOUR, 30 * DAY)
        if rng.random() < 0.15:
            # A failed first attempt, retried later (the failure moved no money).
            self.refund(order, payment, amount, reason, at, status="failed")
            at = self._within(at, HOUR, 2 * DAY)
        self.refund(order, payment, amount, reason, at)

    # -- write -------------------------------------------------------------

    def build(self) -> dict:
        self.products()
        self.customers()
        self.orders()
        for kind, model in (
            ("products", Product),
            ("customers", Customer),
            ("addresses", Address),
            ("payment_methods", PaymentMethod),
            ("orders", Order),
            ("order_items", OrderItem),
            ("payments", Payment),
            ("parcels", Parcel),
            ("tracking_events", TrackingEvent),
            ("refunds", Refund),
            ("returns", Return),
            ("cancellations", Cancellation),
        ):
            model.objects.bulk_create(self.rows[kind], batch_size=BATCH_SIZE)
        through = Return.items.through
        through.objects.bulk_create(
            [
                through(id=pk, return_id=ret_id, orderitem_id=item_id)
                for pk, ret_id, item_id in self.rows["return_items"]
            ],
            batch_size=BATCH_SIZE,
        )
        return {kind: len(rows) for kind, rows in self.rows.items()}
