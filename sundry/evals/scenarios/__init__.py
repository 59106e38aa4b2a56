"""The outcome scenario suite: what the agent does to the shop, with and without compaction.

Scripted customer conversations on the seeded demo shop (`files/*.json`,
validated by `schema`) run through the real agent loop under several ways of
keeping the request small (`modes`). Each run is judged from the shop's
database — refunds, cancellations, returns, replacement offers, emails, calls
(`effects`) — and from what the customer reads (`runner`). `manage.py
scenarios` runs the suite and writes JSON and HTML reports (`reporting`).
"""
