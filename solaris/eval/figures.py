"""What a replay measured, as plain JSON-able dataclasses: the report renders them, tests check them, and
MLflow stores them as ``report.json``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from solaris.enrichment.tiers import FED_BY
from solaris.eval.protocol import replayed_world

# coverage["a2a"] is the share fed by pair OR a2a, and so on down the feeding order, the cohort code last
CUMULATIVE_TIERS = FED_BY
SWEEP_FRACTIONS = (0.05, 0.1, 0.2, 0.4)  # the top_fraction sweep the issue asks for


Interval = list[float]  # [low, high]: a paired bootstrap 95% interval over requests (see eval.bootstrap)


@dataclass(frozen=True)
class ModelScore:
    """One model on the evaluation span's served events. ``ne_gain`` is the base VM's NE minus this model's.
    ``transfer_ratio`` is None for the FM itself, and for every model where the FM's gain over the base VM
    is no larger than its own interval's width (nothing measurable to transfer)."""

    name: str
    ne: float
    log_loss: float
    auc: float
    transfer_ratio: float | None
    ne_ci95: Interval | None = None
    ne_gain: float | None = None
    ne_gain_ci95: Interval | None = None
    transfer_ratio_ci95: Interval | None = None
    # A VM variant is trained once per VM training seed and scored as the mean over those runs (its figures and
    # intervals above); beside them the sample sd over the runs (None for one run, the FM, and older reports).
    runs: int = 1
    ne_runs_sd: float | None = None
    ne_gain_runs_sd: float | None = None
    transfer_ratio_runs_sd: float | None = None


@dataclass(frozen=True)
class VMFigures:
    """One configured VM on the eval span: every model scored on its label (the transfer ratio against the
    FM's matching head), with how many events and positives the intervals rest on."""

    label: str
    positions: list[int] | None  # [first, last] served; None: every position
    events: int
    positives: int
    models: list[ModelScore]

    def model(self, name: str) -> ModelScore:
        return next(m for m in self.models if m.name == name)


@dataclass(frozen=True)
class HourFigures:
    """One replayed hour: its precompute and the serving of its impressions."""

    hour: str  # ISO start of the hour
    span: str  # "logging" or "eval"
    served: int  # (user, item) pairs served
    coverage: dict[str, float]  # cumulative share by tier, see CUMULATIVE_TIERS
    hit_rate: float | None  # share of this hour's served pairs the precompute embedded for it
    fm_calls: int  # pairs the FM embedded for this hour
    staleness_hours_mean: float | None  # age of the pair embeddings served this hour
    # What the precompute's next run records for this hour (solaris.precompute.quality); the defaults read a
    # report written before them. A hit is a pair requested as a candidate while fresh.
    candidates: int = 0  # the hour's (request, candidate) rows
    covered_candidates: int = 0  # of them, rows with a fresh pair code
    hit_rate_ttl: float | None = None  # ttl_hits / ttl_pairs: the pairs whose TTL ended with this hour
    ttl_pairs: int = 0
    ttl_hits: int = 0
    # Of that run's scored pool, the pairs requested while fresh: no selection of ttl_pairs could hit more
    # (quality.hit_ceiling); None where that run scored no pool (quality.pool_requested) or in an older report.
    ttl_pool_requested: int | None = None
    requested_auc: float | None = None  # selector AUC on those pairs' run's scored pool; None: one class only
    coverage_marginal: dict[str, float] = field(default_factory=dict)  # share fed first by each tier


@dataclass(frozen=True)
class SweepPoint:
    """The evaluation span replayed with another precompute budget; NE of the SOLARIS VM (all tiers)."""

    top_fraction: float
    coverage: dict[str, float]
    ne: float
    transfer_ratio: float | None  # None where the FM's gain over the base VM is within its interval's width
    fm_calls_per_served_pair: float
    ne_ci95: Interval | None = None
    ne_gain: float | None = None  # over the base VM on the same hours
    ne_gain_ci95: Interval | None = None
    transfer_ratio_ci95: Interval | None = None
    fm_calls_per_covered_candidate: float | None = None  # None: nothing covered (or an older report)


