"""``run_replay``: train on the first span, replay the logging span hour by hour (precompute, serve, log
features as served) with the FM refreshed on its cadence, refresh every VM variant on what the last FM
version served, replay the evaluation span and score every model on its served events, then sweep the
precompute budget over the evaluation span and compare the selectors at equal FM budgets.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import numpy as np

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR, hours_between
from solaris.eval import capacity, loop
from solaris.eval.arms import Arms, arm_span, fm_calls_per_served_pair, mean_coverage, pooled_efficiency
from solaris.eval.ceiling import known_user_share
from solaris.eval.events import ServedEvents, concat, hour_index, served_events
from solaris.eval.figures import (
    SWEEP_FRACTIONS,
    ReplayReport,
    Slice,
    SweepPoint,
    TierContribution,
)
from solaris.eval.fm_refresh import Chain, first_chain, promoted, refresh_hours, start_shadow
from solaris.eval.judging import JudgedVM, VMTraining, judge_vm
from solaris.eval.protocol import (
    DEFAULT_FM_REFRESH,
    PLAN_MIN_DEMAND,
    PLAN_TTL_HOURS,
    SWEEP_WARMUP_HOURS,
    check_fm_refresh,
    protocol,
)
from solaris.eval.scoring import score_slices, tier_contributions
from solaris.eval.spans import ReplaySpans
from solaris.eval.speculation import SPECULATION_FRACTIONS, compare_selectors, train_arms_demand
from solaris.eval.variants import TIER_STEPS
from solaris.models.fm import FoundationModel
from solaris.models.splits import Span
from solaris.models.training import FitConfig
from solaris.precompute.params import PrecomputeParams
from solaris.serving import Ranker
from solaris.serving.servedlog import ServedLog, served_dir
from solaris.store import open_configured_store
from solaris.training.jobs import TrainPlan, TrainReport, World, train_all
from solaris.vms import VMSpec, dump_vms, learnable

T = TypeVar("T")


@dataclass(frozen=True)
class ReplayConfig:
    seed: int = 0
    fractions: tuple[float, float, float] = (0.5, 0.3, 0.2)  # train, logging, eval
    top_fraction: float = PrecomputeParams.top_fraction
    ttl_hours: int = PrecomputeParams.ttl_hours
    ttl_jitter_hours: int = PrecomputeParams.ttl_jitter_hours
    cohorts: int = PrecomputeParams.cohorts
    cohort_items: int = PrecomputeParams.cohort_items
    shadow_hours: int = PrecomputeParams.shadow_hours  # a refreshed FM is written in shadow this long first
    sweep: tuple[float, ...] = SWEEP_FRACTIONS
    speculation: tuple[float, ...] = SPECULATION_FRACTIONS  # the verifier fractions the selectors compare at
    plan_ttl_hours: tuple[int, ...] = PLAN_TTL_HOURS  # the capacity grid's other TTLs (empty: none)
    plan_min_demand: tuple[float, ...] = PLAN_MIN_DEMAND  # and its floors at the largest spend (empty: none)
    sweep_warmup_hours: int = SWEEP_WARMUP_HOURS
    sweep_hours: int | None = None  # the eval span's last hours each arm serves (None: all of them)
    fit: FitConfig = field(default_factory=lambda: FitConfig(progress=False, threads=1))
    vm_training: VMTraining = field(default_factory=VMTraining)
    device: str = "cpu"
    progress: bool = True
    fm_refresh: str = DEFAULT_FM_REFRESH  # see solaris.eval.protocol

    def __post_init__(self) -> None:
        check_fm_refresh(self.fm_refresh)

    def precompute_params(self, top_fraction: float) -> dict[str, object]:
        """The paper's verifier selects in the main run and the sweep: the transfer ratios are measured on the
        paper's speculation; selectors are compared in their own arms, which never fall back from the budget
        selector (whether it beats the verifier is what they measure)."""
        return {
            "selector": "verifier",
            "top_fraction": top_fraction,
            "demand_auc_floor": 0.0,  # a budget arm measures the budget selector, however weak its demand model
            "ttl_hours": self.ttl_hours,
            "ttl_jitter_hours": self.ttl_jitter_hours,
            "cohorts": self.cohorts,
            "cohort_items": self.cohort_items,
            "shadow_hours": self.shadow_hours,
            "shards": 1,
            "device": self.device,
        }


@dataclass
class Replay:
    """What the phases share: the log, its spans, the replay's own settings (store, data, registry)."""

    config: ReplayConfig
    log: EventLog
    spans: ReplaySpans
    out: Path
    settings: Settings
    seconds: dict[str, float] = field(default_factory=dict)

    def phase(self, name: str, work: Callable[[], T]) -> T:
        if self.config.progress:
            print(f"[replay] {name} ...", flush=True)
        started = time.perf_counter()
        result = work()
        self.seconds[name] = round(time.perf_counter() - started, 1)
        return result

    def arm_settings(self, name: str) -> Settings:
        """A fresh store and data folder under ``out/name``; the replay's registry."""
        return loop.isolated_settings(self.settings, self.out / name, self.log.root, self.out / "mlflow")


