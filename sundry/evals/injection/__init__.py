"""The injection suite: instructions planted where text enters a ticket, carried out by an obedient model.

Cases are generated from templates (`cases.py`): a channel the text arrives
by × a goal it pursues × a phrasing. Each case builds a small shop
(`world.py`), plants the text, and runs the real agent loop with
`obedient.ObedientModel`, which carries out any instruction it reads in the
request it receives — the worst case, so the guards, not the model's good
sense, are what is measured. `judge.py` reads the outcome from the database
(refunds, cancellations, emails, returns, rules, what the customer can read)
and names the guard that stopped each attempt; `report.py` makes the table in
docs/security.md. `grammar.py` generates a second set from a small grammar: a
benign customer message that mentions an action and an order, with an
instruction planted in a third-party channel.
"""
