"""The store fails, stalls and comes back (PostgreSQL behind a proxy the test controls): the ranker always
answers, with tier none while the store is away, and recovers by itself. Both read paths: waited for on
the calling thread (``rank``) and awaited on an event loop (``rank_async``, the HTTP service's); and the
real `solaris serve` over HTTP through a store "restart"."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from conftest import T
from serve_process import start_serve, stop_serve
from tcp_proxy import TcpProxy

from solaris.config import Settings
from solaris.serving import Ranker
from solaris.serving.ranker import Served
from solaris.training.jobs import TrainReport, World

CANDIDATES = np.array([10, 11, 12])


def failures(ranker: Ranker, kind: str) -> float:
    return ranker.metrics.store_failures.labels("ctr", kind)._value.get()


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


RECOVERY_DEADLINE_S = 120  # generous: recovery is asserted to happen, not how fast


def test_served_http_rides_out_a_store_restart(
    proxied_store_url: tuple[str, TcpProxy], trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> None:
    """`solaris serve` on PostgreSQL, the store "restarted" under it (every connection dropped, new ones
    refused, then accepted again): while it is away every /rank is a 200 with tier none, never a 5xx; once it
    is back the answers come from the store again without anyone touching the service."""
    url, proxy = proxied_store_url
    settings = trained[0].with_overrides(data_dir=tmp_path / "var", store_url=url)
    server, base = start_serve(settings, "--no-served-log", "--store-timeout-ms", "5000")
    request = {"user_id": 1, "items": [10, 11, 12], "at": T.isoformat()}
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            healthy = client.post("/rank", json=request)
            assert healthy.status_code == 200 and healthy.json()["store"] == "ok"
            assert healthy.json()["tiers"] == ["pair", "agg", "agg"]

            proxy.down()
            for _ in range(5):
                away = client.post("/rank", json=request)
                assert away.status_code == 200, away.text
                assert away.json()["tiers"] == ["none"] * 3 and away.json()["store"] != "ok"

            proxy.up()
            deadline = time.monotonic() + RECOVERY_DEADLINE_S
            while (back := client.post("/rank", json=request)).json()["store"] != "ok":
                assert back.status_code == 200, back.text
                assert time.monotonic() < deadline, (
                    f"no answer from the store {RECOVERY_DEADLINE_S} s after it came back"
                )
                time.sleep(0.2)
            assert back.status_code == 200 and back.json()["tiers"] == healthy.json()["tiers"]
            assert back.json()["scores"] == healthy.json()["scores"]
            metrics = client.get("/metrics").text.splitlines()
            [counted] = [ln for ln in metrics if 'solaris_store_failures_total{kind="error",vm="ctr"}' in ln]
            assert float(counted.split()[-1]) >= 5
    finally:
        stop_serve(server)
