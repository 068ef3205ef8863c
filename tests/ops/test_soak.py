"""The soak (#20): the local stack on the live clock for 12 simulated hours (24 with ``SOLARIS_SOAK_HOURS=24``),
every run started by Airflow's scheduler, traffic and its load driver throughout; then what a day of operation
must leave behind.

The world's log ends at 20:00 of its second day, so unpausing ``solaris_train`` runs the day past at once and
the next day's run falls at simulated midnight, inside the soak; the first chain is a quick one (one epoch), so
the daily training has a chain to beat and its challenger goes through the shadow precompute to promotion.
Its wall time on 2 cores: about 9 minutes (``make test-soak``; the README gives it)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest
from local_service import poll
from stack_session import Api, left_behind, solaris, stack_up, task_log_tails

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.embedding_version import parse_embedding_version
from solaris.enrichment.tiers import NONE, PAIR
from solaris.live.figures import EXPERIMENT, load_log_path, read_hours
from solaris.live.load import LAG
from solaris.ops import procs
from solaris.ops.stack import airflow_password
from solaris.ops.stack_state import StackState, state_path
from solaris.precompute.expiry import expires_of
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.run_files import code_log_of
from solaris.serving.servedlog import read_served, served_dir
from solaris.store import open_store
from solaris.vms import DEFAULT_VMS

HOUR_SECONDS = 40
SOAK_HOURS = int(os.environ.get("SOLARIS_SOAK_HOURS", "12"))  # 24 for a whole day (the world has 28 left)
WRITTEN_HOURS = 44  # of the tiny world's 72
PRECOMPUTE, TRAIN = "solaris_precompute", "solaris_train"
# A long-running service may hold at most this much more at the end than once warm: after WARM_RUNS hourly
# runs, when the first training has run and the first hours have been served and logged.
MEMORY_GROWTH, WARM_RUNS = 1.2, 3
HOUR = timedelta(hours=1)


@pytest.mark.soak
@pytest.mark.timeout(1800)  # pytest-timeout's 600 s default is for one test of the default suite
def test_a_live_stack_runs_simulated_hours_through_the_scheduler(
    tmp_path: Path, pg_url: str, airflow_database: str
) -> None:
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path), "SOLARIS_WORLD": "tiny", "SOLARIS_DEVICE": "cpu"})
    env = {"PATH": "/usr/bin:/bin"} | settings.as_env()
    for command in (
        ["data", "generate", "--preset", "tiny", "--hours", str(WRITTEN_HOURS)],
        ["train", "all", "--epochs", "1", "--threads", "1", "--no-progress"],
    ):
        done = solaris(env, *command)
        assert done.returncode == 0, done.stderr[-3000:]

    env, up, state = stack_up(settings, pg_url, airflow_database, "--live", "--hour-seconds", str(HOUR_SECONDS))
    started: list[psutil.Process] = []
    try:
        assert up.returncode == 0 and state is not None, f"stack up failed:\n{up.stdout}\n{up.stderr}"
        api = Api(state.urls["airflow"], "admin", airflow_password(state))
        for dag in (PRECOMPUTE, TRAIN):
            poll(
                f"{dag} parsed",
                lambda: api("GET", "/api/v2/dags?dag_id_pattern=solaris")["dags"],
                lambda dags, dag=dag: dag in {d["dag_id"] for d in dags},
                120,
            )
            assert api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})["is_paused"] is False
        soak_started, at_start = time.monotonic(), memory_by_service(state)
        finished = lambda n: lambda runs: sum(r["state"] in ("success", "failed") for r in runs) >= n  # noqa: E731
        poll(
            f"{WARM_RUNS} precompute runs",
            lambda: dag_runs(api, PRECOMPUTE),
            finished(WARM_RUNS),
            (WARM_RUNS + 6) * HOUR_SECONDS + 120,
        )
        warm = memory_by_service(state)
        poll(
            f"{SOAK_HOURS} precompute runs",
            lambda: dag_runs(api, PRECOMPUTE),
            finished(SOAK_HOURS),
            (SOAK_HOURS + 6) * HOUR_SECONDS + 120,
            lambda: task_log_tails(settings, PRECOMPUTE, "-"),
        )
        end = memory_by_service(state)
        soak_s = time.monotonic() - soak_started
        runs = {dag: pause_between_runs(api, dag) for dag in (TRAIN, PRECOMPUTE)}
        page = api.solaris_health("?hours=48")
        mlflow_p99 = mlflow_history(state.urls["mlflow"], "ranker_p99_ms")
        decisions = promotion_decisions(state.urls["mlflow"])
    finally:
        if state is not None:
            started = procs.members(state.procs)
        down = solaris(env, "stack", "down")
    assert down.returncode == 0, down.stderr
    assert not state_path(settings).exists()
    assert not (left := left_behind(state, started)), f"still running after stack down: {left}"
    recorded = read_hours(load_log_path(settings.data_dir))
    load = [h for h in recorded if h["answered"]]
    with open_store(settings.store_url) as store:
        records = {r.interval_start: r for r in store.recent_runs(100)}
    # printed before the checks, so that a failed soak shows its hours and the gate's decisions
    print(f"\nsoak: {SOAK_HOURS} simulated hours in {soak_s:.0f} s wall")
    print(hourly_table(runs[PRECOMPUTE], records, load))
    print("promotion decisions:", *decisions, sep="\n  ")

    # Every run the scheduler's: each succeeded, and no simulated hour went without its precompute but one the
    # scheduler skipped by design.
    for dag, dag_runs_ in runs.items():
        assert {r["run_type"] for r in dag_runs_} == {"scheduled"}, dag
        assert not (failed := [r["dag_run_id"] for r in dag_runs_ if r["state"] != "success"]), f"{dag}: {failed}"
    hours = sorted(datetime.fromisoformat(r["logical_date"]) for r in runs[PRECOMPUTE])
    assert len(hours) >= SOAK_HOURS
    assert not (unexplained := unexplained_gaps(runs[PRECOMPUTE])), unexplained
    assert len(runs[TRAIN]) >= 2  # the day past at unpause, and simulated midnight's

    # The plugin page and MLflow show the hours at their simulated times.
    world_end = EventLog(settings.world_dir()).end
    assert hours[0] < datetime.fromisoformat(page["at"]) <= world_end + LAG
    assert page["ok"], (page["problems"], page["alerts"])
    print("the page's status:", page["status"]["level"], [r["message"] for r in page["status"]["reasons"]])
    assert page["status"]["level"] != "failing", page["status"]["reasons"]
    assert len(page["coverage"]) >= SOAK_HOURS - 1
    shown = {h["hour"] for h in page["load"]}  # read before the stack stopped: the last hour may be missing
    assert shown <= {h["hour"] for h in recorded} and len(shown) >= len(recorded) - 1
    p99 = {datetime.fromisoformat(h["hour"]): h["ranker_p99_ms"] for h in load}
    assert mlflow_p99.items() <= p99.items() and len(mlflow_p99) >= len(p99) - 1
    served = served_rows(settings)
    check_every_answer_logged(served, load)
    check_no_row_served_past_its_ttl(settings, served)
    promoted = check_the_switch_has_no_cold_hour(served)

    print(f"promotion served from {promoted}")
    memory = {k: (round(at_start.get(k, 0)), round(warm[k]), round(end.get(k, 0))) for k in warm}
    print("memory (MB) at the start, once warm, at the end:", memory)
    grown = {name: end[name] / warm[name] for name in warm if name in end}
    assert all(ratio <= MEMORY_GROWTH for ratio in grown.values()), grown


def pause_between_runs(api: Api, dag: str, tries: int = 5) -> list[dict]:
    """Pause ``dag`` at a moment none of its runs is in flight; its runs. The scheduler gives a paused DAG's
    running run no more tasks (a soak stalled 10 minutes on a run the pause caught after its first step), so a
    run the pause catches is let finish, unpaused, and the pause tried again."""
    ended = lambda runs: all(r["state"] in ("success", "failed") for r in runs)  # noqa: E731
    for _ in range(tries):
        api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": True})
        if ended(runs := dag_runs(api, dag)):
            return runs
        api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})
        poll(f"{dag}'s run in flight", lambda: dag_runs(api, dag), ended, 600, every_s=0.5)
    pytest.fail(f"{dag}: a run was in flight at each of {tries} pauses")


def test_only_a_run_that_overran_its_hour_explains_a_skipped_hour() -> None:
    due = datetime(2026, 1, 1, 1, 0, 3, tzinfo=UTC)  # wall times; logical dates are simulated hours

    def run(hour: int, took_s: float) -> dict[str, str]:
        logical = datetime(2026, 1, 6, hour, tzinfo=UTC)
        ran_after = due + timedelta(seconds=HOUR_SECONDS * hour)
        return {
            "logical_date": logical.isoformat(),
            "run_after": ran_after.isoformat(),
            "end_date": (ran_after + timedelta(seconds=took_s)).isoformat(),
        }

    assert unexplained_gaps([run(1, 30), run(2, 30), run(3, 30)]) == []
    assert unexplained_gaps([run(1, 2.5 * HOUR_SECONDS), run(3, 30)]) == []
    (gap,) = unexplained_gaps([run(1, 30), run(3, 30)])
    assert gap.startswith("1 hour(s) after 2026-01-06T01:00:00+00:00, whose run ended 30 s after it was due")


def unexplained_gaps(runs: list[dict[str, Any]]) -> list[str]:
    """The simulated hours missing between consecutive runs that the scheduler's no-catchup rule does not explain.
    Without catchup, a run still going when the next one falls due makes the scheduler skip to the last
    interval over once it ends (``solaris.live.timetable``): on a busy 2-core machine a 40 s hour can be
    overrun. A gap after a run that ended before the next was due is a missed hour, a defect."""
    ordered = sorted(runs, key=lambda r: r["logical_date"])
    gaps = []
    for before, after in zip(ordered, ordered[1:]):
        missing = (
            datetime.fromisoformat(after["logical_date"]) - datetime.fromisoformat(before["logical_date"])
        ) // HOUR - 1
        if not missing:
            continue
        overran_s = (
            datetime.fromisoformat(before["end_date"]) - datetime.fromisoformat(before["run_after"])
        ).total_seconds()
        skipped = (
            f"{missing} hour(s) after {before['logical_date']}, whose run ended {overran_s:.0f} s after it was due"
        )
        print(f"skipped by the scheduler: {skipped}")
        if overran_s <= HOUR_SECONDS:
            gaps.append(f"{skipped}: before the next hour was due ({HOUR_SECONDS} s)")
    return gaps


def promotion_decisions(url: str) -> list[str]:
    """Each gate decision of the soak, oldest first: the run's name, whether it promoted, and why."""
    client = MlflowClient(url)
    experiment = client.get_experiment_by_name("solaris-promotion")
    if experiment is None:
        return ["none (no solaris-promotion experiment)"]
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    return [f"{r.info.run_name}: promoted={r.data.tags.get('promoted')} ({r.data.tags.get('reason')})" for r in runs]


