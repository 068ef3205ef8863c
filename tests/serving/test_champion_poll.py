"""A VM with nothing to serve is looked at again soon, then less often, never in a tight loop: a new stack's
ranker refuses its champion until the first precompute has written the store, and should serve seconds after."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from solaris.serving import Ranker
from solaris.serving.app import NOT_READY_POLL_SHARE, Service, next_poll_wait
from solaris.serving.champion import ChampionWatcher
from solaris.store import SqliteStoreConfig, open_store


def test_the_wait_is_the_poll_while_serving_and_backs_off_from_a_tenth_while_not() -> None:
    waits, wait, ready = [], 30.0, True
    for serving in (True, False, False, False, False, False, False, True, False):
        wait, ready = next_poll_wait(30.0, wait, ready, serving)
        waits.append(wait)
    assert NOT_READY_POLL_SHARE == 0.1
    assert waits == [30.0, 3.0, 6.0, 12.0, 24.0, 30.0, 30.0, 30.0, 3.0]


class RefusedUntil(ChampionWatcher):
    """A champion whose load is refused ``refusals`` times (the store does not hold its version yet)."""

    def __init__(self, refusals: int) -> None:
        super().__init__(None, "ctr", load=self._try_load)  # type: ignore[arg-type]
        self.refusals, self.loads = refusals, 0

    def champion_version(self) -> str | None:
        return "1"

    def _try_load(self, client: Any, vm_name: str, version: str) -> Any:
        self.loads += 1
        if self.loads <= self.refusals:
            raise ValueError("the feature store does not hold embedding version fm1-ae1-d8")
        return type(
            "Loaded", (), {"pinned": type("Pinned", (), {"vm": version, "embedding_version": "fm1-ae1-d8"})()}
        )()


def test_a_refused_champion_is_served_soon_after_the_store_can_hold_it_not_a_poll_later(tmp_path: Path) -> None:
    watcher = RefusedUntil(refusals=1)  # refused at start, as on a store the first precompute has not written
    with open_store(SqliteStoreConfig(tmp_path / "store.db"), init=True) as store:
        service = Service({"ctr": Ranker(store, watcher)}, {"ctr": watcher}, poll_seconds=30.0)
        service.start()
        try:
            deadline = time.monotonic() + 25  # inside the poll: only the short retry can serve by then
            while watcher.current is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            service.stop()
    assert watcher.current is not None and watcher.loads == 2  # served at the retry, 3 s in
    assert watcher.last_error is None
