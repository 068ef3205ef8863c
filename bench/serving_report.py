"""bench_serving's tables: the in-process splits and each backend's HTTP figures, each against its floor and
target."""

from __future__ import annotations

import numpy as np
import psutil
import torch
from bench_store import ITEMS_PER_USER
from serving_in_process import FLOOR, TARGET_MS, Split
from serving_load import CLIENTS, PER_CLIENT_RATE, RATE, SUSTAINED_P99_MS, SUSTAINED_SHARE, HttpResult
from serving_server import counter
from serving_world import BENCH_VM

from solaris.enrichment.tiers import TIER_NAMES
from solaris.serving.metrics import STORE_FAILURES


def ms(values: np.ndarray, q: float) -> str:
    return f"{np.percentile(values, q):>7.2f}"


def verdict(p99: float, limit: float, errors: int = 0) -> str:
    return f"{'ok' if p99 <= limit and not errors else 'MISS'} <={limit:g}"


def print_in_process(results: dict[str, dict[str, dict[str, Split]]], rows: int, n_requests: int) -> None:
    print(
        f"\nin process: 1 user x {ITEMS_PER_USER} candidates, {rows:,} pair rows, {n_requests} requests, "
        f"{torch.get_num_threads()} torch threads (ms; total = read + model + bookkeeping)"
    )
    print(
        f"{'backend':<11} {'statistics':<10} {'path':<24} {'total p50':>9} {'total p99':>9} {'read p50':>8} "
        f"{'read p99':>8} {'model p50':>9} {'model p99':>9} {'p99/floor':>9} {'failed':>6} "
        f"{'target':>9}"
    )
    for backend, states in results.items():
        for stats, splits in states.items():
            floor = np.percentile(splits[FLOOR].total, 99)
            for name, s in splits.items():
                p99 = np.percentile(s.total, 99)
                target = "" if name == FLOOR else verdict(p99, TARGET_MS[backend])
                print(
                    f"{backend:<11} {stats:<10} {name:<24} {ms(s.total, 50):>9} {ms(s.total, 99):>9} "
                    f"{ms(s.read, 50):>8} {ms(s.read, 99):>8} {ms(s.model, 50):>9} {ms(s.model, 99):>9} "
                    f"{p99 / floor:>8.1f}x {s.failures:>6} {target:>9}"
                )


def print_http(http: HttpResult, duration: float, workers: int) -> None:
    print(
        f"\nHTTP ({http.backend}, served log on, {workers} worker(s), {torch.get_num_threads()} torch thread(s)): "
        f"{RATE} requests/s for {duration:g} s from {CLIENTS} hey processes x {RATE / CLIENTS:g}/s, one body each, "
        f"{ITEMS_PER_USER} candidates per /rank; bursts: the processes in phase, {CLIENTS} requests at once every "
        f"{CLIENTS / RATE * 1e3:g} ms; spread: one request every {1e3 / RATE:g} ms (ms)"
    )
    print(
        f"{'pattern':<8} {'endpoint':<10} {'offered':>8} {'answered':>8} {'rate/s':>7} {'p50':>7} {'p99':>7} "
        f"{'max':>7} {'errors':>6} {'p99/floor':>9}  target (0 errors)"
    )
    for pattern, measured in http.at_rate.items():
        floor = np.percentile(measured.floor.latencies, 99)
        for name, load in (("/healthz", measured.floor), ("/rank", measured.rank)):
            p99 = np.percentile(load.latencies, 99)
            print(
                f"{pattern:<8} {name:<10} {load.offered:>8} {len(load.latencies):>8} {load.achieved:>7.1f} "
                f"{ms(load.latencies, 50)} {ms(load.latencies, 99)} {load.latencies.max():>7.2f} {load.errors:>6} "
                f"{p99 / floor:>8.1f}x  {measured.verdict() if load is measured.rank else ''}"
            )
    for pattern, measured in http.at_rate.items():
        per_request = measured.cpu.per_request_ms
        cpu = ", ".join(f"{kind} {value:.2f}" for kind, value in per_request.items())
        print(
            f"CPU per answered /rank ({pattern}, ms): {cpu}; {sum(per_request.values()):.2f} in all, "
            f"{RATE}/s would need {sum(per_request.values()) * RATE / 1e3:.2f} cores; the machine was busy "
            f"{measured.cpu.busy_cores:.2f} of {psutil.cpu_count()} cores"
        )
    seq, c = http.sequential, http.counters
    print(
        f"/rank, one client back to back (service time, no queueing): p50 {ms(seq.latencies, 50).strip()}, "
        f"p99 {ms(seq.latencies, 99).strip()}, {seq.errors} errors"
    )
    failures = ", ".join(
        f"{k} {counter(c, 'solaris_store_failures_total', vm=BENCH_VM, kind=k):.0f}" for k in STORE_FAILURES
    )
    tiers = {t: counter(c, "solaris_rank_candidates_total", vm=BENCH_VM, tier=t) for t in TIER_NAMES}
    shares = ", ".join(f"{t} {v / max(sum(tiers.values()), 1):.0%}" for t, v in tiers.items())
    dropped = counter(c, "solaris_served_log_dropped_rows_total")
    print(
        f"during /rank at {RATE}/s: store failures (served as tier none) {failures}; tiers {shares}; "
        f"served log: {http.logged_rows:,} rows written in all, {dropped:.0f} dropped"
    )
    print(
        f"sweep (/rank, spread, {PER_CLIENT_RATE}/s per hey process; sustained: 0 errors, >= {SUSTAINED_SHARE:.0%} of the "
        f"offered rate, p99 <= {SUSTAINED_P99_MS:g} ms):"
    )
    for load in http.sweep:
        print(
            f"  offered {load.rate:>4.0f}/s: achieved {load.achieved:6.1f}/s, p50 {ms(load.latencies, 50)}, "
            f"p99 {ms(load.latencies, 99)}, {load.errors} errors: {'sustained' if load.sustained() else 'not sustained'}"
        )
    best = http.highest_sustained()
    print(
        f"highest rate sustained ({http.backend}): {'none of the sweep' if best is None else f'{best:.0f} requests/s'}"
    )