def run_replay(settings: Settings, log_root: Path, out: Path, config: ReplayConfig = ReplayConfig()) -> ReplayReport:
    """Replay the event log at ``log_root`` into ``out`` (wiped first: no state leaks between replays)."""
    log = EventLog(Path(log_root))
    spans = ReplaySpans.of(log, config.fractions)
    if out.exists():
        shutil.rmtree(out)
    (out / "mlflow").mkdir(parents=True)
    replay = Replay(config, log, spans, out, settings)
    replay.settings = replay.arm_settings("main")
    skipped_vms = _learnable_vms(replay)

    trained = replay.phase("train FM, AE and first-stage VMs", lambda: _train(replay))
    world = World.open(log.root, TrainPlan().fractions, spans.train.end)
    chains = [first_chain(replay.settings, trained, spans.logging.start)]
    refreshes = refresh_hours(spans, config.fm_refresh, config.shadow_hours)
    with open_configured_store(replay.settings, init=True) as store:
        ranker = Ranker(
            store,
            chains[0].serving,
            ServedLog(served_dir(replay.settings.served_root, chains[0].serving.pinned.vm_name)),
        )
        logged, shadow = [], None
        for span in _logging_segments(spans, refreshes, config.shadow_hours):
            if span.start in refreshes:  # the next version is written in shadow through this segment
                shadow = replay.phase(
                    f"refresh FM at {span.start:%Y-%m-%d %H}:00, in shadow",
                    lambda: _shadow(replay, chains[-1], span.start),
                )
            elif shadow is not None:
                if (serving := promoted(replay.settings, shadow, span.start)) is not None:
                    chains.append(serving)
                    ranker.use(serving.serving)
                elif config.progress:
                    print(
                        f"[replay] the shadow gate refused FM {shadow.fm.version}: FM {chains[-1].fm.version} serves on"
                    )
                shadow = None
            logged += replay.phase(
                f"logging span from {span.start:%Y-%m-%d %H}:00", lambda: _replay_span(replay, ranker, span, "logging")
            ).figures
        evaluated = replay.phase("eval span", lambda: _replay_span(replay, ranker, spans.eval, "eval"))
        ranker.close()
    serving = chains[-1]
    vms = replay.settings.vms()

    def events(
        span: Span, settings: Settings, chain: Chain = serving, specs: tuple[VMSpec, ...] = vms
    ) -> dict[str, ServedEvents]:
        model = chain.serving
        served = served_dir(settings.served_root, model.pinned.vm_name)
        version, fm = model.pinned.embedding_version, chain.fm.model
        return served_events(log, span, served, version, model.code_dim, fm, world.index, config.device, specs)

    # Each version's hours read with its own codes and FM.
    ends = [c.first_serving_hour for c in chains[1:]] + [spans.eval.start]
    logging_parts = [events(Span(c.first_serving_hour, end), replay.settings, c) for c, end in zip(chains, ends)]
    eval_parts = events(spans.eval, replay.settings)
    evaluated_marginal = mean_coverage(evaluated.figures, "coverage_marginal")
    version = serving.serving.pinned.embedding_version
    judged = {
        spec.name: replay.phase(
            f"refresh and score VM {spec.name}",
            lambda spec=spec: judge_vm(
                config.vm_training,
                {v: t.model for v, t in trained.vms[spec.name].items()},
                concat([part[spec.name] for part in logging_parts]),
                eval_parts[spec.name],
                serving.first_serving_hour,
                version,
                config.seed,
            ),
        )
        for spec in vms
    }
    lead = judged[vms[0].name]
    contributions, slices = _details(lead, evaluated_marginal, serving.fm.model, config.seed)
    span = arm_span(spans.logging, spans.eval, config.sweep_hours, config.sweep_warmup_hours)
    main_events = lead.events.select(lead.events.hours >= hour_index(span.serve_from))
    arms = Arms(
        span,
        serving.serving,
        lead.first_seed(),
        main_events,
        replay.arm_settings,
        lambda arm_span_, settings: events(arm_span_, settings, specs=vms[:1])[vms[0].name],
        config.seed,
        config.progress,
    )
    sweep = replay.phase("top_fraction sweep", lambda: _sweep(arms, config))
    speculation, spends, demand_auc = [], [], {}

    def demand_for(ttl_hours: int) -> None:
        decision = replay.phase(
            f"demand model for the budget arms, ttl {ttl_hours} h",
            lambda: train_arms_demand(replay.settings, log, arms, serving.first_serving_hour, ttl_hours, config.seed),
        )
        demand_auc[str(ttl_hours)] = decision.auc

    if config.speculation:
        demand_for(config.ttl_hours)
        params = config.precompute_params(config.top_fraction)
        speculation, spends = replay.phase(
            "selectors at equal FM budgets", lambda: compare_selectors(arms, config.speculation, params)
        )
    declared = capacity.verifier_arms([*config.sweep, *config.speculation], config.precompute_params)
    grid = list(config.plan_ttl_hours), list(config.plan_min_demand)
    declared += capacity.budget_grid(spends, *grid, config.precompute_params(config.top_fraction))
    demand = capacity.DemandByTTL(config.ttl_hours, demand_for)
    curve = replay.phase("capacity grid", lambda: capacity.curve(arms, declared, demand)) if declared else []
    return ReplayReport(
        world=str(log.meta.get("name", log.root.name)),
        seed=config.seed,
        spans=spans.as_dict(),
        models=lead.scores,
        hours=logged + evaluated.figures,
        sweep=sweep,
        swept_fractions=list(config.sweep),
        fm_calls_per_served_pair=fm_calls_per_served_pair(evaluated.figures),
        staleness_hours=distribution(evaluated.staleness_hours),
        efficiency=pooled_efficiency(evaluated.figures),
        speculation=speculation,
        curve=curve,
        demand_valid_auc=demand_auc,
        coverage_marginal=evaluated_marginal,
        tier_contributions=contributions,
        slices=slices,
        users_known=known_user_share(log, spans.eval),
        per_vm={spec.name: judged[spec.name].figures(spec) for spec in vms},
        seconds=replay.seconds,
        protocol=protocol(config.fm_refresh, skipped_vms, config.precompute_params(config.top_fraction)),
        fm_versions=[c.as_dict() for c in chains],
    )


