"""Ablation (not a headline figure): how the VM variants are trained on served hours decides whether a tier
can make the VM worse. Re-trains and re-scores every variant of a finished replay (its served features, FM
versions and first-stage VMs, read back from its state folder) under several rules, each over the same VM
training seeds, and prints each variant's NE gain over the base VM and each tier's contribution.

Arms (``solaris.eval.judging.VMTraining``): where an FM-reading variant's refresh starts (``start``: its own
first stage, the replay until this ablation; the refreshed base VM with its FM inputs at zero weight and that
start kept unless an epoch beats it; or both, the one better on the validation hours kept, the default);
``batch 64``: eight times the optimiser steps an epoch (a small log's epoch is a few dozen steps); ``8 validation
hours``: early stopping and the choice of start on more rows; ``2 threads``: the same runs, a sum's order
changed; ``every logging hour``: the FM-reading variants learn from earlier FM versions' codes too (three
times the rows on MovieLens; never the replay's rule). docs/ablations.md holds the figures, and those of arms
since removed (each tier hidden from 30% of training rows; only the tier inputs' weights trained).

    .venv/bin/python ablations/vm_tiers.py var/replay/ml100k/seed-0 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import torch

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.eval.events import ServedEvents, concat, served_events
from solaris.eval.figures import ReplayReport
from solaris.eval.judging import VMTraining, judge_vm
from solaris.eval.loop import isolated_settings
from solaris.eval.protocol import ALL_TIERS, VM_BASE
from solaris.eval.report.tables import TIER_LABELS
from solaris.eval.scoring import tier_contributions
from solaris.eval.spans import ReplaySpans
from solaris.eval.variants import TIER_STEPS
from solaris.models import metrics
from solaris.models.splits import Span
from solaris.models.vm import VerticalModel
from solaris.serving.servedlog import served_dir
from solaris.tracking import registry
from solaris.training.jobs import TrainPlan, World

ARMS = {
    "own first stage": VMTraining(start="own"),
    "from base": VMTraining(start="base"),
    "better on validation": VMTraining(start="better"),
    "from base, batch 64": VMTraining(start="base", fit=replace(VMTraining().fit, batch_size=64)),
    "better, 8 validation hours": VMTraining(valid_hours=8),
    "own first stage, 8 validation hours": VMTraining(start="own", valid_hours=8),
    # The same runs on two threads: a sum's order changes its last bits, and a training run its course.
    "own first stage, 2 threads": VMTraining(start="own", fit=replace(VMTraining().fit, threads=2)),
    "better on validation, 2 threads": VMTraining(start="better", fit=replace(VMTraining().fit, threads=2)),
    "better, every logging hour (mixes FM versions)": VMTraining(),
}
EVERY_HOUR = {"better, every logging hour (mixes FM versions)"}
SHOWN = ("VM distilled", *(to for _, _, to in TIER_STEPS), "SOLARIS all+distill")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("replay", type=Path, help="one seed's replay output (<out>/seed-N, holding report/ and state/)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(VMTraining().seeds), help="VM training seeds")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), metavar="ARM")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    served = ServedReplay.open(args.replay)
    print(
        f"ABLATION {served.report.world} seed {served.report.seed}: VM {served.vm}, {len(served.evaluation)} "
        f"evaluation events, VM training seeds {args.seeds}"
    )
    for arm in args.arms:
        training = replace(ARMS[arm], seeds=tuple(args.seeds))
        # Every logging hour for the FM-reading variants too, earlier FM versions' codes included: how much more
        # served data would buy (never the replay's rule: a VM is fed one version's codes only).
        serving_from = served.logging_start if arm in EVERY_HOUR else served.serving_from
        judged = judge_vm(
            training,
            served.first_stage,
            served.logging,
            served.evaluation,
            serving_from,
            served.version,
            served.report.seed,
        )
        scores = {m.name: m for m in judged.scores}
        print(f"\n{arm}: NE gain over the base VM (sd over runs) [95% interval over requests]")
        for name in SHOWN:
            m = scores[name]
            print(
                f"  {name:<22} {m.ne_gain:+.4f} (sd {m.ne_gain_runs_sd or 0:.4f}) "
                f"[{m.ne_gain_ci95[0]:+.4f}, {m.ne_gain_ci95[1]:+.4f}]"
            )
        runs = [metrics.summary(judged.events.label, p)["ne"] for p in judged.probs[ALL_TIERS]]
        base_runs = [metrics.summary(judged.events.label, p)["ne"] for p in judged.probs[VM_BASE]]
        print(
            "  all tiers, each run's NE gain: "
            + ", ".join(f"{b - x:+.4f}" for b, x in zip(base_runs, runs, strict=True))
        )
        transfer = scores[ALL_TIERS].transfer_ratio
        print(
            f"  transfer, all tiers: {'—' if transfer is None else f'{transfer:.1%}'}; base VM NE {scores[VM_BASE].ne:.4f}"
        )
        for c in tier_contributions(
            judged.events.label, judged.events.requests, judged.probs, TIER_STEPS, {}, served.report.seed
        ):
            verdict = ("a gain" if c.ne_gain > 0 else "a loss") if c.measurable else "nothing measurable"
            print(
                f"  tier {TIER_LABELS[c.tier]:<24} {c.ne_gain:+.4f} (sd {c.ne_gain_runs_sd or 0:.4f}) "
                f"[{c.ne_gain_ci95[0]:+.4f}, {c.ne_gain_ci95[1]:+.4f}] {verdict}",
                flush=True,
            )
    return 0


class ServedReplay:
    """A finished replay's lead VM as its judging step saw it: served events, first stage, serving version."""

    def __init__(
        self,
        report: ReplayReport,
        vm: str,
        first_stage: dict[str, VerticalModel],
        logging: ServedEvents,
        evaluation: ServedEvents,
        serving_from: datetime,
        version: str,
    ) -> None:
        self.report, self.vm, self.first_stage = report, vm, first_stage
        self.logging, self.evaluation, self.serving_from, self.version = logging, evaluation, serving_from, version
        self.logging_start = datetime.fromtimestamp(int(logging.hours.min()) * 3600, UTC)

    @classmethod
    def open(cls, out: Path) -> ServedReplay:
        report = ReplayReport.from_json((out / "report" / "report.json").read_text())
        state = out / "state"
        log_root = (state / "main" / "var" / "worlds").resolve() / "replay"
        settings = isolated_settings(Settings.from_env(), state / "main", log_root.resolve(), state / "mlflow")
        if (state / "vms.toml").is_file():
            settings = settings.with_overrides(vms_file=state / "vms.toml")
        client = registry.connect(settings)
        log = EventLog(log_root.resolve())
        spans = ReplaySpans.of(log)
        world = World.open(log.root, TrainPlan().fractions, spans.train.end)
        spec = settings.vms()[0]
        versions = report.fm_versions
        starts = [datetime.fromisoformat(v["first_serving_hour"]) for v in versions]
        ends = [*starts[1:], spans.eval.start]
        code_dim = registry.load_ae(versions[-1]["ae_version"]).config.code_dim
        folder = served_dir(settings.served_root, spec.name)

        def events(version: dict[str, str], span: Span) -> ServedEvents:
            fm = registry.load_fm(version["fm_version"])
            found = served_events(
                log, span, folder, version["embedding_version"], code_dim, fm, world.index, "cpu", [spec]
            )
            return found[spec.name]

        logging = concat([events(v, Span(a, b)) for v, a, b in zip(versions, starts, ends, strict=True)])
        evaluation = events(versions[-1], spans.eval)
        first = versions[0]["embedding_version"]
        first_stage = {}
        for mv in client.search_model_versions(f"name='{spec.registered_name}'", order_by=["version_number ASC"]):
            variant = mv.tags.get("variant")
            if variant and variant not in first_stage and mv.tags.get("embedding_version", first) == first:
                first_stage[variant] = registry.load_vm(spec.name, mv.version)
        return cls(report, spec.name, first_stage, logging, evaluation, starts[-1], versions[-1]["embedding_version"])


if __name__ == "__main__":
    sys.exit(main())
