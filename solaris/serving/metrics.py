"""The ranker's Prometheus metrics, in a registry of its own (one per service, so tests never share one).

Latency, tiers, store failures, champion refreshes and the model served are labelled by ``vm``, the VM's
configured name (:mod:`solaris.vms`): one service serves every configured VM, and each is judged apart.

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
# Why a request was answered tier none without a read: the store does not hold the served embedding version.
VERSION_MISSING = "version_missing"
STORE_FAILURES = ("error", "timeout", "overloaded", VERSION_MISSING)
CHAMPION_FAILURES = ("resolve", "load")
# Read back by the health page (solaris.monitoring.ranker_state): the request latency's name and its whole-request stage.
LATENCY_METRIC, TOTAL_STAGE = "solaris_rank_seconds", "total"
DEGRADED_METRIC = "solaris_ranker_degraded"
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is first imported


class RankerMetrics:
    def __init__(self, vms: tuple[str, ...] = ()) -> None:
        """``vms``: the VMs served, whose every series starts at 0 (others appear when first used)."""
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            LATENCY_METRIC,
            "Ranker latency per request, per VM and stage",
            ["vm", "stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.candidates = Counter(
            "solaris_rank_candidates",
            "Candidates scored, per VM and the tier that fed them",
            ["vm", "tier"],
            registry=self.registry,
        )
        self.store_failures = Counter(
            "solaris_store_failures",
            "Requests answered with tier none for the store, per VM and why (version_missing: no read was made)",
            ["vm", "kind"],
            registry=self.registry,
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
            ["vm", "stage"],
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
            "The version each VM serves (1; 0 for one it served before)",
            ["vm", "vm_version", "embedding_version"],
            registry=self.registry,
            multiprocess_mode="max",  # 1 while any worker still serves it
        )
        self.degraded = Gauge(
            DEGRADED_METRIC,
            "1 while a VM serves every candidate tier none, by reason: version_missing (the store does not hold"
            " its embedding version: no precompute has written it yet)",
            ["vm", "reason"],
            registry=self.registry,
            multiprocess_mode="livemax",  # 1 while any live worker is degraded
        )
        self._serving: dict[str, tuple[str, str]] = {}
        for vm in vms:
            for tier in TIER_NAMES:
                self.candidates.labels(vm, tier)
            for kind in STORE_FAILURES:
                self.store_failures.labels(vm, kind)
            for stage in CHAMPION_FAILURES:
                self.champion_failures.labels(vm, stage)
            self.degraded.labels(vm, VERSION_MISSING)

    def serving(self, vm: str, vm_version: str, embedding_version: str) -> None:
        if self._serving.get(vm, (vm_version, embedding_version)) != (vm_version, embedding_version):
            self.model.labels(vm, *self._serving[vm]).set(0)
        self._serving[vm] = (vm_version, embedding_version)
        self.model.labels(vm, vm_version, embedding_version).set(1)

    def responded(self, endpoint: str, status: int) -> None:
        self.responses.labels(endpoint, str(status)).inc()

    def exposition(self) -> bytes:
        if os.environ.get(MULTIPROCESS_DIR_ENV):
            merged = CollectorRegistry()
            MultiProcessCollector(merged)
            return generate_latest(merged)
        return generate_latest(self.registry)
