"""Ablation (not a headline figure): how much pair coverage a better demand model could still buy, on a
synthetic world, whose ground truth knows when each user comes back.

Each arm spends the same FM budget every hour on the precompute's pool (the candidate generator plus the
re-queue, minus pairs that stay fresh through the hour), over the replay's served hours, ranked by:
- ``demand model``: P(requested while fresh) from the training job's features (the ``budget`` selector
  with equal cohort gains);
- ``+ true return rate``: the same model with one more input, the user's expected requests while fresh from
  the world's ground truth (request rate, daily cycle, signup): the best any estimate of a user's return
  from the log could do;
- ``future``: the pairs that will be requested first (no selector can know this: the pool's bound);
- ``min_demand F``: the demand model with the run's floor: no call on a pair less likely than F to be
  requested while fresh, even with budget left (what the floor trades: calls and coverage for hit rate).

Coverage is the share of the served hours' shown impressions with a fresh pair code, as the replay's
``coverage_pair`` (with a 95% bootstrap interval over requests and the paired difference to the demand
model), and of their (request, candidate) rows, as the run records'. Freshness is simulated from each pair's
last write, not read from a store, and every arm ranks by demand alone (equal cohort gains).

    .venv/bin/python ablations/demand_bound.py var/worlds/default2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.data.synthetic.config import WorldConfig
from solaris.data.synthetic.population import Users, make_users
from solaris.data.synthetic.simulate import expected_requests
from solaris.eval.bootstrap import RESAMPLES, interval, resample_weights
from solaris.eval.spans import ReplaySpans
from solaris.models.demand import DemandConfig, predict
from solaris.models.features import pair_key
from solaris.models.metrics import auc
from solaris.models.training import FitConfig
from solaris.precompute.demand_features import NAMES, demand_features
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.quality import requested_pairs
from solaris.training.demand_fit import DemandPlan, Rows, fit_demand, labelled_pool, training_hours

TRUE_RATE = "user_true_requests_while_fresh"
Score = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (features, requested while fresh) -> a pair's rank score


@dataclass(frozen=True)
class Hour:
    keys: np.ndarray  # the pool's pair keys
    features: np.ndarray  # NAMES then TRUE_RATE
    requested: np.ndarray  # requested while fresh


def true_users(log: EventLog) -> tuple[WorldConfig, Users]:
    """The world's users as its generator drew them (the first draw from its seed), checked against the log."""
    if log.meta.get("source") != "synthetic":
        raise ValueError(f"{log.root} is not a synthetic world: only a generated world has a ground truth")
    config = WorldConfig.from_dict(log.meta["config"])
    users = make_users(config, np.random.default_rng(config.seed))
    if not users.table["signup_ts"].equals(log.users()["signup_ts"]):
        raise ValueError(f"{log.root}: this code's generator does not redraw the world's users")
    return config, users


def hour_of(log: EventLog, config: WorldConfig, users: Users, at: datetime, ttl: int) -> Hour:
    pool, requested = labelled_pool(log, at, ttl)
    ids = pool["user_id"].to_numpy(np.int64)
    first = int((at - config.start) / HOUR)
    rate = expected_requests(config, users, np.arange(first, first + ttl)).sum(axis=0)[ids]
    features = np.column_stack([demand_features(log, pool, at, ttl), np.log(rate + 1e-3)]).astype(np.float32)
    return Hour(pair_key(ids, pool["item_id"].to_numpy(np.int64)), features, requested)


def rows(hours: list[Hour], negative_rate: float, rng: np.random.Generator) -> Rows:
    keep = [h.requested | (rng.random(len(h.keys)) < negative_rate) for h in hours]
    return Rows(
        np.concatenate([h.features[k] for h, k in zip(hours, keep)]),
        np.concatenate([h.requested[k] for h, k in zip(hours, keep)]).astype(np.float32),
    )


def served_keys(log: EventLog, at: datetime) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hour's shown impressions' pair keys, each one's request, and the (request, candidate) pair keys."""
    shown = log.impressions(at, at + HOUR, columns=["request_id", "user_id", "item_id"])
    _, request = np.unique(shown["request_id"].to_numpy(), return_inverse=True)
    shown_keys = pair_key(shown["user_id"].to_numpy().astype(np.int64), shown["item_id"].to_numpy().astype(np.int64))
    return shown_keys, request, pair_key(*requested_pairs(log, at, at + HOUR))


@dataclass(frozen=True)
class Arm:
    covered: np.ndarray  # per served request, its shown impressions with a fresh pair code
    candidates: float  # share of the served (request, candidate) rows with a fresh pair code
    hit_rate: float  # of the pairs written in the served hours whose fresh window the log holds
    requested_auc: float  # mean over the hours
    fm_calls: float  # per served hour


