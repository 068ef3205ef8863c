"""The replay as a job (the CLI and the ``solaris_replay`` DAG call this): one replay per seed, each report
written to its folder (HTML, PNGs, JSON) and logged to the user's MLflow, and a summary across seeds."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import mlflow
from solaris.config import Settings
from solaris.eval import report as render
from solaris.eval.arms import mean_coverage
from solaris.eval.figures import ReplayReport
from solaris.eval.judging import VMTraining
from solaris.eval.plan import make_plan
from solaris.eval.protocol import (
    DEFAULT_FM_REFRESH,
    PLAN_MIN_DEMAND,
    PLAN_TTL_HOURS,
    REPLAY_KNOBS,
    SWEEP_WARMUP_HOURS,
    VM_SEEDS,
    check_fm_refresh,
    seed_world,
)
from solaris.eval.replay import ReplayConfig, run_replay
from solaris.precompute.params import PrecomputeParams
from solaris.tracking import registry

EXPERIMENT = "solaris-replay"


@dataclass(frozen=True)
class ReplayRequest:
    preset: str | None = None
    world: str | None = None
    log: Path | None = None
    seeds: tuple[int, ...] = (0,)
    knobs: Mapping[str, float] = field(default_factory=dict)  # of REPLAY_KNOBS; the others keep their defaults
    out: Path | None = None
    sweep: bool = True
    speculation: bool = True  # compare the selectors at equal FM budgets
    sweep_warmup_hours: int = SWEEP_WARMUP_HOURS
    sweep_hours: int | None = None
    fm_refresh: str = DEFAULT_FM_REFRESH
    vm_seeds: tuple[int, ...] = VM_SEEDS  # one training run of every VM variant per seed
    plan: bool = True  # run the capacity plan's grid arms and write its plan
    plan_ttl_hours: tuple[int, ...] = PLAN_TTL_HOURS
    plan_min_demand: tuple[float, ...] = PLAN_MIN_DEMAND

    def __post_init__(self) -> None:
        check_fm_refresh(self.fm_refresh)
        if bad := [t for t in self.plan_ttl_hours if t < 1]:
            raise ValueError(f"--plan-ttl-hours must each be at least 1, got {', '.join(map(str, bad))}")
        if bad := [f for f in self.plan_min_demand if not 0 <= f <= 1]:
            raise ValueError(f"--plan-min-demand must each be in [0, 1], got {', '.join(map(str, bad))}")
        VMTraining(seeds=self.vm_seeds)  # distinct and at least one, named on error
        if self.sweep_warmup_hours < 0:
            raise ValueError(f"--sweep-warmup-hours must be at least 0, got {self.sweep_warmup_hours}")
        if self.sweep_hours is not None and self.sweep_hours < 1:
            raise ValueError(f"--sweep-hours must be at least 1, got {self.sweep_hours}")
        if sum(x is not None for x in (self.preset, self.world, self.log)) != 1:
            raise ValueError("a replay needs exactly one of preset, world or log")
        if not self.seeds:
            raise ValueError("a replay needs at least one seed")
        if unknown := sorted(set(self.knobs) - set(REPLAY_KNOBS)):
            raise ValueError(f"a replay takes the knobs {', '.join(REPLAY_KNOBS)}, not {', '.join(unknown)}")
        PrecomputeParams.from_mapping(dict(self.knobs))  # bounds, named on error

    @property
    def plans(self) -> bool:
        """Whether a plan follows the seeds: asked for, and arms to plan from."""
        return self.plan and (self.sweep or self.speculation)

    @property
    def name(self) -> str:
        return self.preset or self.world or Path(self.log).name  # type: ignore[arg-type]


def log_root(settings: Settings, request: ReplayRequest, seed: int) -> Path:
    """The event log of one seed: a preset is generated per seed (once), a world or log is used as it is."""
    if request.log is not None:
        return Path(request.log)
    if request.world is not None:
        return settings.world_dir(request.world)
    from solaris.data.synthetic import generate_world, preset

    root = settings.world_dir(seed_world(request.preset, seed))
    if not (root / "meta.json").exists():
        generate_world(preset(request.preset).with_seed(seed), root, overwrite=True, progress=False)
    return root


def replay_config(
    settings: Settings, request: ReplayRequest, seed: int, base: ReplayConfig = ReplayConfig()
) -> ReplayConfig:
    return replace(
        base,
        seed=seed,
        **request.knobs,
        sweep=base.sweep if request.sweep else (),
        speculation=base.speculation if request.speculation else (),
        sweep_warmup_hours=request.sweep_warmup_hours,
        sweep_hours=request.sweep_hours,
        fm_refresh=request.fm_refresh,
        vm_training=replace(base.vm_training, seeds=request.vm_seeds),
        plan_ttl_hours=request.plan_ttl_hours if request.plan else (),
        plan_min_demand=request.plan_min_demand if request.plan else (),
        device="cpu" if settings.device == "auto" else settings.device,
    )


def replay_one(settings: Settings, request: ReplayRequest, seed: int, config: ReplayConfig = ReplayConfig()) -> Path:
    """One seed's replay; its report (HTML, PNGs, report.json) goes to a folder and to MLflow. Returns the
    report folder."""
    folder = (request.out or settings.data_dir / "replay" / request.name) / f"seed-{seed}"
    config = replay_config(settings, request, seed, config)
    report = replace(
        run_replay(settings, log_root(settings, request, seed), folder / "state", config), commit=source_commit()
    )
    if report.curve:
        report = replace(report, plan=make_plan([report]).as_dict())
    render.write_html(report, folder / "report")
    log_to_mlflow(settings, report, folder / "report")
    return folder / "report"


def violated(report_folders: list[Path]) -> dict[str, list[str]]:
    """The invariants each seed's report.json records as broken, by report folder (only folders with any)."""
    found = {}
    for folder in report_folders:
        report = ReplayReport.from_json((folder / "report.json").read_text())
        if broken := report.invariants["violated"] if report.invariants else render.check_invariants(report):
            found[str(folder)] = broken
    return found


