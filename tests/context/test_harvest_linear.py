"""A harvest's work grows with the number of IDs in the result, not its square: a listing of 20,000
IDs once kept a run busy for minutes while the ticket's row was locked. Counted, not timed: the
probes that find each new ID's role and the entries whose tokens are counted."""

from __future__ import annotations

from sundry.context import harvest
from sundry.context.lanes import next_role


class CountingSet(set):
    probes = 0

    def __contains__(self, item):
        CountingSet.probes += 1
        return super().__contains__(item)


def _work(n: int, monkeypatch, *, scan_from_two: bool = False) -> tuple[int, int]:
    """(role probes, token counts) for a harvest of `n` new IDs of one kind into an empty ledger."""
    CountingSet.probes, counted = 0, []
    original = harvest._Roles.__init__

    def counting_init(self, rows):
        original(self, rows)
        self.taken = CountingSet(self.taken)

    monkeypatch.setattr(harvest._Roles, "__init__", counting_init)
    if scan_from_two:  # the control: every new role counted up from 2, as before
        monkeypatch.setattr(
            harvest._Roles, "new", lambda self, base: self.taken.add(r := next_role(base, self.taken)) or r
        )
    tokens = harvest.entry_tokens
    monkeypatch.setattr(harvest, "entry_tokens", lambda row: counted.append(1) or tokens(row))
    found = [(f"REC-{i:06d}", "record") for i in range(n)]
    plan = harvest.plan_harvest({}, found, turn=1, cap=2_400)
    assert len(set(plan.roles)) == n and plan.roles[:3] == ["record", "record_2", "record_3"]
    return CountingSet.probes, len(counted)


def test_a_harvest_is_linear_in_the_ids_it_finds(monkeypatch):
    for n in (1_000, 10_000):
        probes, counted = _work(n, monkeypatch)
        assert probes <= 3 * n, (n, probes)
        assert counted == n, "each entry's tokens are counted once"


def test_negative_control_roles_counted_up_from_two_are_quadratic(monkeypatch):
    probes, _ = _work(2_000, monkeypatch, scan_from_two=True)
    assert probes > 100 * 2_000, probes
