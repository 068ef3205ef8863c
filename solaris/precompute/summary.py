"""Per-hour figures of precompute runs in MLflow: written by the ``finish`` step, read back, and their table.

Each run is logged to the ``solaris-precompute`` experiment, tagged with its run key; the reader serves the
main job's report (and anyone comparing runs without the MLflow UI).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mlflow
from solaris.config import Settings
from solaris.enrichment.tiers import FED_BY
from solaris.precompute.pipeline import OPEN, PRECOMPUTE, SHADOW
from solaris.precompute.spec import HourRun
from solaris.tracking import registry

EXPERIMENT = "solaris-precompute"
COVERAGE = (*(f"coverage_{tier}" for tier in FED_BY), "coverage_any", "hit_rate")
# Efficiency (solaris.precompute.quality): hit rate while fresh and the selector's AUC of the run whose pairs
# just expired, FM calls per candidate row the pair tier covered. A run may lack one (nothing to measure).
EFFICIENCY = ("hit_rate_ttl", "hit_ceiling_ttl", "requested_auc", "fm_calls_per_covered_candidate")
COUNTS = ("count_pool", "count_selected", "count_pairs_written")
STEPS = (OPEN, *PRECOMPUTE.names)
SHADOW_STEPS = tuple(s for s in STEPS if s.startswith(SHADOW))  # one column in the table: what the shadow cost


def log_run(
    run: HourRun,
    settings: Settings,
    counts: Mapping[str, int],
    timings: Mapping[str, float],
    figures: Mapping[str, float],
) -> None:
    """One MLflow run per precompute run: its versions and params, counts, seconds per step and figures."""
    client = registry.connect(settings)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, EXPERIMENT))
    with mlflow.start_run(run_name=run.run_key):
        mlflow.set_tags({"run_key": run.run_key, "embedding_version": run.embedding_version})
        versions = {"fm_version": run.fm_version, "ae_version": run.ae_version, "vm_version": run.vm_version}
        versions["demand_version"] = run.demand_version or "none"
        versions["shadow_vm_version"] = run.shadow.vm_version if run.shadow else "none"
        mlflow.log_params(versions | {k: str(v) for k, v in vars(run.params).items()})
        mlflow.log_metrics(
            {f"count_{k}": float(v) for k, v in counts.items()}
            | {f"seconds_{k}": v for k, v in timings.items()}
            | dict(figures)
        )


def run_metrics(settings: Settings, run_keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """The latest logged metrics of each run key; a key never logged is an error naming it."""
    client = registry.connect(settings)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        raise ValueError(f"no MLflow experiment {EXPERIMENT!r}: no precompute run has finished yet")
    found = {}
    for key in run_keys:
        latest = ["attributes.start_time DESC"]
        runs = client.search_runs([experiment.experiment_id], f"tags.run_key = '{key}'", order_by=latest, max_results=1)
        if not runs:
            raise ValueError(f"precompute run {key!r} has no MLflow record; did it finish?")
        found[key] = dict(runs[0].data.metrics)
    return found


def table(metrics: dict[str, dict[str, float]]) -> str:
    """Two blocks: counts, coverage by tier of the hour before, hit rates, efficiency; then seconds per step."""
    figures = (*COVERAGE, *EFFICIENCY)
    head = ["run", *(c.removeprefix("count_") for c in COUNTS), *figures]
    rows = [
        [key, *(f"{m.get(c, 0):.0f}" for c in COUNTS), *(f"{m[c]:.3f}" if c in m else "-" for c in figures)]
        for key, m in metrics.items()
    ]
    own = [s for s in STEPS if s not in SHADOW_STEPS]
    steps = [["run", *own, "shadow", "total"]]
    for key, m in metrics.items():
        seconds = [m.get(f"seconds_{s}", 0.0) for s in own] + [sum(m.get(f"seconds_{s}", 0.0) for s in SHADOW_STEPS)]
        steps.append([key, *(f"{s:.2f}" for s in seconds), f"{sum(seconds):.2f}"])
    return _grid([head, *rows]) + "\n\nseconds per step\n" + _grid(steps)


def _grid(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
