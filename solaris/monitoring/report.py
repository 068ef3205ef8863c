"""The feature-store health report behind the Airflow UI's SOLARIS page and its JSON.

Built from what the store and MLflow hold at a time ``t`` that the caller passes: per embedding version the
size and freshness of each table, the last precompute runs with the quality figures they logged to MLflow,
coverage by tier over the last hours, and the champion chain. Each source is read on its own, so an
unreachable store or MLflow server becomes a :class:`Problem` on the report, never an exception.

A report whose sources all answered can still be not ``ok``: an :class:`Alert` says so when the latest
precompute run failed, or is *stale*, recorded ``running`` for longer than :data:`STALE_AFTER` before ``t``
(its process is gone: the stack was stopped mid-run, and nothing will ever finish the record).
A ``skipped`` run (an hour with nothing to precompute) is no failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from mlflow import MlflowClient
from solaris.enrichment.tiers import FED_BY
from solaris.monitoring.ranker_state import RankerState
from solaris.precompute.summary import COVERAGE, EXPERIMENT
from solaris.store.base import FeatureStore
from solaris.store.errors import StoreError
from solaris.store.records import RunRecord, TableStats
from solaris.tracking.registry import PinnedVersions, resolve_champions

if TYPE_CHECKING:
    from solaris.monitoring.capacity_plan import PlanOnPage

log = logging.getLogger(__name__)

STORE, MLFLOW = "feature store", "MLflow"
HOUR = timedelta(hours=1)
# A run's figures on the page: coverage by tier, hit rate in the hour and while fresh with its ceiling, the shadow chain's
# all-tier coverage while a challenger is written in shadow (what its gate compares).
RUN_FIGURES = (*COVERAGE, "hit_rate_ttl", "hit_ceiling_ttl", "shadow_coverage_any")
# Far longer than a run can take: runs are hourly, one at a time (max_active_runs=1), and take minutes, so
# one still going after three hours has stalled the schedule anyway. A "running" record older than this is
# taken as dead (its process ended without closing it: the stack was stopped mid-run).
STALE_AFTER = timedelta(hours=3)
# Records read for the charts and the status line, per hour shown: an hour rerun, or written in shadow beside
# the champion, has more than one.
HISTORY_RUNS_PER_HOUR = 2
FAILED, STALE = "failed", "stale"
T = TypeVar("T")

COVERAGE_TIERS = (*FED_BY, "any")  # the coverage figures the page shows, in the feeding order


@dataclass(frozen=True)
class Problem:
    """A source the report could not read, and why (the exception's type and first line)."""

    source: str
    message: str


@dataclass(frozen=True)
class Alert:
    """Why a report whose sources all answered is not ok: the latest run ``run_id`` is ``failed`` or ``stale``."""

    run_id: str
    status: str
    message: str


@dataclass(frozen=True)
class VersionHealth:
    version: str
    champion: bool
    tables: dict[str, TableStats]


@dataclass(frozen=True)
class RunHealth:
    """A run record and its quality figures: those its coverage step recorded in the store, overlaid with those
    its run logged to MLflow (the runs the page lists).

    ``stale``: recorded ``running``, but started longer than the report's ``stale_after`` before its ``t``.
    """

    record: RunRecord
    figures: dict[str, float]
    stale: bool = False


@dataclass(frozen=True)
class CoveragePoint:
    """Share of the requests of ``hour`` that each tier covered (``any``: at least one tier)."""

    hour: datetime
    shares: dict[str, float]


@dataclass(frozen=True)
class VMChampion:
    """One configured VM's champion chain, or why it has none."""

    vm: str
    chain: PinnedVersions | None
    note: str | None


@dataclass(frozen=True)
class HealthReport:
    at: datetime
    champion: PinnedVersions | None  # the lead VM's: its embedding version is the one precomputed
    champion_note: str | None
    versions: list[VersionHealth]
    runs: list[RunHealth]
    coverage: list[CoveragePoint]
    problems: list[Problem] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    vms: list[VMChampion] = field(default_factory=list)  # every configured VM, the lead first
    # A live stack's traffic by simulated hour, as its load driver recorded it (:mod:`solaris.live.figures`).
    load: list[dict[str, Any]] = field(default_factory=list)
    # The runs of the charts' hours (``runs`` is the newest ``n_runs`` of them), newest first.
    history: list[RunHealth] = field(default_factory=list)
    ranker: RankerState | None = None
    hours: int = 24  # the hours the coverage and the charts span, up to ``at``
    plan: PlanOnPage | None = None  # the last capacity plan, today's knobs on it (None: no replay wrote one)

    @property
    def ok(self) -> bool:
        """Every source answered, and the latest run neither failed nor is stale."""
        return not self.problems and not self.alerts

    @classmethod
    def unavailable(cls, t: datetime, why: Problem) -> HealthReport:
        """A report with nothing to show but why."""
        return cls(t, None, None, [], [], [], [why])


def build_report(
    store: FeatureStore,
    client: MlflowClient | None,
    t: datetime,
    *,
    vms: Sequence[str],
    n_runs: int = 24,
    hours: int = 24,
    stale_after: timedelta = STALE_AFTER,
) -> HealthReport:
    """The report at ``t``: the ``n_runs`` latest runs, coverage of the ``hours`` hours before ``t``.

    ``client=None`` skips MLflow (the caller found it unreachable and says so itself): no champion, no figures.
    A run recorded ``running`` since more than ``stale_after`` before ``t`` is shown stale.
    """
    if n_runs < 1 or hours < 1:
        raise ValueError(f"n_runs={n_runs}, hours={hours}: both must be at least 1")
    problems: list[Problem] = []
    champions = []
    if client is not None:
        champions = _guard(problems, MLFLOW, lambda: [VMChampion(vm, *_champion(client, vm)) for vm in vms], [])
    champion, note = (champions[0].chain, champions[0].note) if champions else (None, None)

    def initialised() -> bool:
        store.check_initialised()  # no tables: one problem naming the command, not a driver error per read
        return True

    ready = _guard(problems, STORE, initialised, False)
    wanted = max(n_runs, HISTORY_RUNS_PER_HOUR * hours)
    records = _guard(problems, STORE, lambda: list(store.recent_runs(wanted)), []) if ready else []
    figures = {}
    if client is not None and records:
        listed = [r.run_id for r in records[:n_runs]]
        figures = _guard(problems, MLFLOW, lambda: run_figures(client, listed), {})
    history = [RunHealth(r, r.figures | figures.get(r.run_id, {}), is_stale(r, t, stale_after)) for r in records]
    names = _versions(champion, records[:n_runs])
    stats = _guard(problems, STORE, lambda: {v: store.stats(v, t) for v in names}, {}) if ready else {}
    versions = [VersionHealth(v, champion is not None and v == champion.embedding_version, stats[v]) for v in stats]
    coverage = coverage_by_hour(history, t, hours)
    alerts = run_alerts(history, t, stale_after)
    runs = history[:n_runs]
    return HealthReport(
        t, champion, note, versions, runs, coverage, problems, alerts, champions, history=history, hours=hours
    )


def run_health(store: FeatureStore, run_id: str, t: datetime, stale_after: timedelta = STALE_AFTER) -> RunHealth | None:
    """One run as its record holds it (its own quality figures: MLflow is not asked), or None."""
    store.check_initialised()
    record = store.get_run(run_id)
    return None if record is None else RunHealth(record, record.figures, is_stale(record, t, stale_after))


def is_stale(record: RunRecord, t: datetime, stale_after: timedelta) -> bool:
    """Recorded ``running`` since more than ``stale_after`` before ``t``: no live run takes that long."""
    return record.status == "running" and t - record.started_at > stale_after


def run_alerts(runs: Sequence[RunHealth], t: datetime, stale_after: timedelta) -> list[Alert]:
    """What is wrong with the latest of ``runs`` (newest first), if anything.

    Only the latest run decides: a later run that succeeded (or found nothing to do) shows the pipeline works
    again, and older failed or stale runs stay visible in the list. A run still running is fine until stale.
    """
    if not runs:
        return []
    latest = runs[0]
    r = latest.record
    if r.status == FAILED:
        ended = f", finished {_when(r.finished_at)}" if r.finished_at else ""
        why = f": {r.reason}" if r.reason else ""
        message = f"the latest precompute run {r.run_id} failed (hour {_when(r.interval_start)}{ended}){why}"
        return [Alert(r.run_id, FAILED, message)]
    if latest.stale:
        hours = (t - r.started_at) / HOUR
        message = (
            f"the latest precompute run {r.run_id} is still recorded running since {_when(r.started_at)}, "
            f"{hours:.1f} h before this report, longer than any run takes ({stale_after / HOUR:g} h): its process "
            "is gone (was the stack stopped mid-run?); rerun or clear that hour"
        )
        return [Alert(r.run_id, STALE, message)]
    return []


def _when(t: datetime) -> str:
    return f"{t.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def run_figures(client: MlflowClient, run_keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """Coverage and hit rate the latest MLflow run of each run key logged; keys never logged are left out.

    One search per key: MLflow's filter has no ``IN`` for tags, and the run key is only a tag.
    """
    experiment = client.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        return {}
    found = {}
    for key in run_keys:
        latest = client.search_runs(
            [experiment.experiment_id],
            f"tags.run_key = '{key}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if latest:
            metrics = latest[0].data.metrics
            found[key] = {name: metrics[name] for name in RUN_FIGURES if name in metrics}
    return found


def coverage_by_hour(runs: Sequence[RunHealth], t: datetime, hours: int) -> list[CoveragePoint]:
    """Oldest first, the hours in ``[t - hours, t)`` that one of ``runs`` measured (each the hour before it)."""
    points = {}
    for run in runs:
        hour = run.record.interval_start - HOUR
        if t - hours * HOUR <= hour < t and "coverage_any" in run.figures:
            shares = {tier: run.figures.get(f"coverage_{tier}", 0.0) for tier in COVERAGE_TIERS}
            points.setdefault(hour, CoveragePoint(hour, shares))
    return [points[h] for h in sorted(points)]


def _champion(client: MlflowClient, vm_name: str) -> tuple[PinnedVersions | None, str | None]:
    """The VM's champion chain, or why there is none (no alias yet, or a chain whose tags disagree)."""
    try:
        return resolve_champions(client, vm_name), None
    except ValueError as exc:
        return None, str(exc)


def _versions(champion: PinnedVersions | None, records: Sequence[RunRecord]) -> list[str]:
    """The champion's embedding version first, then those of the runs, newest first, each once."""
    ordered = [champion.embedding_version] if champion else []
    ordered += [r.embedding_version for r in records]
    return list(dict.fromkeys(ordered))


def _guard(problems: list[Problem], source: str, read: Callable[[], T], fallback: T) -> T:
    """``read()``, or ``fallback`` with the failure noted: the report shows what it can of the rest."""
    try:
        return read()
    except Exception as exc:  # any driver or client error: the page names it instead of failing
        log.warning("SOLARIS report: reading the %s failed", source, exc_info=not isinstance(exc, StoreError))
        problems.append(problem(source, exc))
        return fallback


def problem(source: str, exc: Exception) -> Problem:
    """The exception's type and first line (driver errors go on with the SQL and a link); ours, its message."""
    lines = str(exc).strip().splitlines()
    if isinstance(exc, StoreError):
        return Problem(source, lines[0])
    return Problem(source, f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)
