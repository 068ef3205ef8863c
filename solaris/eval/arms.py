"""Arms of a replay: the evaluation span's last hours replayed on a fresh store with other precompute
parameters (the top_fraction sweep, the selector comparison), and the figures pooled over an arm's hours.

Each arm precomputes warm-up hours first so its store is warm, then serves the same impressions as the main
run; the refreshed all-tier VM is scored on what the arm served, the FM and the base VM on the same hours of
the main run (they read no store, so every arm would give them the same events).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from solaris.config import Settings
from solaris.data.hourly import HOUR, hours_between
from solaris.eval import loop
from solaris.eval.events import ServedEvents
from solaris.eval.figures import HourFigures, ModelScore
from solaris.eval.protocol import FM, VM_BASE
from solaris.eval.scoring import ne_gains, score_models
from solaris.eval.variants import SWEEP_VARIANT, predict, variant
from solaris.models.splits import Span
from solaris.models.vm import VerticalModel
from solaris.precompute.quality import hit_ceiling
from solaris.serving import Ranker
from solaris.serving.champion import ServingModel
from solaris.serving.servedlog import ServedLog, served_dir
from solaris.store import open_configured_store


@dataclass(frozen=True)
class ArmSpan:
    """Where every arm of a replay runs: warm-up from ``warm_start``, served and scored from ``serve_from``."""

    warm_start: datetime
    serve_from: datetime
    end: datetime


def arm_span(logging: Span, evaluation: Span, serve_hours: int | None, warmup_hours: int) -> ArmSpan:
    served = evaluation.hours if serve_hours is None else min(serve_hours, evaluation.hours)
    serve_from = evaluation.end - served * HOUR
    return ArmSpan(max(serve_from - warmup_hours * HOUR, logging.start), serve_from, evaluation.end)


@dataclass(frozen=True)
class Arms:
    """What every arm shares: its hours, the serving chain, the refreshed VMs and the main run's events."""

    span: ArmSpan
    model: ServingModel
    refreshed: dict[str, VerticalModel]
    main_events: ServedEvents  # the main run's events of the served hours (the lead VM's)
    settings_for: Callable[[str], Settings]  # a fresh store and data folder per arm name
    events: Callable[[Span, Settings], ServedEvents]  # the lead VM's
    seed: int
    progress: bool
    # Arms already run, by their parameters: the selector comparison's verifier arms are sweep points, and an
    # arm is a deterministic function of its parameters, so each runs once.
    done: dict[str, tuple[loop.SpanRun, ModelScore]] = field(default_factory=dict)
    # The SOLARIS VM's probabilities on each arm's served events, by the same key: two arms' NEs are paired
    # over the main run's requests (every arm serves its events, checked).
    solaris_probs: dict[str, np.ndarray] = field(default_factory=dict)

    def run(self, name: str, params: dict[str, Any]) -> tuple[loop.SpanRun, ModelScore]:
        """Replay the arm's hours with ``params`` on a fresh store (once per distinct ``params``); the SOLARIS
        VM's score on what it served."""
        key = _key(params)
        if key not in self.done:
            self.done[key] = self._run(key, name, params)
        return self.done[key]

    def ne_gain(self, reference: dict[str, Any], params: dict[str, Any]) -> tuple[float, list[float]]:
        """The SOLARIS VM's NE on the ``reference`` arm minus its NE on the ``params`` arm, with the paired 95%
        interval (the same resamples as the arms' own scores); both arms must have run."""
        (found,) = ne_gains(
            self.main_events.label,
            self.main_events.requests,
            {"reference": self.solaris_probs[_key(reference)], "arm": self.solaris_probs[_key(params)]},
            [("reference", "arm")],
            self.seed,
        )
        return found

    def _run(self, key: str, name: str, params: dict[str, Any]) -> tuple[loop.SpanRun, ModelScore]:
        settings = self.settings_for(name)
        with open_configured_store(settings, init=True) as store:
            ranker = Ranker(store, self.model, ServedLog(served_dir(settings.served_root, self.model.pinned.vm_name)))
            hours = hours_between(self.span.warm_start, self.span.end)
            run = loop.replay_hours(settings, hours, self.span.serve_from, params, ranker, name, self.progress)
            ranker.close()
        arm = self.events(Span(self.span.serve_from, self.span.end), settings)
        same = self.main_events
        if not (np.array_equal(arm.requests, same.requests) and np.array_equal(arm.label, same.label)):
            raise ValueError(f"arm {name} served other events than the main run's same hours")
        probs = {
            FM: same.fm_prob,
            VM_BASE: predict(variant(VM_BASE), self.refreshed[VM_BASE], same),
            SWEEP_VARIANT: predict(variant(SWEEP_VARIANT), self.refreshed[SWEEP_VARIANT], arm),
        }
        self.solaris_probs[key] = probs[SWEEP_VARIANT]
        return run, score_models(arm.label, arm.requests, probs, self.seed)[-1]


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def mean_coverage(figures: list[HourFigures], which: str = "coverage") -> dict[str, float]:
    """Coverage over all pairs served in these hours (hours weighted by what they served); ``which`` is
    ``"coverage"`` (cumulative down the feeding order) or ``"coverage_marginal"`` (fed first by each tier)."""
    served = np.array([f.served for f in figures], float)
    shares = [getattr(f, which) for f in figures]
    return {tier: float(np.dot(served, [s[tier] for s in shares]) / max(served.sum(), 1.0)) for tier in shares[0]}


def fm_calls_per_served_pair(figures: list[HourFigures]) -> float:
    """FM embeddings computed per pair served from the pair tier: what one useful embedding costs."""
    served_on_pair = sum(f.served * f.coverage["pair"] for f in figures)
    return sum(f.fm_calls for f in figures) / served_on_pair if served_on_pair else float("inf")


def pooled_efficiency(figures: list[HourFigures]) -> dict[str, float | None]:
    """The hours' precompute efficiency, pooled: hits over the pairs whose TTL ended in them (a hit is a
    candidate request while fresh) and its ceiling (:func:`~solaris.precompute.quality.hit_ceiling`, pooled
    over the hours whose run scored its pool), the selector's AUC averaged over the hours that have one, and the FM calls
    made for the hours per candidate row the pair tier covered in them (and the inverse); None where undefined.

    Unlike :func:`fm_calls_per_served_pair`, which divides by shown impressions, this counts every candidate
    the ranker scored with a pair code: what the precompute is for."""
    pairs, hits = sum(f.ttl_pairs for f in figures), sum(f.ttl_hits for f in figures)
    known = [f for f in figures if f.ttl_pool_requested is not None]
    ceiling = hit_ceiling(sum(f.ttl_pool_requested or 0 for f in known), sum(f.ttl_pairs for f in known))
    aucs = [f.requested_auc for f in figures if f.requested_auc is not None]
    calls, covered = sum(f.fm_calls for f in figures), sum(f.covered_candidates for f in figures)
    return {
        "hit_rate_ttl": hits / pairs if pairs else None,
        "hit_ceiling_ttl": ceiling,
        "requested_auc": float(np.mean(aucs)) if aucs else None,
        "fm_calls": calls,
        "covered_candidates": covered,
        "fm_calls_per_covered_candidate": calls / covered if covered else None,
        "covered_candidates_per_fm_call": covered / calls if calls else None,
    }