def simulate(
    log: EventLog, hours: dict[datetime, Hour], serve_from: datetime, arm: tuple[Score, float], budget: int, ttl: int
) -> tuple[Arm, np.ndarray]:
    """The figures of an arm (its score and the least score worth a call: the run's ``min_demand``), and the
    shown impressions of each served request."""
    score, floor = arm
    last_write: dict[int, int] = {}
    covered, shown, candidates, hits, written, calls, aucs = [], [], [], 0, 0, 0, []

    def fresh(keys: np.ndarray, i: int) -> np.ndarray:
        return np.array([i - ttl < last_write.get(k, -ttl) for k in keys.tolist()], float)

    for i, (at, hour) in enumerate(sorted(hours.items())):
        writes = np.array([last_write.get(k, -ttl) for k in hour.keys.tolist()])
        open_ = writes < i + 2 - ttl  # not fresh through this hour's end
        scores = score(hour.features[open_], hour.requested[open_])
        aucs.append(auc(hour.requested[open_].astype(float), scores))
        best = np.argsort(-scores, kind="stable")[:budget]
        best = best[scores[best] >= floor]
        last_write.update(dict.fromkeys(hour.keys[open_][best].tolist(), i))
        if at < serve_from:
            continue
        calls += len(best)
        if at + ttl * HOUR <= log.end:
            hits, written = hits + int(hour.requested[open_][best].sum()), written + len(best)
        shown_keys, request, candidate_keys = served_keys(log, at)
        covered.append(np.bincount(request, fresh(shown_keys, i))), shown.append(np.bincount(request))
        candidates.append(fresh(candidate_keys, i))
    found = Arm(
        np.concatenate(covered),
        float(np.concatenate(candidates).mean()),
        hits / max(written, 1),
        np.mean(aucs),
        calls / len(shown),
    )
    return found, np.concatenate(shown)


def scorer(train: Rows, valid: Rows, names: tuple[str, ...], fit_config: FitConfig, negative_rate: float) -> Score:
    """P(requested while fresh) by a demand model fitted to the first ``len(names)`` feature columns."""
    cols = list(range(len(names)))
    config = DemandConfig(names, ttl_hours=PrecomputeParams.ttl_hours, logit_offset=float(np.log(negative_rate)))
    model, _ = fit_demand(
        config, Rows(train.features[:, cols], train.labels), Rows(valid.features[:, cols], valid.labels), fit_config
    )
    return lambda features, _: predict(model, features[:, cols])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("world", type=Path, help="a generated world's event log folder (var/worlds/<name>)")
    parser.add_argument("--budget", type=int, default=PrecomputeParams.fm_budget, help="FM calls an hour")
    parser.add_argument("--serve-hours", type=int, default=12, help="the eval span's last hours served")
    parser.add_argument("--seed", type=int, default=0, help="the models' seed and the bootstrap's")
    parser.add_argument(
        "--min-demand", type=float, nargs="*", default=[0.05, 0.1, 0.2], help="floors for the demand model's arms"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    log, ttl, plan = EventLog(args.world), PrecomputeParams.ttl_hours, DemandPlan()
    config, users = true_users(log)
    until = ReplaySpans.of(log).eval.start  # where the replay trains the selector arms' demand model
    serve_from = log.end - args.serve_hours * HOUR
    train_at, valid_at = training_hours(until, ttl, plan)
    history = {at: hour_of(log, config, users, at, ttl) for at in train_at + valid_at if at >= log.start}
    rng = np.random.default_rng(args.seed)
    train = rows([history[at] for at in train_at if at in history], plan.negative_rate, rng)
    valid = rows([history[at] for at in valid_at if at in history], 1.0, rng)
    served = {at: hour_of(log, config, users, at, ttl) for at in log.hours() if at >= serve_from - (ttl - 1) * HOUR}
    demand, with_truth = (
        scorer(train, valid, names, replace(plan.fit, seed=args.seed), plan.negative_rate)
        for names in (NAMES, (*NAMES, TRUE_RATE))
    )
    arms = {"demand model": (demand, 0.0)} | {f"min_demand {floor:g}": (demand, floor) for floor in args.min_demand}
    arms |= {"+ true return rate": (with_truth, 0.0), "future": (lambda _, requested: requested.astype(float), 0.0)}
    results = {name: simulate(log, served, serve_from, arm, args.budget, ttl) for name, arm in arms.items()}
    shown = results["future"][1]
    print(
        f"ABLATION {args.world.name}: budget {args.budget:,} FM calls/h, ttl {ttl} h, demand models trained until "
        f"{until:%Y-%m-%d %H}:00, served {serve_from:%Y-%m-%d %H}:00 +{args.serve_hours} h, seed {args.seed}"
    )
    print(
        f"{'arm':<20}{'FM calls/h':>11}{'coverage pair':>26}{'vs demand model':>28}{'of candidates':>15}"
        f"{'hit while fresh':>17}{'requested AUC':>15}"
    )
    samples: dict[str, list[float]] = {name: [] for name in results}
    for w in resample_weights(len(shown), RESAMPLES, np.random.default_rng(args.seed)):
        for name, (arm, _) in results.items():
            samples[name].extend((w @ arm.covered) / (w @ shown))
    base = np.array(samples["demand model"])
    for name, (arm, _) in results.items():
        found, coverage = np.array(samples[name]), arm.covered.sum() / shown.sum()
        low, high = interval(found)
        d_low, d_high = interval(found - base)
        gain = coverage - results["demand model"][0].covered.sum() / shown.sum()
        versus = f"{gain:+.1%} [{d_low:+.1%}, {d_high:+.1%}]" if name != "demand model" else "—"
        print(
            f"{name:<20}{arm.fm_calls:>11,.0f}{coverage:>11.1%} [{low:.1%}, {high:.1%}]{versus:>28}"
            f"{arm.candidates:>15.1%}{arm.hit_rate:>17.1%}{arm.requested_auc:>15.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
