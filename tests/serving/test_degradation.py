"""The store fails, stalls and comes back (PostgreSQL behind a proxy the test controls): the ranker always
answers, with tier none while the store is away, and recovers by itself. Both read paths: waited for on
the calling thread (``rank``) and awaited on an event loop (``rank_async``, the HTTP service's)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest
from conftest import T
from tcp_proxy import TcpProxy

from solaris.serving import Ranker
from solaris.serving.ranker import Served

CANDIDATES = np.array([10, 11, 12])


def failures(ranker: Ranker, kind: str) -> float:
    return ranker.metrics.store_failures.labels(kind)._value.get()


Rank = Callable[[int, np.ndarray], Served]


@pytest.fixture(params=["rank", "rank_async"])
def rank(request: pytest.FixtureRequest, proxied: tuple[Ranker, TcpProxy]) -> Rank:
    ranker = proxied[0]
    if request.param == "rank":
        return lambda user, items: ranker.rank(user, items, T)
    return lambda user, items: asyncio.run(ranker.rank_async(user, items, T))


def test_store_down_is_served_as_tier_none_then_recovers(proxied: tuple[Ranker, TcpProxy], rank: Rank) -> None:
    ranker, proxy = proxied
    healthy = rank(1, CANDIDATES)
    assert healthy.tier_names() == ["pair", "agg", "agg"] and healthy.store_failure is None

    proxy.down()
    cut = rank(1, CANDIDATES)
    assert cut.tier_names() == ["none"] * 3 and cut.store_failure == "error"
    assert np.isfinite(cut.scores).all() and failures(ranker, "error") == 1

    proxy.up()
    back = rank(1, CANDIDATES)
    assert back.tier_names() == healthy.tier_names() and back.store_failure is None
    np.testing.assert_array_equal(back.scores, healthy.scores)


def test_a_stalled_store_times_out_to_tier_none_then_recovers(proxied: tuple[Ranker, TcpProxy], rank: Rank) -> None:
    ranker, proxy = proxied
    rank(1, CANDIDATES)  # a warm reader connection, as in steady serving
    proxy.delay_s = 2.0
    stalled = rank(1, CANDIDATES)
    assert stalled.tier_names() == ["none"] * 3 and stalled.store_failure == "timeout"
    assert failures(ranker, "timeout") == 1

    proxy.delay_s = 0.0
    recovered = rank(1, CANDIDATES)  # the stalled read still holds its connection; a new one serves
    assert recovered.store_failure is None and recovered.tier_names()[0] == "pair"


def test_reads_piling_up_on_a_stalled_store_are_not_queued_behind(proxied: tuple[Ranker, TcpProxy]) -> None:
    """Past two reads in flight per pool thread, a request is answered at once as overloaded, not queued."""
    store, proxy = proxied[0].store, proxied[1]
    ranker = Ranker(store, proxied[0].model, store_timeout_s=0.2, read_workers=1)
    ranker.rank(1, CANDIDATES, T)
    proxy.delay_s = 5.0
    stalled = [ranker.rank(1, CANDIDATES, T).store_failure for _ in range(2)]
    overloaded = ranker.rank(1, CANDIDATES, T)
    assert stalled == ["timeout", "timeout"] and overloaded.store_failure == "overloaded"
    assert overloaded.tier_names() == ["none"] * 3 and failures(ranker, "overloaded") == 1
    proxy.delay_s = 0.0
    ranker.close()
