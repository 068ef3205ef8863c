"""What every part of bench_serving shares: the VM it serves (the SOLARIS variant at VMConfig's default size,
random weights, on the default synthetic world's side features) and the moment its requests are at."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch
from bench_store import DIM, HOUR, ITEM_POOL, T0

from solaris.models.features import IdTable
from solaris.models.vm import VerticalModel, VMConfig
from solaris.serving.champion import ServingModel
from solaris.tracking.registry import PinnedVersions

AT = T0 + HOUR / 2  # every row written by bench_store.fill is fresh
BENCH_VM = "bench"  # the name the bench's VM serves under (its metrics' vm label)
# The default synthetic world's side features and their cardinalities (solaris.data.synthetic).
USER_SIDE = {"u_country": 8, "u_age_bucket": 6, "u_device": 3}
ITEM_SIDE = {"i_category": 20, "i_advertiser": 120, "i_price_bucket": 5}


def side_table(n: int, id_column: str, prefix: str, cardinalities: dict[str, int], seed: int) -> IdTable:
    rng = np.random.default_rng(seed)
    columns = {id_column: np.arange(n)} | {name: rng.integers(0, c, n) for name, c in cardinalities.items()}
    return IdTable.from_table(pa.table(columns), id_column, prefix)


def serving_model(version: str, n_users: int, seed: int = 0) -> ServingModel:
    """A SOLARIS VM of the real size with random weights, bound to the store's embedding version."""
    torch.manual_seed(seed)
    config = VMConfig(variant="solaris", code_dim=DIM, embedding_version=version)
    users = side_table(n_users, "user_id", "u_", USER_SIDE, seed)
    items = side_table(ITEM_POOL, "item_id", "i_", ITEM_SIDE, seed + 1)
    vm = VerticalModel(config, users, items).eval()
    return ServingModel(vm, PinnedVersions(fm="1", ae="1", vm="bench", embedding_version=version, vm_name=BENCH_VM))