@dataclass(frozen=True)
class SpeculationPoint:
    """One selector at one FM budget over the arms' served hours (#15's comparison). For a ``verifier`` arm
    ``fm_budget`` is what its ``top_fraction`` spent per served hour (the budget arm beside it gets that)."""

    selector: str
    fm_budget: int
    top_fraction: float | None
    fm_calls: int  # over the served hours
    coverage_pair: float  # share of served impressions fed by a fresh pair code
    hit_rate_ttl: float | None
    requested_auc: float | None
    fm_calls_per_covered_candidate: float | None
    ne: float  # the SOLARIS VM (all tiers) on what the arm served
    ne_ci95: Interval | None = None
    hit_ceiling_ttl: float | None = None  # the most hit_rate_ttl could be on the arm's pools (None: older report)
    # A budget arm's NE gain over the verifier arm it is set against (the one whose spend it got, or the default
    # verifier for the third-of-its-calls arm; positive: the budget arm is better), paired over the same requests;
    # None for a verifier arm and in an older report.
    ne_gain_vs_verifier: float | None = None
    ne_gain_vs_verifier_ci95: Interval | None = None


@dataclass(frozen=True)
class CurvePoint:
    """One arm of the capacity plan's curve (:mod:`solaris.eval.plan`): a selector at one spend and TTL over the
    arms' served hours, the SOLARIS VM's NE on what it served, and that NE against its selector's full-budget
    arm's (:func:`~solaris.eval.capacity.full_budgets`), paired over the same requests. ``spend`` names the
    budget the same way on every seed ("top 0.1": the verifier at top_fraction 0.1, or the budget selector given
    what that verifier spent), so a plan can pool seeds whose worlds spend differently."""

    selector: str
    spend: str
    ttl_hours: int
    min_demand: float
    fm_budget: int | None  # the budget selector's; None for a verifier arm
    top_fraction: float | None  # the verifier's; None for a budget arm
    fm_calls_per_hour: float
    coverage_pair: float
    hit_rate_ttl: float | None
    ne: float
    ne_ci95: Interval
    ne_loss: float  # this arm's NE minus its selector's full-budget arm's: > 0 where spending less costs NE
    ne_loss_ci95: Interval
    full_budget: bool = False  # the reference of its selector's arms (False throughout: a replay before 2026-12-08)

    @property
    def key(self) -> tuple[str, str, int, float]:
        """What identifies the arm across seeds."""
        return self.selector, self.spend, self.ttl_hours, self.min_demand


@dataclass(frozen=True)
class TierContribution:
    """What one tier adds to the SOLARIS VM on the evaluation span: the ladder's VM that sees the tiers before
    it (the base VM for the first) against the one that also sees it, on the same served events."""

    tier: str
    without: str  # the model that lacks the tier
    with_tier: str  # the model that has it
    ne_gain: float  # NE without minus NE with, the mean over training runs paired by seed: > 0 where the tier helps
    ne_gain_ci95: Interval
    coverage_marginal: float  # the eval span's share of served pairs the tier fed first
    ne_gain_runs_sd: float | None = None  # its sd over those runs (None: one run, or an older report)

    @property
    def measurable(self) -> bool:
        """Whether the gain exceeds both its noises: its interval over requests excludes 0 and it is larger
        than its spread over training runs (two variants' runs differ even where their inputs would not)."""
        beyond_requests = self.ne_gain_ci95[0] > 0 or self.ne_gain_ci95[1] < 0
        return beyond_requests and abs(self.ne_gain) > (self.ne_gain_runs_sd or 0.0)


@dataclass(frozen=True)
class Slice:
    """The evaluation span's impressions of ids no training step of the serving FM looked up (``new items``,
    ``new users``: launched or signed up since it last trained), every model scored on them alone, as in the main table:
    whether what a model knows of a new id carries over (side features, counters, history) or lived only in id
    rows. ``models`` is empty where the slice is too small to score."""

    name: str
    share: float  # of the evaluation span's impressions
    events: int
    models: list[ModelScore]


