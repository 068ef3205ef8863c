"""The ranker's Prometheus metrics, in a registry of its own (one per ranker, so tests never share one)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from solaris.serving.tiers import TIER_NAMES

# Fine below 20 ms, where the serving targets are.
LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 1.0)
STORE_FAILURES = ("error", "timeout", "overloaded")


class RankerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "solaris_rank_seconds", "Ranker latency per request", ["stage"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.candidates = Counter(
            "solaris_rank_candidates", "Candidates scored, by the tier that fed them", ["tier"], registry=self.registry
        )
        self.store_failures = Counter(
            "solaris_store_failures", "Store reads answered with tier none", ["kind"], registry=self.registry
        )
        self.served_log_dropped = Counter(
            "solaris_served_log_dropped_rows", "Served rows not logged (log queue full)", registry=self.registry
        )
        self.model = Gauge(
            "solaris_model_info", "The VM being served (value 1)", ["vm_version", "embedding_version"], registry=self.registry
        )
        for tier in TIER_NAMES:
            self.candidates.labels(tier)
        for kind in STORE_FAILURES:
            self.store_failures.labels(kind)

    def serving(self, vm_version: str, embedding_version: str) -> None:
        self.model.clear()
        self.model.labels(vm_version, embedding_version).set(1)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
