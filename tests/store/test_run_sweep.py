"""Run records that end: a run whose process died stays ``running`` until the next run (or ``stack up``)
marks it failed with the reason; the run that sweeps, and runs already finished, keep their records."""

from __future__ import annotations

from store_helpers import HOUR, T0

from solaris.store import FeatureStore

REASON = "its run ended before it finished; found by run c"


def start(store: FeatureStore, version: str, run_id: str, hours: int) -> None:
    store.start_run(run_id, T0 + hours * HOUR, T0 + (hours + 1) * HOUR, "3", "2", "5", version, T0 + hours * HOUR)


def test_the_runs_left_running_are_failed_with_the_reason_and_no_other(store: FeatureStore, version: str) -> None:
    for hours, run_id in enumerate(("a", "b", "c", "d")):
        start(store, version, run_id, hours)
    store.finish_run("b", "succeeded", {"pairs": 3}, {}, T0 + 2 * HOUR)

    swept = store.sweep_unfinished_runs(REASON, T0 + 3 * HOUR, keep="c")

    assert swept == ["a", "d"]
    a, b, c, d = (store.get_run(r) for r in "abcd")
    assert (a.status, a.reason, a.finished_at) == ("failed", REASON, T0 + 3 * HOUR)  # type: ignore[union-attr]
    assert (b.status, b.reason, b.counts) == ("succeeded", None, {"pairs": 3})  # type: ignore[union-attr]
    assert (c.status, c.finished_at) == ("running", None)  # type: ignore[union-attr]
    assert d.status == "failed" and d.finished_at == d.started_at  # never closed before it began
    assert store.sweep_unfinished_runs(REASON, T0 + 4 * HOUR, keep="c") == []


def test_a_swept_run_that_resumes_is_running_again_and_its_reason_cleared(store: FeatureStore, version: str) -> None:
    start(store, version, "a", 0)
    store.sweep_unfinished_runs(REASON, T0 + HOUR)
    start(store, version, "a", 0)  # Airflow retried the task

    resumed = store.get_run("a")
    assert resumed is not None and (resumed.status, resumed.reason, resumed.finished_at) == ("running", None, None)
    store.finish_run("a", "failed", {}, {}, T0 + HOUR, reason="the FM step ran out of memory")
    assert [(r.run_id, r.reason) for r in store.recent_runs(1)] == [("a", "the FM step ran out of memory")]
