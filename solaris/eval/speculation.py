"""The selectors compared at equal FM budgets (#15): the paper's verifier against the budget selector.

Each verifier arm runs the eval span's last hours at one ``top_fraction``; what it spends per served hour
becomes the ``fm_budget`` of a budget arm over the same hours, so both spend the same FM calls (the budget
arm never more); the default verifier's spend also gets a budget arm with a third of its calls. The demand
model the budget arms pin is trained on the hours before the arms' warm-up, with its per-cohort gains
estimated from the main run's features as served over the day before that, scored by the serving VM:
nothing the arms serve is seen by the model that chooses for them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.eval.arms import Arms, mean_coverage, pooled_efficiency
from solaris.eval.figures import HourFigures, ModelScore, SpeculationPoint
from solaris.precompute.params import PrecomputeParams
from solaris.serving.servedlog import served_dir
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION, DEMAND_MODEL
from solaris.training.demand import DemandDecision, train_demand_job
from solaris.training.demand_fit import DemandPlan
from solaris.training.demand_gains import served_gains
from solaris.vms import choose

SPECULATION_FRACTIONS = (0.1, 0.2, 0.4)  # the verifier's budgets; each also sets a budget arm's fm_budget
THIRD = 3  # the default verifier's calls are also divided by this for one more budget arm
GAIN_HOURS = 24


def train_arms_demand(
    settings: Settings, log: EventLog, arms: Arms, served_since: datetime, ttl_hours: int, seed: int
) -> DemandDecision:
    """The budget arms' demand model for ``ttl_hours``, made the champion of the replay's own registry whatever
    its gate said (a model for another TTL is compared on other labels, and the arms must pin this one); gains
    from the serving version's features as served over at most the day before the warm-up."""
    until = arms.span.warm_start
    hours = min(GAIN_HOURS, int((until - served_since) / HOUR))
    gains = {}
    if hours > 0:
        (spec,) = choose(settings.vms(), [arms.model.pinned.vm_name])
        gains = served_gains(log, served_dir(settings.served_root, spec.name), arms.model.vm, spec.label, until, hours)
    plan = DemandPlan(fit=replace(DemandPlan().fit, seed=seed))
    client = registry.connect(settings)
    decision = train_demand_job(client, settings, log, until, ttl_hours, plan, gains)
    registry.set_alias(client, DEMAND_MODEL, CHAMPION, decision.version)
    return decision


def point(
    selector: str,
    fm_budget: int,
    top_fraction: float | None,
    figures: list[HourFigures],
    scored: ModelScore,
    vs_verifier: tuple[float, list[float]] | None = None,
) -> SpeculationPoint:
    found = pooled_efficiency(figures)
    gain, gain_ci = vs_verifier or (None, None)
    return SpeculationPoint(
        selector=selector,
        fm_budget=fm_budget,
        top_fraction=top_fraction,
        fm_calls=int(found["fm_calls"] or 0),
        coverage_pair=mean_coverage(figures)["pair"],
        hit_rate_ttl=found["hit_rate_ttl"],
        hit_ceiling_ttl=found["hit_ceiling_ttl"],
        requested_auc=found["requested_auc"],
        fm_calls_per_covered_candidate=found["fm_calls_per_covered_candidate"],
        ne=scored.ne,
        ne_ci95=scored.ne_ci95,
        ne_gain_vs_verifier=gain,
        ne_gain_vs_verifier_ci95=gain_ci,
    )


@dataclass(frozen=True)
class Spend:
    """An FM budget the budget selector runs at, named by the verifier arm whose spend it is, so that the
    same spend has one name across seeds (their worlds spend differently); the capacity plan's budget axis."""

    name: str
    fm_budget: int
    verifier: dict[str, object]  # the verifier arm the budget arm's NE is set against


def compare_selectors(
    arms: Arms, fractions: tuple[float, ...], params: dict[str, object]
) -> tuple[list[SpeculationPoint], list[Spend]]:
    """A verifier arm per fraction, then a budget arm with the FM calls it spent per served hour; last, where
    the fractions hold the default one, a budget arm with a third of that verifier's calls (#15's other form
    of its goal: the verifier's coverage with at most a third of its FM calls). Returns the points and the
    budget arms' spends."""
    points, spends, default = [], [], []
    for fraction in fractions:
        verifier = params | {"selector": "verifier", "top_fraction": fraction}
        run, scored = arms.run(f"verifier-{fraction:g}", verifier)
        spend = Spend(
            f"top {fraction:g}", max(1, round(sum(f.fm_calls for f in run.figures) / len(run.figures))), verifier
        )
        points.append(point("verifier", spend.fm_budget, fraction, run.figures, scored))
        points.append(budget_point(arms, spend, params))
        spends.append(spend)
        if fraction == PrecomputeParams.top_fraction:
            default.append(Spend(f"top {fraction:g} / {THIRD}", max(1, spend.fm_budget // THIRD), verifier))
    return points + [budget_point(arms, spend, params) for spend in default], spends + default


def budget_params(params: dict[str, object], spend: Spend) -> dict[str, object]:
    return params | {"selector": "budget", "fm_budget": spend.fm_budget}


def budget_point(arms: Arms, spend: Spend, params: dict[str, object]) -> SpeculationPoint:
    """The budget selector at ``spend``, its NE set against the verifier arm whose spend it got."""
    arm = budget_params(params, spend)
    run, scored = arms.run(f"budget-{spend.fm_budget}", arm)
    return point("budget", spend.fm_budget, None, run.figures, scored, arms.ne_gain(spend.verifier, arm))
