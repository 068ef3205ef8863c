"""Hand-built capacity-plan curves whose knee is known: the plan's tests and the health page's."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from solaris.config import Settings
from solaris.eval.figures import CurvePoint, ReplayReport, SpeculationPoint
from solaris.eval.plan import PLAN_FOLDER, make_plan

# The budget selector at four spends, ttl 4 h: the loss against its full budget falls as the spend grows, and
# only the cheapest two are beyond their intervals.
BUDGET_CURVE = (  # (spend, FM calls an hour, NE loss, its interval)
    ("top 0.2 / 3", 1_000, 0.0100, (0.0080, 0.0120)),
    ("top 0.1", 2_000, 0.0040, (0.0030, 0.0050)),
    ("top 0.2", 4_000, 0.0005, (-0.0002, 0.0012)),
    ("top 0.4", 8_000, 0.0000, (0.0000, 0.0000)),
)


def point(spend: str, calls: float, loss: float, ci: tuple[float, float], **kw: object) -> CurvePoint:
    fields = {
        "selector": "budget",
        "spend": spend,
        "ttl_hours": 4,
        "min_demand": 0.0,
        "fm_budget": round(calls),
        "top_fraction": None,
        "fm_calls_per_hour": calls,
        "coverage_pair": 0.5,
        "hit_rate_ttl": 0.3,
        "ne": 0.9 + loss,
        "ne_ci95": [0.89 + loss, 0.91 + loss],
        "ne_loss": loss,
        "ne_loss_ci95": list(ci),
    }
    fields |= kw
    # each selector's reference as a replay declares it: its largest spend, at the replay's TTL, no floor
    fields.setdefault("full_budget", (fields["spend"], fields["ttl_hours"], fields["min_demand"]) == ("top 0.4", 4, 0))
    return CurvePoint(**fields)


def verifier(budget: int, fraction: float) -> SpeculationPoint:
    return SpeculationPoint("verifier", budget, fraction, budget * 6, 0.5, 0.3, 0.8, 0.1, 0.9)


def budget_at(budget: int, gain: float, ci: tuple[float, float]) -> SpeculationPoint:
    return SpeculationPoint("budget", budget, None, budget * 6, 0.5, 0.3, 0.8, 0.1, 0.9, None, None, gain, list(ci))


BEATS = [verifier(2_000, 0.1), budget_at(2_000, 0.002, (0.001, 0.003)), budget_at(666, -0.01, (-0.02, -0.005))]


def report(curve: list[CurvePoint], seed: int = 0, speculation: list[SpeculationPoint] = BEATS) -> ReplayReport:
    return ReplayReport(
        world="synthetic",
        seed=seed,
        spans={},
        models=[],
        hours=[],
        sweep=[],
        swept_fractions=[],
        fm_calls_per_served_pair=0.0,
        staleness_hours={},
        speculation=speculation,
        curve=curve,
        commit="abc123",
    )


CURVE = [point(*row) for row in BUDGET_CURVE]


def write_plan(settings: Settings, text: str | None = None, world: str = "synthetic") -> Path:
    """A plan of :data:`CURVE` (or ``text``) where a replay of ``world`` writes it."""
    folder = settings.data_dir / "replay" / world / PLAN_FOLDER
    folder.mkdir(parents=True)
    plan = make_plan([replace(report(CURVE), world=world)])
    (path := folder / "plan.json").write_text(text or json.dumps(plan.as_dict()))
    return path
