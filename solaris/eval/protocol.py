"""The replay protocol's choices, declared once (stdlib only: the CLI and the DAG's form import it).

``fm_refresh`` is how often the FM is refreshed while the log replays: ``daily`` is production's cadence
(the headline); ``none`` keeps the FM trained on the training span frozen, an ablation that shows what a
stale FM does to the transfer ratio.
"""

from __future__ import annotations

FM_REFRESH_HOURS: dict[str, int | None] = {"daily": 24, "none": None}
DEFAULT_FM_REFRESH = "daily"
# Every VM variant is trained once per seed and reported as the mean over its runs with their spread: the
# least that shows one (a variant's NE moves with its training run as much as with a tier's inputs).
VM_SEEDS = (0, 1, 2)
# Hours each sweep or selector arm precomputes before the hours it is scored on, so that its fresh store is warm.
SWEEP_WARMUP_HOURS = 8
# The TTLs the capacity plan's grid runs the budget selector at besides the replay's own ttl_hours, at every
# spend of the selector comparison (solaris.eval.capacity).
PLAN_TTL_HOURS = (2, 8)
# The min_demand floors the grid runs at its largest spend (solaris.precompute.params.min_demand: on default seed 2
# 0.05 saved 15% of a 60,000 budget's calls for 1.1 points of coverage; 0.2 took a 30% hit rate while fresh).
PLAN_MIN_DEMAND = (0.05, 0.2)
# The precompute's knobs a replay takes (their defaults and bounds: solaris.precompute.params); the CLI, the
# solaris_replay DAG's form and the request all follow this list, so none is copied by hand.
REPLAY_KNOBS = ("top_fraction", "ttl_hours", "ttl_jitter_hours", "cohorts", "cohort_items")


def seed_world(preset: str, seed: int) -> str:
    """The world a replay generates from ``preset`` for ``seed``: each seed is a world of its own."""
    return f"{preset}-seed{seed}"


def replayed_world(world: str, seed: int) -> str:
    """What the seeds of one replay share: a generated world's preset (:func:`seed_world`), else the world."""
    return world.removesuffix(f"-seed{seed}")


# The reference rows every replay table holds, named once.
FM, VM_BASE = "FM", "VM base"
FM_HOURLY = "FM as precomputed"  # the FM's view at the hour's start: what the precompute can embed
# The same at the impression's position: what a VM fed the hour's code and the position could reach at most
# from the pair code alone; why the SOLARIS rows can stand above "FM as precomputed".
FM_HOURLY_POSITIONED = "FM as precomputed, at served position (ablation)"
ALL_TIERS = "SOLARIS +cohort"  # the SOLARIS VM that sees every tier: the last rung of eval.variants' tier ladder

_SERVED_FM = {
    "daily": (
        "the FM version that serves the evaluation span, fine-tuned daily on every hour before its first serving "
        "hour, its click head Platt-recalibrated on the hours it served before the evaluation span (those every "
        "VM is refreshed on)"
    ),
    "none": (
        "the FM trained on the training span and frozen there (an ablation: a stale FM), its click head "
        "Platt-recalibrated on the logging span"
    ),
}


def check_fm_refresh(fm_refresh: str) -> str:
    if fm_refresh not in FM_REFRESH_HOURS:
        raise ValueError(f"fm_refresh {fm_refresh!r}: choose one of {', '.join(FM_REFRESH_HOURS)}")
    return fm_refresh


BASE_VM_INPUTS = (
    "ids, side features, hour of day, position and the exposure counters a production ranker keeps (the user's "
    "and the (user, item) pair's impressions over 6, 24 and 72 hours, as of the hour's start, read from the "
    "store as served); every VM variant sees them, so a transfer ratio counts only what the FM adds"
)


def protocol(fm_refresh: str, skipped_vms: dict[str, str], precompute: dict[str, object]) -> dict[str, object]:
    """What ``report.json`` states: the cadence, which FM the transfer ratio divides by, what the base VM sees,
    the configured VMs the log could not judge (with why), and the main run's precompute parameters."""
    return {
        "precompute": precompute,
        "vms_left_out": skipped_vms,
        "base_vm": BASE_VM_INPUTS,
        "fm_refresh": check_fm_refresh(fm_refresh),
        "fm_reference": (
            f"{FM!r}: {_SERVED_FM[fm_refresh]}, scored on every evaluation impression from its history strictly "
            f"before that impression; {FM_HOURLY!r} is the same FM as the precompute runs it (history before the "
            f"hour's start, position 0), a reference only; {FM_HOURLY_POSITIONED!r} the same at each impression's "
            "own position, an ablation: the VMs know the position, the precompute does not"
        ),
    }