def mlflow_history(url: str, metric: str) -> dict[datetime, float]:
    """The live traffic's ``metric`` in MLflow, by the (simulated) time each value was logged at."""
    client = MlflowClient(url)
    (run,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    return {
        datetime.fromtimestamp(m.timestamp / 1000, UTC): m.value
        for m in client.get_metric_history(run.info.run_id, metric)
    }


def dag_runs(api: Api, dag: str) -> list[dict[str, Any]]:
    return api("GET", f"/api/v2/dags/{dag}/dagRuns?limit=200&order_by=logical_date")["dag_runs"]


def memory_by_service(state: StackState) -> dict[str, float]:
    """Each service's memory in MB (proportional set size: pages shared by forked workers counted once):
    its leader and every descendant but task processes, which come and go with the runs."""
    memory = {}
    for proc in state.procs:
        leader = proc.leader()
        if leader is None:
            continue
        tree = [leader, *leader.children(recursive=True)]
        memory[proc.name] = sum(pss(p) for p in tree if not is_task(p)) / 2**20
    return memory


def is_task(process: psutil.Process) -> bool:
    """A task's process (``airflow worker -- <id>``), not the LocalExecutor's worker that forked it."""
    try:
        title = " ".join(process.cmdline())
    except psutil.Error:
        return True
    return title.startswith("airflow worker -- ") and "LocalExecutor" not in title


def pss(process: psutil.Process) -> int:
    try:
        return process.memory_full_info().pss
    except psutil.Error:
        return 0


def served_rows(settings: Settings) -> pd.DataFrame:
    """The lead VM's served log over the world's live span: request, time, pair, tier and embedding version."""
    log = EventLog(settings.world_dir())
    root = served_dir(settings.served_root, DEFAULT_VMS[0].name)
    table = read_served(root, log.start, log.end + LAG, code_dim_of(settings))
    columns = ["request_id", "ts", "user_id", "item_id", "tier", "pair_flag", "embedding_version"]
    frame = table.select(columns).to_pandas()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


def code_dim_of(settings: Settings) -> int:
    with open_store(settings.store_url) as store:
        (record, *_) = store.recent_runs(1)
    return parse_embedding_version(record.embedding_version).dim


def check_every_answer_logged(served: pd.DataFrame, load: list[dict[str, Any]]) -> None:
    """Each request the ranker answered in an hour the load driver sent whole has its rows on disk."""
    for hour in load:
        start = datetime.fromisoformat(hour["hour"])
        in_hour = served[(served["ts"] >= start) & (served["ts"] < start + HOUR)]
        assert in_hour["request_id"].nunique() == hour["answered"], hour


def check_no_row_served_past_its_ttl(settings: Settings, served: pd.DataFrame) -> None:
    """A row served with its own pair code (tier ``pair``) came from that pair's latest write before the request,
    and that write was still fresh: the code log holds what every run wrote, and when. A row the cohort tier fed
    also has the pair input set, with its cohort's code, which the code log does not hold (its TTL:
    tests/store/test_store_cohorts.py); its reported tier is the first tier present, ``cohort`` or an item-side
    one before it, so only the tier tells the user's own code apart. Each write expires when the code log says
    (solaris.precompute.expiry), at most ``ttl_hours`` after it."""
    params = PrecomputeParams()
    ttl = timedelta(hours=params.ttl_hours)
    with_pair = served[served["tier"] == PAIR]
    assert len(with_pair) > 0 and (with_pair["pair_flag"] == 1).all()
    for version, rows in with_pair.groupby("embedding_version"):
        written = code_log_of(settings, version, parse_embedding_version(version).dim).read(
            rows["ts"].min() - ttl, rows["ts"].max() + HOUR
        )
        writes = pd.DataFrame(
            {
                "user_id": written.user_ids,
                "item_id": written.item_ids,
                "written_at": pd.to_datetime(written.created_at, utc=True),
                "expires_at": pd.to_datetime(expires_of(written, params.ttl_hours), unit="us", utc=True),
            }
        ).sort_values("written_at")
        assert (writes["expires_at"] <= writes["written_at"] + ttl).all(), f"{version}: a code outlived its TTL"
        found = pd.merge_asof(
            rows.sort_values("ts"), writes, left_on="ts", right_on="written_at", by=["user_id", "item_id"]
        )
        assert found["written_at"].notna().all(), f"{version}: pair codes served that no run wrote"
        stale = found[found["ts"] >= found["expires_at"]]
        assert stale.empty, f"{version}: {len(stale)} rows served past their TTL:\n{stale.head()}"


def check_the_switch_has_no_cold_hour(served: pd.DataFrame) -> datetime:
    """The daily training's chain is promoted and served, and no hour from the one before the switch covers
    fewer candidates (any tier) than the same hour one TTL cycle earlier by more than 10 points; returns the
    first hour served by it.

    Hours are compared a cycle apart because served coverage is periodic. What one run writes expires together
    ``ttl_hours`` later and the run then writes it again, replacing each pair's row. The load answers each
    request an hour late, as of its own time, and a point-in-time read finds no row created after that time:
    so the last hour of every cycle dips, whatever the chain (to 75% in the first chain's hours of the soak
    that found it, which compared each hour with the one before)."""
    by_hour = served.assign(hour=served["ts"].dt.floor("h"), covered=served["tier"] != NONE)
    first_version = by_hour.sort_values("ts")["embedding_version"].iloc[0]
    switched = by_hour[by_hour["embedding_version"] != first_version]
    assert not switched.empty, "no promoted chain was served"
    switch = switched["hour"].min()
    coverage = by_hour.groupby("hour")["covered"].mean()
    cycle_before = coverage.shift(freq=timedelta(hours=PrecomputeParams.ttl_hours)).reindex(coverage.index)
    around = pd.DataFrame({"coverage": coverage, "a_cycle_before": cycle_before})[coverage.index >= switch - HOUR]
    compared = around.dropna()
    assert len(compared) >= 2, f"too few hours a cycle apart around the switch at {switch}:\n{around}"
    drops = compared["a_cycle_before"] - compared["coverage"]
    assert (drops <= 0.10).all(), f"coverage by hour around the switch at {switch}:\n{around}"
    return switch.to_pydatetime()


def hourly_table(runs: list[dict[str, Any]], records: dict[datetime, Any], load: list[dict[str, Any]]) -> str:
    """Per simulated hour: the run's duration, FM calls (the champion's and the shadow's), coverage by tier
    and hit rate of the hour past, and the ranker's p50/p99 as the load driver saw them."""
    latency = {datetime.fromisoformat(h["hour"]): h for h in load}
    lines = ["hour   run_s  fm_calls  shadow  pair   a2a    agg    knn    any    hit_ttl  p50_ms  p99_ms"]
    for run in runs:
        hour = datetime.fromisoformat(run["logical_date"]) + HOUR  # the hour it precomputes
        took = datetime.fromisoformat(run["end_date"]) - datetime.fromisoformat(run["start_date"])
        record = records.get(hour)
        figures, counts = (record.figures, record.counts) if record else ({}, {})
        cover = [figures.get(f"coverage_{t}", float("nan")) for t in ("pair", "a2a", "agg", "knn", "any")]
        seen = latency.get(hour - HOUR, {})  # the hour past, as its coverage
        lines.append(
            f"{hour:%dT%H}  {took.total_seconds():5.1f}  {counts.get('embedded', 0):8d}  {counts.get('shadow_embedded', 0):6d}  "
            + "  ".join(f"{c:5.3f}" for c in cover)
            + f"  {figures.get('hit_rate_ttl', float('nan')):7.3f}"
            + f"  {seen.get('ranker_p50_ms') or float('nan'):6.1f}  {seen.get('ranker_p99_ms') or float('nan'):6.1f}"
        )
    return "\n".join(lines)
