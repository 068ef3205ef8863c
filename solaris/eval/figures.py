"""What a replay measured, as plain JSON-able dataclasses: the report renders them, tests check them, and
MLflow stores them as ``report.json``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

CUMULATIVE_TIERS = ("pair", "agg", "knn")  # coverage["agg"] is the share fed by pair OR aggregate, and so on
SWEEP_FRACTIONS = (0.05, 0.1, 0.2, 0.4)  # the top_fraction sweep the issue asks for


@dataclass(frozen=True)
class ModelScore:
    """One model on the evaluation span's served events; ``transfer_ratio`` is None for the FM itself, and
    for every model where the FM does not beat the base VM (no gain to transfer)."""

    name: str
    ne: float
    log_loss: float
    auc: float
    transfer_ratio: float | None


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


@dataclass(frozen=True)
class SweepPoint:
    """The evaluation span replayed with another precompute budget; NE of the SOLARIS VM (all tiers)."""

    top_fraction: float
    coverage: dict[str, float]
    ne: float
    transfer_ratio: float | None  # None where the FM does not beat the base VM
    fm_calls_per_served_pair: float


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
            }
        )