def _logging_segments(spans: ReplaySpans, refreshes: list[datetime], shadow_hours: int) -> list[Span]:
    """The logging span cut where each new FM version's shadow starts and where it starts serving."""
    edges = sorted(
        {spans.logging.start, spans.logging.end, *refreshes, *(at + shadow_hours * HOUR for at in refreshes)}
    )
    return [Span(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _shadow(replay: Replay, chain: Chain, at: datetime) -> Chain:
    plan = _plan(replay.config)
    return start_shadow(replay.settings, replay.log.root, chain, at, plan, replay.config.vm_training.valid_hours)


def _plan(config: ReplayConfig) -> TrainPlan:
    return TrainPlan(fit=replace(config.fit, seed=config.seed), device=config.device)


def _learnable_vms(replay: Replay) -> dict[str, str]:
    """Narrow the replay's own VM declaration to the VMs the log can teach (a copy under ``out``: the user's
    file is untouched), and say which were left out and why. A log whose meta has no counts keeps them all."""
    counts = replay.log.meta.get("counts")
    if counts is None:
        return {}
    kept, skipped = learnable(replay.settings.vms(), counts)
    if skipped:
        declared = replay.out / "vms.toml"
        declared.write_text(dump_vms(kept))
        replay.settings = replay.settings.with_overrides(vms_file=declared)
        if replay.config.progress:
            print(f"[replay] VMs left out: {'; '.join(f'{name}: {why}' for name, why in skipped.items())}")
    return skipped


def _train(replay: Replay) -> TrainReport:
    return train_all(replay.settings, replay.log.root, _plan(replay.config), until=replay.spans.train.end)


def _replay_span(replay: Replay, ranker: Ranker, span: Span, label: str) -> loop.SpanRun:
    params = replay.config.precompute_params(replay.config.top_fraction)
    return loop.replay_hours(
        replay.settings, hours_between(span.start, span.end), span.start, params, ranker, label, replay.config.progress
    )


def _details(
    judged: JudgedVM, marginal: dict[str, float], fm: FoundationModel, seed: int
) -> tuple[list[TierContribution], list[Slice]]:
    """Each tier's NE contribution along the variants' tier ladder, and every model on the ids the serving FM
    never trained on."""
    e = judged.events
    contributions = tier_contributions(e.label, e.requests, judged.probs, TIER_STEPS, marginal, seed)
    users, items = e.base[:, 0], e.base[:, 1]
    new = {"new items": ~fm.item.known(items), "new users": ~fm.user.known(users)}
    return contributions, score_slices(e.label, e.requests, judged.probs, new, seed)


def _sweep(arms: Arms, config: ReplayConfig) -> list[SweepPoint]:
    """Each top_fraction on a fresh store (:class:`~solaris.eval.arms.Arms`)."""
    points = []
    for fraction in config.sweep:
        run, scored = arms.run(f"sweep-{fraction:g}", config.precompute_params(fraction))
        points.append(
            SweepPoint(
                top_fraction=fraction,
                coverage=mean_coverage(run.figures),
                ne=scored.ne,
                transfer_ratio=scored.transfer_ratio,
                fm_calls_per_served_pair=fm_calls_per_served_pair(run.figures),
                ne_ci95=scored.ne_ci95,
                ne_gain=scored.ne_gain,
                ne_gain_ci95=scored.ne_gain_ci95,
                transfer_ratio_ci95=scored.transfer_ratio_ci95,
                fm_calls_per_covered_candidate=pooled_efficiency(run.figures)["fm_calls_per_covered_candidate"],
            )
        )
    return points


def distribution(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0}
    p50, p90 = np.percentile(values, [50, 90])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "max": float(values.max())}