def summary(report_folders: list[Path]) -> str:
    """Each seed's table, invariant violations named, then the spread across seeds."""
    reports = [ReplayReport.from_json((f / "report.json").read_text()) for f in report_folders]
    parts = []
    for report, folder in zip(reports, report_folders, strict=True):
        parts += [render.table(report), f"report: {folder / 'report.html'}"]
        broken = render.check_invariants(report)
        if broken:
            parts.append("INVARIANTS VIOLATED:\n" + "\n".join(f"- {b}" for b in broken))
    if len(reports) > 1:
        parts.append(render.seeds_table(reports))
    return "\n\n".join(parts)


def source_commit() -> str | None:
    """The git commit of the source this replay runs (None outside a git checkout), so its figures and plan
    say what they came from; a checkout with changes not committed says so."""
    here = Path(__file__).parent

    def git(*args: str) -> str | None:
        found = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, check=False)
        return found.stdout.strip() if found.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if commit is None:
        return None
    return commit + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def metric_name(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_").lower()


def log_to_mlflow(settings: Settings, report: ReplayReport, folder: Path) -> None:
    client = registry.connect(settings)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, EXPERIMENT))
    eval_hours = [h for h in report.hours if h.span == "eval"]
    with mlflow.start_run(run_name=f"replay-{report.world}-seed{report.seed}"):
        mlflow.log_params(
            {
                "world": report.world,
                "seed": report.seed,
                **report.protocol,
                **{f"span_{k}": v for k, v in report.spans.items()},
            }
        )
        for m in report.models:
            key = metric_name(m.name)
            mlflow.log_metrics({f"ne_{key}": m.ne, f"auc_{key}": m.auc, f"log_loss_{key}": m.log_loss})
            with_ci = (("ne_gain", m.ne_gain, m.ne_gain_ci95), ("transfer", m.transfer_ratio, m.transfer_ratio_ci95))
            for name, value, ci in with_ci:
                if value is not None:
                    mlflow.log_metric(f"{name}_{key}", value)
                if ci is not None:
                    mlflow.log_metrics({f"{name}_{key}_ci95_low": ci[0], f"{name}_{key}_ci95_high": ci[1]})
        if eval_hours:
            mlflow.log_metrics({f"coverage_eval_{k}": v for k, v in mean_coverage(eval_hours).items()})
        mlflow.log_metrics({f"coverage_marginal_eval_{k}": v for k, v in report.coverage_marginal.items()})
        for c in report.tier_contributions:
            low, high = c.ne_gain_ci95
            mlflow.log_metrics(
                {
                    f"tier_ne_gain_{c.tier}": c.ne_gain,
                    f"tier_ne_gain_{c.tier}_ci95_low": low,
                    f"tier_ne_gain_{c.tier}_ci95_high": high,
                }
            )
        mlflow.log_metrics(
            {"fm_calls_per_served_pair": report.fm_calls_per_served_pair}
            | {f"staleness_hours_{k}": v for k, v in report.staleness_hours.items()}
            | {f"efficiency_{k}": float(v) for k, v in report.efficiency.items() if v is not None}
        )
        for p in report.speculation:
            key = f"speculation_{p.selector}_{p.fm_budget}"
            mlflow.log_metrics(
                {
                    f"{key}_{k}": float(v)
                    for k, v in (
                        ("coverage_pair", p.coverage_pair),
                        ("fm_calls", p.fm_calls),
                        ("ne", p.ne),
                        ("hit_rate_ttl", p.hit_rate_ttl),
                        ("hit_ceiling_ttl", p.hit_ceiling_ttl),
                        ("requested_auc", p.requested_auc),
                        ("ne_gain_vs_verifier", p.ne_gain_vs_verifier),
                    )
                    if v is not None
                }
            )
        mlflow.log_artifacts(str(folder), artifact_path="report")
