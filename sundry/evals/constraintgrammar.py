"""Wordings of customer constraints, and of sentences that are not constraints, generated from a
grammar: the test bed the constraint classifier (`context.constraints`) is designed and checked on,
so no rule is tuned to one labelled sentence.

Constraint shapes: prohibitions ("don't/never/do not/no … please"), exclusivity ("only/just …,
nothing else"), preferences ("I'd prefer/rather … instead of …"), conditions ("only if/as long as/
unless …", "if …, then …"), keeping things ("keep …", "the same …"), and restrictions of channel,
time, place and person. Not constraints: descriptions of what happened (negated past, "never
arrived"), of what someone knows or has ("I don't remember my email"), plain requests and questions
without a limit, courtesies and answers. Every slot is filled with every one of its values in turn
(a product over short lists), so the set is fixed and reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

CHANNELS = ("email", "phone", "text message", "post")
CONTACT_VERBS = ("email me", "call me", "text me", "phone my work number")
ACTIONS = (
    "cancel the order",
    "refund it to my gift card",
    "send a replacement",
    "ship it to my office",
    "change my plan",
    "charge my Mastercard",
    "transfer me",
    "upgrade the seat",
)
THINGS = ("insurance", "checked bags", "store credit", "a replacement", "gift wrapping", "the extended warranty")
OBJECTS = (
    "the leather strap",
    "my return flight",
    "the blue one",
    "the hiking items",
    "my current plan",
    "the same color",
)
PLACES = ("my home address", "the New York address", "the pickup point", "my sister's house")
OTHER_PLACES = ("my office", "the old address", "the Seattle address", "my neighbour")
TIMES = ("after 6pm", "before noon", "between 9 and 5", "on weekends", "after Friday", "by Monday")
PERSONS = ("my husband", "my assistant", "anyone but me", "my son")
LIMITS = ("costs less than $100", "arrives before Friday", "keeps the total under $950", "keeps my seat")
BARE_THINGS = ("insurance", "checked bags", "store credit", "replacements", "gift wrapping", "extended warranty")
EVENTS = ("the parcel is back", "I've checked with my wife", "I confirm by email", "the old one arrives")
OPTIONS = ("colour options", "other sizes", "two versions")
CHOICES = ("white", "the larger one", "the metal band")
BOUNDS = ("under $50", "$100 or less", "less than $20")
METHODS = ("PayPal", "my debit card", "the gift card")
SELF = ("do it right", "don't lose anything", "understand the steps", "won't mess anything up")
POLITE = ("", "Please, ", "Just so you know, ", "Also, ")

POSITIVE = (
    # prohibitions
    ("{polite}don't {contact}.", dict(polite=POLITE, contact=CONTACT_VERBS)),
    ("Never {action}, please.", dict(action=ACTIONS)),
    ("Please do not {action}.", dict(action=ACTIONS)),
    ("I don't want {thing}.", dict(thing=THINGS)),
    ("I really don't want to {action}.", dict(action=ACTIONS)),
    ("{polite}no {thing}, thanks.", dict(polite=POLITE, thing=BARE_THINGS)),
    ("I'd rather you didn't {action}.", dict(action=ACTIONS)),
    ("We don't need {thing}.", dict(thing=THINGS)),
    ("Whatever happens, don't {action}.", dict(action=ACTIONS)),
    # exclusivity
    ("{channel} only, please.", dict(channel=CHANNELS)),
    ("Only contact me by {channel}.", dict(channel=CHANNELS)),
    ("I only want {obj}, nothing else.", dict(obj=OBJECTS)),
    ("That's the only change I want to make.", {}),
    ("Just {action}, nothing more.", dict(action=ACTIONS)),
    ("I want to return everything except {obj}.", dict(obj=OBJECTS)),
    # preferences
    ("I'd prefer {obj}.", dict(obj=OBJECTS)),
    ("I'd rather use {channel} than anything else.", dict(channel=CHANNELS)),
    ("Please use {place} instead of {other}.", dict(place=PLACES, other=OTHER_PLACES)),
    ("I'd prefer not to {action}.", dict(action=ACTIONS)),
    (
        "If there are {options}, I'd {like} {choice}.",
        dict(options=OPTIONS, like=("like", "prefer", "want"), choice=CHOICES),
    ),
    ("I'd prefer {choice} over {other} if you have it.", dict(choice=CHOICES, other=("red", "the plastic one"))),
    # conditions
    ("Only do it if it {limit}.", dict(limit=LIMITS)),
    ("Go ahead as long as it {limit}.", dict(limit=LIMITS)),
    ("If it {limit}, I'll take it; otherwise cancel.", dict(limit=LIMITS)),
    ("Don't go ahead unless it {limit}.", dict(limit=LIMITS)),
    ("If you can't do that, can you just {action}?", dict(action=ACTIONS)),
    ("If that doesn't work, please {action}.", dict(action=ACTIONS)),
    (
        "For {items} that cost {bound}, please {action}.",
        dict(items=("items", "orders"), bound=BOUNDS, action=ACTIONS[:3]),
    ),
    # bounds and floors
    ("I need it to be {level}, not just {lower}.", dict(level=("fast", "quiet", "waterproof"), lower=("okay", "fine"))),
    ("I need {level} service, nothing less.", dict(level=("reliable", "fast", "full"))),
    ("{lower} isn't enough for me, I need it {level}.", dict(lower=("Good", "Okay"), level=("excellent", "fixed"))),
    # standing method or scope
    (
        "Use {method} for any {charge}.",
        dict(method=METHODS, charge=("difference", "charges", "payments", "extra cost")),
    ),
    ("I'll be paying with {method} for any {charge}.", dict(method=METHODS, charge=("difference", "charges"))),
    # exclusivity without "only"
    ("That's all I want {changed}.", dict(changed=("changed", "to change", "to cancel", "returned"))),
    ("That's everything I need to {verb}.", dict(verb=("change", "return", "cancel"))),
    ("Just {obj}.", dict(obj=OBJECTS)),
    # keeping things
    ("Please keep {obj}.", dict(obj=OBJECTS)),
    ("My {thing} should stay the same.", dict(thing=("delivery date", "plan", "seat", "address"))),
    ("Leave everything else as it is.", {}),
    # timing: not now, not before an event
    (
        "Please hold off on {thing} until {event}.",
        dict(thing=("the refund", "the replacement", "any changes"), event=EVENTS),
    ),
    ("Wait until {event} before you {action}.", dict(event=EVENTS, action=ACTIONS[:4])),
    ("Don't {action} yet.", dict(action=ACTIONS)),
    ("Only {action} once {event}.", dict(action=ACTIONS[:3], event=EVENTS)),
    ("I want to think about it before you {action}.", dict(action=ACTIONS[:4])),
    # requirement and manner
    ("It has to {req}.", dict(req=("arrive before Friday", "be the same model", "go to my home address"))),
    ("The {thing} should stay as it is.", dict(thing=("seat", "delivery slot", "plan"))),
    ("Please go one step at a time.", {}),
    ("Go slowly, please.", {}),
    ("Please explain each step before I {verb}.", dict(verb=("change anything", "restart the phone", "reset it"))),
    ("Without {thing}, please.", dict(thing=BARE_THINGS)),
    # standing method
    ("Always use {method} for this.", dict(method=METHODS)),
    ("Please always {contact}, never by {channel}.", dict(contact=("call me", "text me"), channel=("email", "post"))),
    ("I'd prefer {method} over {other}.", dict(method=METHODS, other=("store credit", "a voucher"))),
    # channel, time, place and person
    ("Please send it to {place}, not {other}.", dict(place=PLACES, other=OTHER_PLACES)),
    ("Don't ship anything to {other}.", dict(other=OTHER_PLACES)),
    ("Only deliver {time}.", dict(time=TIMES)),
    ("I can only take calls {time}.", dict(time=TIMES)),
    ("Please don't discuss this with {person}.", dict(person=PERSONS)),
    ("Only talk to me about this, not {person}.", dict(person=PERSONS)),
    # lasting rules as the settled definition words them: a standing duration, the agent addressed with
    # a modal, the customer's acceptance of a method for any later charge, a modal of preference in a
    # coordinated clause, not now / later / first, manner for every later step
    ("From now on, {contact} only by {channel}.", dict(contact=("contact me", "reach me"), channel=CHANNELS)),
    ("Going forward, please don't {action}.", dict(action=ACTIONS[:4])),
    ("Next time, please {contact} first.", dict(contact=("call me", "text me", "email me"))),
    ("You can use {method} for any {charge}.", dict(method=METHODS, charge=("difference", "extra charges"))),
    ("You shouldn't {action} without asking me.", dict(action=ACTIONS[:4])),
    ("I'm fine with {method} for any {charge}.", dict(method=METHODS, charge=("difference", "extra cost"))),
    ("I'm okay with {thing} as long as it {limit}.", dict(thing=("a replacement", "store credit"), limit=LIMITS[:2])),
    ("I'm away this week and would rather you {action} after Friday.", dict(action=ACTIONS[:4])),
    ("Let's leave {obj} for now.", dict(obj=OBJECTS[:4])),
    ("Let me talk to {person} first.", dict(person=("my wife", "my manager", "my bank"))),
    ("Please {action} later, not today.", dict(action=ACTIONS[:4])),
    ("Please explain it step by step.", {}),
    ("The {thing} shouldn't go to {other}.", dict(thing=("refund", "parcel", "invoice"), other=OTHER_PLACES)),
    # a bound as "up to" a sum; all or nothing; a preference in the passive; "any <thing> should …"; a
    # course to take under a condition, worded as a bare imperative (see if, try, get, pick, look for)
    (
        "I'm willing to pay for {thing}, up to {amount}.",
        dict(thing=("the upgrade", "express shipping"), amount=("$650", "$80")),
    ),
    ("You can spend up to {amount} on the {item}.", dict(amount=("$200", "$45"), item=("replacement", "new seat"))),
    (
        "I want {change} as a package.",
        dict(change=("both flight changes", "the seat and the bag changes", "all these changes")),
    ),
    ("It's all or nothing: {action} only if both can be done.", dict(action=ACTIONS[:3])),
    ("{method} is preferred for the refund.", dict(method=METHODS)),
    ("{channel} is preferred for any updates.", dict(channel=("Email", "A text message", "Post"))),
    (
        "Any {thing} should go to {method}.",
        dict(thing=("price difference", "extra charge", "refund amount"), method=METHODS),
    ),
    ("Any {thing} must go on {method}.", dict(thing=("extra fees", "additional charges"), method=METHODS)),
    (
        "If it can't be {done}, see if it can be {alt}.",
        dict(done=("returned", "exchanged"), alt=("cancelled", "refunded")),
    ),
    (
        "If the {fee} is more than {amount}, then try to {action}.",
        dict(
            fee=("fee", "difference"),
            amount=("$100", "$650"),
            action=("upgrade my companion instead", "keep the old booking"),
        ),
    ),
    (
        "If you can't exchange it, get the {item} in {colour} instead.",
        dict(item=("boots", "lamp"), colour=("black", "size 9")),
    ),
    (
        "If there's no {seat}, pick {other}.",
        dict(seat=("window seat", "aisle seat"), other=("a middle seat", "the next flight")),
    ),
    (
        "If the {item} is out of stock, look for {other} in my other order.",
        dict(item=("hose", "charger"), other=("the same item", "one of the same size")),
    ),
    (
        "In case the {item} is out of stock, {action}.",
        dict(item=("lamp", "blue shirt"), action=("refund me", "cancel the order")),
    ),
)

NEGATIVE = (
    # look-alikes of the rules above: a goal ("the maximum … possible"), asking to know or check first,
    # the customer's own plan with "first", a courtesy "if available", features of a new item worded
    # as a bare "prefer", both options named ("… or not"), "just in case" as a reason
    ("I want to get the maximum {thing} possible.", dict(thing=("compensation", "refund", "discount"))),
    ("I want to know the {thing} first.", dict(thing=("tracking number", "new total", "exchange price"))),
    ("I'd like to first check {thing}.", dict(thing=("my order history", "the baggage rules", "my profile"))),
    ("I'll first {verb} about my two orders.", dict(verb=("ask", "inquire", "check"))),
    (
        "Please change it to {target} if available.",
        dict(target=("a nonstop flight", "the window seat", "the blue one")),
    ),
    (
        "I want to exchange the {item} for a {adj} one, prefer {feature}.",
        dict(item=("lamp", "bottle"), adj=("brighter", "bigger"), feature=("battery", "steel")),
    ),
    (
        "I want to modify the shirt to {colour}, same size, and prefer {fabric}.",
        dict(colour=("purple", "blue"), fabric=("cotton", "polyester")),
    ),
    ("I want size {n} whether it's waterproof or not.", dict(n=("8", "9"))),
    (
        "I want the {thing} {just}in case something happens.",
        dict(thing=("insurance", "protection plan"), just=("just ", "")),
    ),
    # what happened
    ("The {thing} never arrived.", dict(thing=("parcel", "refund", "replacement", "email", "confirmation"))),
    ("I didn't get the {thing} you mentioned.", dict(thing=("email", "text message", "tracking link", "code"))),
    ("It doesn't work any more.", {}),
    ("My order hasn't shipped yet.", {}),
    ("The {thing} was not in the box.", dict(thing=("charger", "manual", "strap", "cable"))),
    ("I just received the {thing} today.", dict(thing=("parcel", "laptop", "watch", "lamp"))),
    ("They never called me back.", {}),
    ("I just want to be able to {verb} again.", dict(verb=("make calls", "send pictures", "log in", "use my card"))),
    ("I restarted it, but I'm still seeing an error and no {thing}.", dict(thing=("signal", "data", "service"))),
    ("I did it just like you said.", {}),
    ("Only the {thing} is scratched.", dict(thing=("screen", "lid", "left side", "handle"))),
    ("The same problem happened with the {thing}.", dict(thing=("lamp", "kettle", "earbuds", "charger"))),
    ("The courier keeps leaving parcels at {other}.", dict(other=OTHER_PLACES)),
    # knowing and having
    ("I don't remember which {thing} I used.", dict(thing=("email", "card", "address", "phone number"))),
    ("I don't have the {thing} with me.", dict(thing=("receipt", "order number", "card", "box"))),
    ("I can't find my {thing}.", dict(thing=("receipt", "order number", "tracking number", "password"))),
    ("I must have typed the wrong {thing}.", dict(thing=("number", "address", "email", "date"))),
    # one-off requests: the replacement and the details that pick it are the request itself
    ("Instead, I'd like {obj}.", dict(obj=OBJECTS)),
    ("I want the exact same {thing} as last time.", dict(thing=("flight", "model", "size", "colour"))),
    ("I'd like to {action} instead.", dict(action=ACTIONS)),
    ("Please change it to {choice} instead of {other}.", dict(choice=CHOICES, other=("red", "the plastic one"))),
    ("Can you just {verb}?", dict(verb=("look it up", "use that one", "check again", "go ahead"))),
    # one's own doing, and questions about what is possible
    ("I just want to make sure I {self}.", dict(self=SELF)),
    ("I want to see if I can {action}.", dict(action=ACTIONS)),
    ("Is there any way to {action} only?", dict(action=ACTIONS[:4])),
    ("Should I {verb} now, or not?", dict(verb=("restart it", "wait", "send it back"))),
    ("I'll keep an eye out for the {thing}.", dict(thing=("email", "parcel", "refund"))),
    ("That's all I needed, thanks.", {}),
    ("Hold on, let me check the {thing}.", dict(thing=("box", "receipt", "app"))),
    ("I'll wait for the {thing}.", dict(thing=("email", "courier", "refund"))),
    ("I always forget my {thing}.", dict(thing=("password", "order number", "PIN"))),
    ("The parcel arrived before {time}.", dict(time=("Friday", "noon", "the weekend"))),
    ("I paid with {method}.", dict(method=METHODS)),
    # look-alikes of the lasting forms: a later date as a target, a closing, a relative "you can"
    ("I'd like to change it to a later {thing}.", dict(thing=("date", "flight", "time"))),
    ("That's all for now, thanks.", {}),
    ("I guess there's nothing else you can do.", {}),
    ("I first noticed the {thing} last week.", dict(thing=("crack", "noise", "charge"))),
    # plain requests and questions, no limit
    (
        "Please {action}.",
        dict(
            action=(
                "cancel order 4411",
                "check my refund",
                "send me the tracking link",
                "look up my order",
                "update my address",
            )
        ),
    ),
    ("Can you tell me where my {thing} is?", dict(thing=("parcel", "refund", "replacement", "order"))),
    ("I'd like a refund for the {thing}.", dict(thing=("lamp", "air fryer", "watch", "jacket"))),
    ("What is the status of my {thing}?", dict(thing=("order", "return", "refund", "exchange"))),
    ("My name is {name} and my zip code is 78260.", dict(name=("Sofia Li", "Ravi Patel", "Ana Gomez"))),
    # courtesies and answers
    (
        "{courtesy}",
        dict(
            courtesy=(
                "Thanks so much!",
                "No problem.",
                "Yes, that's right.",
                "Okay, sounds good.",
                "Great, thank you for your help.",
                "Hello, I need some help.",
            )
        ),
    ),
)

# Free wordings of the definition's eight forms, in everyday registers (no slots): the lasting rules
# and their look-alikes, written from the definition to check the grammar's forms reach past its templates.
FREE_POSITIVE = (
    "Can you make sure the courier doesn't leave it outside?",
    "I'd like the refund split between the two cards, nothing on the gift card.",
    "Please only message me here.",
    "As long as the price stays the same, go ahead.",
    "I need it delivered by Thursday at the latest.",
    "Please, no more transfers.",
    "I'd like to keep the booking but drop the hotel.",
    "Cancel only the second leg.",
    "It's important that the flight stays nonstop.",
    "Don't charge anything until I say so.",
    "Send everything to the new address from now on.",
    "I don't want my son's name on the reservation.",
    "You can go ahead, but keep it under $80.",
    "Unless it's free, I'll pass on the upgrade.",
    "Prefer text over calls, please.",
    "If they don't have my size, just refund me, don't send a different one.",
    "The gift card stays out of this.",
    "Please let me approve any charge over $20.",
    "I want to stay on my current plan.",
    "We'd rather not change planes.",
    "I'd rather you didn't call me at work.",
    "Please don't put anything on my credit card.",
    "My husband shouldn't be contacted about this.",
    "Refunds should go to my bank account, not store credit.",
    "We won't accept a refurbished unit.",
    "Send it to my office address, not home.",
    "Nothing above $200, please.",
    "I can only pay by PayPal.",
    "The seat must stay a window seat.",
    "Whatever you do, leave the hotel booking alone.",
    "I'm not willing to pay a change fee.",
    "Could you avoid calling me before 9?",
    "Please wait for my confirmation before making any changes.",
    "Don't process anything until I've spoken to my bank.",
    "I want everything in writing.",
    "Emails only please, I can't take calls at work.",
    "Please keep the original shipping address.",
    "Any refund should go back to the Visa.",
    "I'm happy to pay the difference as long as it's under $30.",
    "If it's more than $50, don't bother.",
    "We need both seats together.",
    "Let's not touch the second reservation.",
    "Please check with me before you charge anything.",
    "I don't mind waiting, but don't cancel the order.",
    "Hold the replacement until the old one is picked up.",
    "I'd like to keep my current plan and just add data.",
    "Use the Amex for anything extra.",
    "No upgrades please.",
    "Please don't transfer me again.",
    "Let me think about it before you do anything.",
    "I'm not ready to cancel yet.",
    "Can you make sure nobody calls my home number?",
    "I'd prefer a refund over store credit.",
    "Just the lamp, not the bulbs.",
    "Leave the other items in the order alone.",
    "Don't rebook me on an overnight flight.",
    "I'll only accept a full refund.",
    "My budget is $300 at most.",
    "It needs to arrive before my trip on the 14th.",
    "Keep me on the same flight number.",
    "Ok so the main thing is, no phone calls, I'm deaf in one ear and email works better.",
    "Honestly I'd sooner wait a week than pay for express.",
    "Please leave my wife's booking out of this.",
    "Whatever the fee is, put it on the Mastercard, not the debit card.",
    "Go ahead with the exchange, but the colour has to be black.",
    "Only use the points if the cash price is over $500.",
    "If the flight gets delayed again, I want a full refund rather than a voucher.",
    "Please do not split the shipment.",
    "I'm only available on weekends.",
    "Skip the insurance.",
    "I'd like all communication to go through this chat.",
    "No substitutes, please.",
    "Under no circumstances should you cancel my return flight.",
    "I'm flexible on the date but not on the airport.",
    "Don't bother with the warranty.",
    "Any charges need my approval first.",
    "Please hold the order until Monday.",
    "I can't be reached by phone during work hours, so email is best.",
    "The replacement must be the same model.",
    "Please, not the 6am flight.",
    "The return label should be sent to my work email only.",
    "I want to keep my seat assignments.",
    "Please stop sending me promotional texts.",
    "I'd hate for the order to get cancelled, so please leave it as is.",
    "Refund the difference to the original card, never to store credit.",
)
FREE_NEGATIVE = (
    "Just return both items, please.",
    "I've been waiting for two weeks already.",
    "That's not what I ordered.",
    "Could you tell me how much the upgrade costs?",
    "My son usually handles the bookings.",
    "The hotel was fine but the flight was late.",
    "Why was I charged twice?",
    "I'm not happy with the service.",
    "I need help with my order.",
    "Only one of the two parcels came.",
    "Let me find the order number.",
    "I called you yesterday and nobody answered.",
    "The package was left at the wrong door.",
    "I don't know my order number.",
    "Can you tell me if the refund went through?",
    "I only noticed the scratch this morning.",
    "Please cancel order 8812.",
    "I'd like to exchange it for the blue one.",
    "Thanks, that's all for now.",
    "I'm not sure what happened.",
    "Is there a way to avoid the fee?",
    "It still doesn't work after the restart.",
    "My phone isn't showing any bars.",
    "I was charged twice last month.",
    "I'll check my email later.",
    "Could you look up my reservation?",
    "I'm flexible, whatever works.",
    "The seat was already taken when I checked.",
    "My wife booked it, not me.",
    "Nobody told me about the fee.",
    "I never got a confirmation email.",
    "I want to know why it was cancelled.",
    "Sorry, I meant the 15th, not the 16th.",
    "Do you have it in black?",
    "It has to be the charger, it's the only thing that's broken.",
    "I tried before calling, nothing worked.",
)


@dataclass(frozen=True)
class Wording:
    text: str
    constraint: bool
    shape: str


def _expand(template: str, slots: dict) -> list[str]:
    names = list(slots)
    out = []
    for values in product(*(slots[n] for n in names)) if names else [()]:
        text = template.format(**dict(zip(names, values)))
        out.append(text[0].upper() + text[1:])
    return out


def wordings() -> list[Wording]:
    """Every wording the grammar generates, constraints and non-constraints."""
    out = []
    for positive, table in ((True, POSITIVE), (False, NEGATIVE)):
        for template, slots in table:
            out += [Wording(text, positive, template) for text in _expand(template, slots)]
    out += [Wording(text, True, "free") for text in FREE_POSITIVE]
    out += [Wording(text, False, "free") for text in FREE_NEGATIVE]
    return out


def score(classify, items: list[Wording] | None = None) -> dict:
    """Recall and precision of `classify(sentence) -> bool` on the grammar's wordings."""
    items = wordings() if items is None else items
    tp = sum(1 for w in items if w.constraint and classify(w.text))
    fp = sum(1 for w in items if not w.constraint and classify(w.text))
    pos = sum(1 for w in items if w.constraint)
    return {
        "wordings": len(items),
        "constraints": pos,
        "flagged": tp + fp,
        "recall": tp / pos if pos else None,
        "precision": tp / (tp + fp) if tp + fp else None,
        "missed": [w.text for w in items if w.constraint and not classify(w.text)],
        "false": [w.text for w in items if not w.constraint and classify(w.text)],
    }
