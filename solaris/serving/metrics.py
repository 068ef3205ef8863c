"""The ranker's Prometheus metrics, in a registry of its own (one per ranker, so tests never share one).

With several server processes (``solaris serve --workers N``) each keeps its values in files under
``PROMETHEUS_MULTIPROC_DIR`` and any of them answers /metrics for all, as prometheus_client's
multiprocess mode does: a scrape never sees one worker's share only.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from solaris.enrichment.tiers import TIER_NAMES

# Fine below 20 ms, where the serving targets are.
LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 1.0)
STORE_FAILURES = ("error", "timeout", "overloaded")
CHAMPION_FAILURES = ("resolve", "load")
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is first imported


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
        self.served_log_write_failures = Counter(
            "solaris_served_log_write_failures",
            "Served-log batches the writer failed to build or write (rows lost; see the service's log)",
            registry=self.registry,
        )
        self.champion_failures = Counter(
            "solaris_champion_refresh_failures",
            "Champion refreshes that failed, by stage: resolve (MLflow did not answer) or load (the new champion"
            " could not be loaded or cannot serve); the VM serving stays",
            ["stage"],
            registry=self.registry,
        )
        self.responses = Counter(
            "solaris_http_responses",
            "HTTP responses by endpoint (the route's path; other for unknown paths) and status code",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.model = Gauge(
            "solaris_model_info",
            "The VM being served (1; 0 for one served before)",
            ["vm_version", "embedding_version"],
            registry=self.registry,
            multiprocess_mode="max",  # 1 while any worker still serves it
        )
        self._serving: tuple[str, str] | None = None
        for tier in TIER_NAMES:
            self.candidates.labels(tier)
        for kind in STORE_FAILURES:
            self.store_failures.labels(kind)
        for stage in CHAMPION_FAILURES:
            self.champion_failures.labels(stage)

    def serving(self, vm_version: str, embedding_version: str) -> None:
        if self._serving not in (None, (vm_version, embedding_version)):
            self.model.labels(*self._serving).set(0)
        self._serving = (vm_version, embedding_version)
        self.model.labels(vm_version, embedding_version).set(1)

    def responded(self, endpoint: str, status: int) -> None:
        self.responses.labels(endpoint, str(status)).inc()

    def exposition(self) -> bytes:
        if os.environ.get(MULTIPROCESS_DIR_ENV):
            merged = CollectorRegistry()
            MultiProcessCollector(merged)
            return generate_latest(merged)
        return generate_latest(self.registry)
