"""Model cost and the autoencoder's price: params and FLOPs per pair, embed/score throughput, raw vs code.

Baselines come from the same run: the FM's cost and throughput are set against the base VM's on the same
pairs, and the SOLARIS VM fed the 32-d AE code is set against the same VM fed the raw 256-d FM embedding
(same FM, same hours, every pair present), which is how much predictive value the compression keeps.
The cost table needs no training; the raw-vs-code rows train an FM, an AE and two VMs on the world.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from solaris.data.synthetic import PRESETS, generate_world
from solaris.models import metrics
from solaris.models.autoencoder import AEConfig
from solaris.models.cost import flops_per_pair, parameter_count
from solaris.models.features import fm_matrix
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.training import FitConfig, embed_span, train_ae, train_fm, train_vm
from solaris.models.vm import VARIANTS, VerticalModel, VMConfig, score
from solaris.models.vm_data import Teacher
from solaris.precompute.params import PrecomputeParams
from solaris.training.jobs import World, vm_data


class RawTeacher(Teacher):
    """Feeds the VM the uncompressed FM embedding: the reference the AE code is measured against."""

    @property
    def embedding_version(self) -> str:
        return f"fm{self.fm_version}-raw-d{self.fm.config.embedding_dim}"

    def codes(self, embeddings: np.ndarray) -> np.ndarray:
        return embeddings


def rows_per_second(fn, x: np.ndarray, repeats: int) -> float:  # noqa: ANN001 - any batched scorer
    fn(x[:256])
    started = time.perf_counter()
    for _ in range(repeats):
        fn(x)
    return repeats * len(x) / (time.perf_counter() - started)


def cost_table(world: World, n_rows: int, repeats: int) -> list[tuple[str, int, float, float]]:
    span = world.split.eval
    x = fm_matrix(world.log.impressions(span.start, span.end).slice(0, n_rows), world.index, FMConfig().history)
    fm = FoundationModel(FMConfig(), world.users, world.items)
    rows = [
        (
            "FM (embed, cpu)",
            parameter_count(fm),
            flops_per_pair(fm, x[:256]),
            rows_per_second(lambda a: embed(fm, a, device="cpu"), x, repeats),
        )
    ]
    for variant in VARIANTS:
        config = VMConfig(variant=variant)
        vm = VerticalModel(config, world.users, world.items)
        width = len(config.columns())
        vx = np.concatenate([x[:, :4], np.zeros((len(x), width - 4), np.float32)], axis=1)
        rows.append(
            (
                f"VM {variant}",
                parameter_count(vm),
                flops_per_pair(vm, vx[:256]),
                rows_per_second(lambda a, m=vm: score(m, a), vx, repeats),
            )
        )
    return rows


def raw_vs_code(world: World, fit: FitConfig) -> list[tuple[str, float, float]]:
    split = world.split
    fm, _ = train_fm(world.log, split.fm_train, split.valid, world.index, world.users, world.items, FMConfig(), fit)
    train = embed_span(world.log, split.fm_train, world.index, fm, 100_000, fit.seed, "cpu")
    valid = embed_span(world.log, split.valid, world.index, fm, 100_000, fit.seed, "cpu")
    ae, ae_fit = train_ae(train, valid, AEConfig(fm_version="bench"), fit)
    rows = [("AE reconstruction error (share of variance)", ae_fit.best_valid_loss, float("nan"))]
    for name, teacher_type, dim in (("raw 256-d", RawTeacher, fm.config.embedding_dim), ("AE code 32-d", Teacher, 32)):
        teacher = teacher_type(fm, ae, "bench", "bench", "cpu")
        data = vm_data(world, teacher, PrecomputeParams.ttl_hours)
        config = VMConfig(variant="solaris", code_dim=dim, coverage=1.0)
        vm, _ = train_vm(data["vm_train"], data["valid"], world.users, world.items, config, fit)
        found = metrics.summary(data["eval"].label, score(vm, data["eval"].matrix(vm.config)))
        rows.append((f"VM solaris fed {name}: eval NE / AUC", found["ne"], found["auc"]))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny world, fewer repeats, cost table only")
    parser.add_argument("--preset", help="world preset (default: tiny with --quick, else default)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    preset = args.preset or ("tiny" if args.quick else "default")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / preset
        generate_world(PRESETS[preset].with_seed(0), root, overwrite=True, progress=False)
        world = World.open(root)
        print(f"world {preset}: {len(world.index)} impressions; torch threads 1")
        print(f"{'model':<22}{'params':>10}{'MFLOPs/pair':>13}{'pairs/s (cpu)':>15}")
        for name, params, flops, rate in cost_table(world, 2048 if args.quick else 16384, 2 if args.quick else 5):
            print(f"{name:<22}{params:>10,}{flops / 1e6:>13.3f}{rate:>15,.0f}")
        if not args.quick:
            print()
            for name, a, b in raw_vs_code(world, FitConfig(progress=False, threads=1)):
                print(f"{name:<48}{a:>10.4f}{b:>10.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
