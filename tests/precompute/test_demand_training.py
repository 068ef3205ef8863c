"""The demand model learns only from hours whose label window closed before ``until``."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import torch
from precompute_logs import T0, LogFactory, Request

from solaris.models.training import FitConfig
from solaris.training.demand_fit import DemandPlan, train_demand, training_hours

H = timedelta(hours=1)
TTL = 2
PLAN = DemandPlan(
    train_hours=6, valid_hours=2, negative_rate=1.0, fit=FitConfig(epochs=2, batch_size=256, progress=False, threads=1)
)
UNTIL = T0 + 40 * H


def traffic() -> list[Request]:
    """40 users over 48 hours: each returns every few hours and is shown items from a personal pool."""
    rng = np.random.default_rng(0)
    requests = []
    for user in range(40):
        pool = rng.choice(60, 8, replace=False)
        every = int(rng.integers(2, 7))
        for hour in range(int(rng.integers(0, every)), 48, every):
            shown = rng.choice(pool, 4, replace=False).tolist()
            requests.append((T0 + hour * H + timedelta(minutes=int(rng.integers(60))), user, shown))
    return sorted(requests)


def weights(make_log: LogFactory, requests: list[Request]) -> dict[str, torch.Tensor]:
    return train_demand(make_log(requests), UNTIL, TTL, PLAN).model.state_dict()


def test_label_windows_close_by_until() -> None:
    train, valid = training_hours(UNTIL, TTL, PLAN)
    assert len(train) == PLAN.train_hours and len(valid) == PLAN.valid_hours
    assert max(valid) + TTL * H == UNTIL and max(train) < min(valid)


def test_a_request_planted_at_until_is_not_learned(make_log: LogFactory) -> None:
    base = traffic()
    trained = weights(make_log, base)
    planted = [(UNTIL, user, list(range(60))) for user in range(40)]  # every pair requested at until
    assert all(torch.equal(trained[k], v) for k, v in weights(make_log, base + planted).items())
    # control: the same requests an hour earlier fall inside the last label window and change the model
    inside = [(UNTIL - H, user, list(range(60))) for user in range(40)]
    assert not all(torch.equal(trained[k], v) for k, v in weights(make_log, base + inside).items())
