"""Every model of a replay scored on the same events, each figure with its paired 95% interval.

The transfer ratio divides by the FM's NE gain over the base VM. Where that gain is smaller than its own
interval's width the ratio says nothing (a noise-sized denominator turns 0.004 into 300%), so it is left
undefined and the NE gain, with its interval, is what the report shows instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from solaris.eval.bootstrap import RESAMPLES, interval, request_sums, resampled_ne, transfer_samples
from solaris.eval.figures import ModelScore, Slice, TierContribution
from solaris.eval.protocol import FM, VM_BASE
from solaris.models import metrics

MIN_SLICE_EVENTS = 500  # a slice with fewer impressions (or one class only) is reported unscored

# A model's probabilities: (events,) for one training run, (runs, events) for one per VM training seed.
Probs = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Runs:
    """Every model's training runs scored on the same events and the same resampled requests."""

    names: list[str]
    ne: dict[str, np.ndarray]  # name -> (runs,) NE of each run
    summaries: dict[str, list[dict[str, float]]]  # name -> metrics.summary of each run
    samples: np.ndarray  # (resamples, models): each model's NE averaged over its runs, per resample

    @classmethod
    def of(cls, labels: np.ndarray, requests: np.ndarray, probs: Probs, seed: int, resamples: int) -> Runs:
        runs = {name: np.atleast_2d(np.asarray(p)) for name, p in probs.items()}
        columns = {f"{name}#{k}": run for name, model in runs.items() for k, run in enumerate(model)}
        per_run = resampled_ne(request_sums(requests, labels, columns), resamples, seed)
        samples, at = [], 0
        for model in runs.values():
            samples.append(per_run[:, at : at + len(model)].mean(axis=1))
            at += len(model)
        summaries = {name: [metrics.summary(labels, run) for run in model] for name, model in runs.items()}
        ne = {name: np.array([s["ne"] for s in found]) for name, found in summaries.items()}
        return cls(list(runs), ne, summaries, np.stack(samples, axis=1))

    def mean(self, name: str, figure: str = "ne") -> float:
        return statistics.fmean(s[figure] for s in self.summaries[name])

    def gain(self, reference: str, model: str) -> tuple[float, list[float], float | None]:
        """The reference's NE minus the model's (positive: the model is better), averaged over runs paired by
        seed, its interval over requests and its spread (sd) over the paired runs (None: one run)."""
        a, b = self.names.index(reference), self.names.index(model)
        per_run = _paired(self.ne[reference], self.ne[model], lambda x, y: x - y)
        return float(per_run.mean()), list(interval(self.samples[:, a] - self.samples[:, b])), _sd(per_run)


def _paired(a: np.ndarray, b: np.ndarray, f) -> np.ndarray:  # noqa: ANN001 - a numpy ufunc-like
    """``f`` of two models' runs paired by seed; a model with one run (the FM) pairs with every run."""
    if len(a) != len(b) and 1 not in (len(a), len(b)):
        raise ValueError(f"cannot pair {len(a)} training runs with {len(b)}")
    return np.asarray(f(a, b), np.float64)


def _sd(values: np.ndarray) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def score_models(
    labels: np.ndarray, requests: np.ndarray, probs: Probs, seed: int, resamples: int = RESAMPLES
) -> list[ModelScore]:
    """One :class:`ModelScore` per entry of ``probs`` (which holds the FM and the base VM), in its order; a
    model trained once per seed is scored as the mean over its runs, with their spread beside the interval."""
    names = list(probs)
    if FM not in names or VM_BASE not in names:
        raise ValueError(f"scoring needs the {FM!r} and {VM_BASE!r} probabilities; got {', '.join(names)}")
    runs = Runs.of(labels, requests, probs, seed, resamples)
    base, fm = names.index(VM_BASE), names.index(FM)
    base_ne, fm_ne = runs.mean(VM_BASE), runs.mean(FM)
    fm_gain_ci = interval(runs.samples[:, base] - runs.samples[:, fm])
    resolved = base_ne - fm_ne > fm_gain_ci[1] - fm_gain_ci[0]
    scores = []
    for m, name in enumerate(names):
        ne = runs.mean(name)
        gain, gain_ci, gain_sd = runs.gain(VM_BASE, name)
        transfer = transfer_ci = transfer_sd = None
        if name != FM and resolved:
            transfer = metrics.transfer_ratio(base_ne, ne, fm_ne)
            transfer_ci = list(interval(transfer_samples(runs.samples, base, m, fm)))
            transfer_sd = _sd(_paired(runs.ne[VM_BASE], runs.ne[name], lambda b, x: (b - x) / (b - fm_ne)))
        scores.append(
            ModelScore(
                name,
                ne,
                runs.mean(name, "log_loss"),
                runs.mean(name, "auc"),
                transfer,
                ne_ci95=list(interval(runs.samples[:, m])),
                ne_gain=base_ne - ne,
                ne_gain_ci95=gain_ci,
                transfer_ratio_ci95=transfer_ci,
                runs=len(runs.ne[name]),
                ne_runs_sd=_sd(runs.ne[name]),
                ne_gain_runs_sd=gain_sd if name != VM_BASE else None,
                transfer_ratio_runs_sd=transfer_sd,
            )
        )
    return scores


def tier_contributions(
    labels: np.ndarray,
    requests: np.ndarray,
    probs: Probs,
    ladder: Sequence[tuple[str, str, str]],
    marginal: Mapping[str, float],
    seed: int,
    resamples: int = RESAMPLES,
) -> list[TierContribution]:
    """Per ``(tier, without, with_tier)`` of the ladder, the NE gain of the model with the tier over the one
    without it, paired over the same resampled requests (the seed gives :func:`score_models`'s resamples) and
    over training runs of the same seed."""
    runs = Runs.of(labels, requests, probs, seed, resamples)
    found = []
    for tier, without, with_tier in ladder:
        gain, ci, sd = runs.gain(without, with_tier)
        found.append(TierContribution(tier, without, with_tier, gain, ci, marginal.get(tier, 0.0), sd))
    return found


def ne_gains(
    labels: np.ndarray,
    requests: np.ndarray,
    probs: Probs,
    pairs: Sequence[tuple[str, str]],
    seed: int,
    resamples: int = RESAMPLES,
) -> list[tuple[float, list[float]]]:
    """Per ``(reference, model)`` of ``pairs``: the reference's NE minus the model's (positive: the model is
    better) and its 95% interval, paired over the same resampled requests."""
    runs = Runs.of(labels, requests, probs, seed, resamples)
    return [runs.gain(reference, model)[:2] for reference, model in pairs]


def score_slices(
    labels: np.ndarray, requests: np.ndarray, probs: Probs, slices: Mapping[str, np.ndarray], seed: int
) -> list[Slice]:
    """:func:`score_models` on each slice's rows alone (``slices``: name -> row mask)."""
    found = []
    for name, mask in slices.items():
        n = int(mask.sum())
        scorable = n >= MIN_SLICE_EVENTS and 0 < labels[mask].sum() < n
        models = (
            score_models(labels[mask], requests[mask], {k: p[..., mask] for k, p in probs.items()}, seed)
            if scorable
            else []
        )
        found.append(Slice(name, n / max(len(labels), 1), n, models))
    return found
