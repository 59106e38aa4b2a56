"""The records read made beside the model call (`recordstates.Ahead`): the step's own connection and
transaction are read, from inside a running event loop too, and nothing is left lent afterwards."""

import asyncio

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from sundry.agent import recordstates
from sundry.shop.models import Order
from sundry.shop.seed import generate_shop

pytestmark = pytest.mark.django_db


def _numbers():
    return tuple(Order.objects.order_by("number").values_list("number", flat=True))


def test_reads_this_transactions_rows_on_another_thread():
    generate_shop(seed=3, customers=2, orders=4)  # uncommitted: the test's transaction
    seen = []

    def read():
        import threading

        seen.append(threading.current_thread().name)
        return _numbers()

    ahead = recordstates.Ahead(read)
    assert ahead() == _numbers() and len(ahead()) == 4
    assert seen == ["sundry-records"]  # read once, beside this thread
    assert not connections[DEFAULT_DB_ALIAS].allow_thread_sharing  # lent no longer


def test_called_inside_a_running_event_loop():
    generate_shop(seed=3, customers=2, orders=4)
    ahead = recordstates.Ahead(_numbers)

    async def judged_in_the_loop():
        return ahead()  # as a streamed sentence is judged: inside the call's event loop

    assert asyncio.run(judged_in_the_loop()) == _numbers()
    # Control: the same read made directly inside the loop is refused by Django.
    with pytest.raises(Exception, match="async context"):
        asyncio.run(_direct())


async def _direct():
    return _numbers()


def test_a_failed_read_is_raised_where_the_states_are_wanted_and_lends_nothing():
    def broken():
        raise LookupError("no such record")

    ahead = recordstates.Ahead(broken)
    ahead.join()
    assert not connections[DEFAULT_DB_ALIAS].allow_thread_sharing
    with pytest.raises(LookupError, match="no such record"):
        ahead()
    assert Order.objects.count() >= 0  # this thread's connection still reads