@dataclass(frozen=True)
class ReplayReport:
    world: str
    seed: int
    spans: dict[str, str]  # "train" / "logging" / "eval" -> "start/end"
    models: list[ModelScore]
    hours: list[HourFigures]
    sweep: list[SweepPoint]
    swept_fractions: list[float]  # what the sweep was asked for (empty: no sweep), so a missing arm shows
    fm_calls_per_served_pair: float
    staleness_hours: dict[str, float]  # mean / p50 / p90 / max over pair-tier rows served in the eval span
    seconds: dict[str, float] = field(default_factory=dict)
    # How the figures were made: "fm_refresh" (how often the FM is retrained while the log replays) and
    # "fm_reference" (a sentence: which FM the transfer ratio divides by, scored on what).
    protocol: dict[str, object] = field(default_factory=dict)
    fm_versions: list[dict[str, str]] = field(default_factory=list)  # version and first serving hour
    invariants: dict[str, list[str]] = field(default_factory=dict)  # "checked" and "violated", when written
    # The eval span's precompute efficiency (replay.efficiency): hit rate while fresh, selector AUC, FM calls
    # per candidate row the pair tier covered and its inverse; empty in a report written before it.
    efficiency: dict[str, float | None] = field(default_factory=dict)
    speculation: list[SpeculationPoint] = field(default_factory=list)  # empty: not compared
    # The eval span's share of served pairs each tier fed first, in the feeding order; and each tier's NE
    # contribution (empty in a report written before them).
    coverage_marginal: dict[str, float] = field(default_factory=dict)
    tier_contributions: list[TierContribution] = field(default_factory=list)
    slices: list[Slice] = field(default_factory=list)  # empty in a report written before them
    # The eval span's share of impressions whose user a run before their hour could know (eval.ceiling): the
    # most any tier can cover; None in a report written before it.
    users_known: float | None = None
    # Every configured VM (the lead's models are the top-level ``models``); empty in a report written before.
    per_vm: dict[str, VMFigures] = field(default_factory=dict)
    # The capacity plan's arms (empty: the replay ran no arms, or a report written before them), and the plan
    # this seed alone gives (solaris.eval.plan; empty where there is none).
    curve: list[CurvePoint] = field(default_factory=list)
    plan: dict[str, object] = field(default_factory=dict)
    commit: str | None = None  # the source the replay ran (git), so a plan can say what it came from
    # The budget arms' demand models' validation AUC by the TTL they predict for (str: JSON keys), as production's
    # fallback reads it (solaris.precompute.selector_choice); empty: no budget arm ran.
    demand_valid_auc: dict[str, float] = field(default_factory=dict)

    @property
    def replayed_world(self) -> str:
        """What every seed of its replay shares (a preset's seeds are each their own world)."""
        return replayed_world(self.world, self.seed)

    def model(self, name: str) -> ModelScore:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(f"no model {name!r} in the report; have {', '.join(m.name for m in self.models)}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def write_json(self, path: Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> ReplayReport:
        raw = json.loads(text)
        return cls(
            **raw
            | {
                "models": [ModelScore(**m) for m in raw["models"]],
                "hours": [HourFigures(**h) for h in raw["hours"]],
                "sweep": [SweepPoint(**s) for s in raw["sweep"]],
                "speculation": [SpeculationPoint(**s) for s in raw.get("speculation", [])],
                "curve": [CurvePoint(**c) for c in raw.get("curve", [])],
                "tier_contributions": [TierContribution(**c) for c in raw.get("tier_contributions", [])],
                "slices": [
                    Slice(**c | {"models": [ModelScore(**m) for m in c["models"]]}) for c in raw.get("slices", [])
                ],
                "per_vm": {
                    name: VMFigures(**v | {"models": [ModelScore(**m) for m in v["models"]]})
                    for name, v in raw.get("per_vm", {}).items()
                },
            }
        )
