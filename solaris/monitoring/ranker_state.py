"""What the health page knows of the ranker: its p50 / p99 per ``/rank`` and the VMs it serves degraded.

Read from the ranker's own ``/metrics`` where it answers (``SOLARIS_RANKER_URL``): the latency histogram since
it started, each quantile taken as the upper bound of the bucket it falls in, and the degraded gauge. Where it
does not answer, a live stack's load file holds the latest hour's p50 / p99 as its load driver measured them,
and nothing about degraded VMs.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from solaris.serving.metrics import DEGRADED_METRIC, LATENCY_METRIC, TOTAL_STAGE

PROBE_TIMEOUT_S = 2.0
METRICS, LOAD_FILE = "the ranker's /metrics since it started", "the live load driver's latest hour"


@dataclass(frozen=True)
class RankerState:
    source: str
    p50_ms: float | None
    p99_ms: float | None
    degraded: dict[str, str] | None  # VM -> reason; None where the source cannot tell


def ranker_state(ranker_url: str | None, load: Iterable[Mapping[str, Any]]) -> RankerState | None:
    """From ``/metrics`` when the ranker answers, else the newest hour of ``load`` (newest first), else None."""
    if ranker_url:
        try:
            with urllib.request.urlopen(ranker_url.rstrip("/") + "/metrics", timeout=PROBE_TIMEOUT_S) as answer:
                return from_metrics(answer.read().decode())
        except OSError:
            pass  # the ranker is down or elsewhere: fall back to what the load driver measured
    for hour in load:
        return RankerState(LOAD_FILE, hour.get("ranker_p50_ms"), hour.get("ranker_p99_ms"), None)
    return None


def from_metrics(text: str) -> RankerState:
    """The quantiles of every VM's requests together, and each VM whose degraded gauge is set."""
    buckets: dict[float, float] = {}
    degraded = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{LATENCY_METRIC}_bucket" and sample.labels.get("stage") == TOTAL_STAGE:
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif family.name == DEGRADED_METRIC and sample.value >= 1:
                degraded[sample.labels["vm"]] = sample.labels["reason"]
    return RankerState(METRICS, quantile_ms(buckets, 0.5), quantile_ms(buckets, 0.99), degraded)


def quantile_ms(cumulative: Mapping[float, float], q: float) -> float | None:
    """The upper bound, in ms, of the first bucket holding a share ``q`` of the requests (None: no request;
    ``inf`` past the last finite bound)."""
    bounds = sorted(cumulative)
    total = cumulative[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    first = next(b for b in bounds if cumulative[b] >= q * total)
    return first * 1000.0
