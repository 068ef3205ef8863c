"""The store fails, stalls and comes back (PostgreSQL behind a proxy the test controls): the ranker always
answers, with tier none while the store is away, and recovers by itself."""

from __future__ import annotations

import numpy as np
from conftest import T
from tcp_proxy import TcpProxy

from solaris.serving import Ranker

CANDIDATES = np.array([10, 11, 12])


def failures(ranker: Ranker, kind: str) -> float:
    return ranker.metrics.store_failures.labels(kind)._value.get()


def test_store_down_is_served_as_tier_none_then_recovers(proxied: tuple[Ranker, TcpProxy]) -> None:
    ranker, proxy = proxied
    healthy = ranker.rank(1, CANDIDATES, T)
    assert healthy.tier_names() == ["pair", "agg", "agg"] and healthy.store_failure is None

    proxy.down()
    cut = ranker.rank(1, CANDIDATES, T)
    assert cut.tier_names() == ["none"] * 3 and cut.store_failure == "error"
    assert np.isfinite(cut.scores).all() and failures(ranker, "error") == 1

    proxy.up()
    back = ranker.rank(1, CANDIDATES, T)
    assert back.tier_names() == healthy.tier_names() and back.store_failure is None
    np.testing.assert_array_equal(back.scores, healthy.scores)


def test_a_stalled_store_times_out_to_tier_none_then_recovers(proxied: tuple[Ranker, TcpProxy]) -> None:
    ranker, proxy = proxied
    ranker.rank(1, CANDIDATES, T)  # a warm reader connection, as in steady serving
    proxy.delay_s = 2.0
    stalled = ranker.rank(1, CANDIDATES, T)
    assert stalled.tier_names() == ["none"] * 3 and stalled.store_failure == "timeout"
    assert failures(ranker, "timeout") == 1

    proxy.delay_s = 0.0
    recovered = ranker.rank(1, CANDIDATES, T)  # the stalled read still holds its connection; a new one serves
    assert recovered.store_failure is None and recovered.tier_names()[0] == "pair"
