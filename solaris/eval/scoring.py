"""Every model of a replay scored on the same events, each figure with its paired 95% interval.

The transfer ratio divides by the FM's NE gain over the base VM. Where that gain is smaller than its own
interval's width the ratio says nothing (a noise-sized denominator turns 0.004 into 300%), so it is left
undefined and the NE gain, with its interval, is what the report shows instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from solaris.eval.bootstrap import RESAMPLES, interval, request_sums, resampled_ne, transfer_samples
from solaris.eval.figures import Cohort, ModelScore, TierContribution
from solaris.eval.protocol import FM, VM_BASE
from solaris.models import metrics

MIN_COHORT_EVENTS = 500  # a cohort with fewer impressions (or one class only) is reported unscored


def score_models(
    labels: np.ndarray, requests: np.ndarray, probs: Mapping[str, np.ndarray], seed: int, resamples: int = RESAMPLES
) -> list[ModelScore]:
    """One :class:`ModelScore` per entry of ``probs`` (which holds the FM and the base VM), in its order."""
    names = list(probs)
    if FM not in names or VM_BASE not in names:
        raise ValueError(f"scoring needs the {FM!r} and {VM_BASE!r} probabilities; got {', '.join(names)}")
    summaries = {name: metrics.summary(labels, p) for name, p in probs.items()}
    samples = resampled_ne(request_sums(requests, labels, probs), resamples, seed)
    base, fm = names.index(VM_BASE), names.index(FM)
    base_ne, fm_ne = summaries[VM_BASE]["ne"], summaries[FM]["ne"]
    fm_gain_ci = interval(samples[:, base] - samples[:, fm])
    resolved = base_ne - fm_ne > fm_gain_ci[1] - fm_gain_ci[0]
    scores = []
    for m, name in enumerate(names):
        s = summaries[name]
        transfer = transfer_ci = None
        if name != FM and resolved:
            transfer = metrics.transfer_ratio(base_ne, s["ne"], fm_ne)
            transfer_ci = list(interval(transfer_samples(samples, base, m, fm)))
        scores.append(
            ModelScore(
                name, s["ne"], s["log_loss"], s["auc"], transfer,
                ne_ci95=list(interval(samples[:, m])),
                ne_gain=base_ne - s["ne"],
                ne_gain_ci95=list(interval(samples[:, base] - samples[:, m])),
                transfer_ratio_ci95=transfer_ci,
            )
        )  # fmt: skip
    return scores


def tier_contributions(
    labels: np.ndarray,
    requests: np.ndarray,
    probs: Mapping[str, np.ndarray],
    ladder: Sequence[tuple[str, str, str]],
    marginal: Mapping[str, float],
    seed: int,
    resamples: int = RESAMPLES,
) -> list[TierContribution]:
    """Per ``(tier, without, with_tier)`` of the ladder, the NE gain of the model with the tier over the one
    without it, paired over the same resampled requests (the seed gives :func:`score_models`'s resamples)."""
    gains = ne_gains(labels, requests, probs, [(without, with_tier) for _, without, with_tier in ladder], seed, resamples)
    return [
        TierContribution(tier, without, with_tier, gain, ci, marginal.get(tier, 0.0))
        for (tier, without, with_tier), (gain, ci) in zip(ladder, gains, strict=True)
    ]


def ne_gains(
    labels: np.ndarray,
    requests: np.ndarray,
    probs: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
    seed: int,
    resamples: int = RESAMPLES,
) -> list[tuple[float, list[float]]]:
    """Per ``(reference, model)`` of ``pairs``: the reference's NE minus the model's (positive: the model is
    better) and its 95% interval, paired over the same resampled requests."""
    names = list(probs)
    samples = resampled_ne(request_sums(requests, labels, probs), resamples, seed)
    ne = {name: metrics.summary(labels, probs[name])["ne"] for name in names}
    found = []
    for reference, model in pairs:
        a, b = names.index(reference), names.index(model)
        found.append((ne[reference] - ne[model], list(interval(samples[:, a] - samples[:, b]))))
    return found


def score_cohorts(
    labels: np.ndarray, requests: np.ndarray, probs: Mapping[str, np.ndarray], cohorts: Mapping[str, np.ndarray], seed: int
) -> list[Cohort]:
    """:func:`score_models` on each cohort's rows alone (``cohorts``: name -> row mask)."""
    found = []
    for name, mask in cohorts.items():
        n = int(mask.sum())
        scorable = n >= MIN_COHORT_EVENTS and 0 < labels[mask].sum() < n
        models = score_models(labels[mask], requests[mask], {k: p[mask] for k, p in probs.items()}, seed) if scorable else []
        found.append(Cohort(name, n / max(len(labels), 1), n, models))
    return found
