"""The knobs of one hourly precompute run, each declared once: default, bounds and description.

:class:`PrecomputeParams` is the definition; the DAGs' trigger forms (:func:`airflow_param`), the replay's
options and the CLI flags (:func:`cli_option`) are generated from its fields, and every value is checked
against the same bounds wherever it came from. Stdlib only: the DAG files import this at parse time.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, fields
from typing import Any

from solaris.config import DEVICES

SELECTORS = ("budget", "verifier")
FM_BUDGET = 60_000
DEMAND_AUC_FLOOR = 0.72  # between the plain log's 0.64-0.66, where the budget selector bought nothing, and our 0.79+
LIKELY_USERS = 20_000
_TYPES = {
    "int": (numbers.Integral, "integer", int),
    "float": (numbers.Real, "number", float),
    "str": (str, "string", str),
}


@dataclass(frozen=True)
class Knob:
    description: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[str, ...] = ()
    in_form: bool = False  # shown in the precompute DAG's trigger form

    def check(self, name: str, kind: str, value: Any) -> None:
        accepted, _, _ = _TYPES[kind]
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise ValueError(f"{name} must be of type {kind}, got {value!r}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{name} {value!r} is not one of {', '.join(self.choices)}")
        low_ok = self.minimum is None or (value > self.minimum if self.exclusive_minimum else value >= self.minimum)
        if not low_ok or (self.maximum is not None and value > self.maximum):
            raise ValueError(f"{name} must be in {self.interval}, got {value!r}")

    @property
    def interval(self) -> str:
        low = "(" if self.exclusive_minimum else "["
        return f"{low}{_g(self.minimum, '-inf')}, {_g(self.maximum, 'inf')}]"


def _g(bound: float | None, none: str) -> str:
    return none if bound is None else f"{bound:g}"


def knob(default: Any, description: str, **bounds: Any) -> Any:
    return field(default=default, metadata={"knob": Knob(description, **bounds)})


@dataclass(frozen=True)
class PrecomputeParams:
    """What a user may change per run; the fields with ``in_form`` make the DAG's trigger form."""

    selector: str = knob(
        "budget",
        "how the pairs the FM embeds are chosen: budget (predicted demand x gain, up to fm_budget FM calls, "
        "re-queue included) or verifier (the paper's: the VM's top_fraction of candidates, re-queue forced)",
        choices=SELECTORS,
        in_form=True,
    )
    # What the verifier at top_fraction 0.2 spends per hour on the default world once warm: 58,296 FM calls
    # (replay seed 0, the selector comparison's served hours).
    fm_budget: int = knob(FM_BUDGET, "FM calls per hour at most (selector budget)", minimum=1, in_form=True)
    # A floor under the budget: a call on a pair this unlikely to be requested is not worth making even with
    # budget left. On default seed 2 (ablations/demand_bound.py, 60,000 budget) 0.05 saves 15% of the calls for
    # 1.1 points of coverage, and 0.2 is what a 30% hit rate while fresh takes: 14k calls an hour, 42% coverage.
    min_demand: float = knob(
        0.0,
        "embed no pair less likely than this to be requested while fresh, even with budget left (selector "
        "budget; 0 spends the whole fm_budget)",
        minimum=0,
        maximum=1,
        in_form=True,
    )
    # The budget selector is as good as its demand model (solaris.precompute.selector_choice).
    demand_auc_floor: float = knob(
        DEMAND_AUC_FLOOR,
        "the budget selector runs while its demand model's validation AUC is at least this; under it the run "
        "takes the verifier instead (0: never)",
        minimum=0,
        maximum=1,
        in_form=True,
    )
    top_fraction: float = knob(
        0.2,
        "share of candidates the FM embeds (selector verifier)",
        minimum=0,
        exclusive_minimum=True,
        maximum=1,
        in_form=True,
    )
    ttl_hours: int = knob(4, "hours a pair embedding stays fresh", minimum=1, maximum=48, in_form=True)
    # An hour that writes more codes than will expire in the hours before it spreads them over the last
    # ttl_jitter_hours + 1 hours of their TTL, levelling what expires, and so the FM's calls (solaris.precompute.expiry).
    ttl_jitter_hours: int = knob(
        3,
        "hours before ttl_hours a code may expire, so that an hour heavier than those before it does not return "
        "to the FM all at once (at most ttl_hours - 1; 0: every code lives ttl_hours)",
        minimum=0,
        maximum=47,
        in_form=True,
    )
    # The hours a challenger's embedding version is written beside the champion's before the gate compares their
    # coverage (:mod:`solaris.precompute.shadow`): one TTL at the defaults, so its pair tier is then as full.
    shadow_hours: int = knob(
        4, "hours a challenger is precomputed in shadow before its coverage gate", minimum=1, maximum=48
    )
    shards: int = knob(2, "FM embedding tasks (mapped)", minimum=1, maximum=64, in_form=True)
    # Every per-user step runs as this many tasks, each holding only its users (by a stable hash of the id), so
    # that a worker's memory bounds the users a shard has, not the users there are.
    user_shards: int = knob(
        1,
        "tasks each per-user step runs as, each with its share of the users (mapped)",
        minimum=1,
        maximum=256,
        in_form=True,
    )
    batch_size: int = knob(4096, "pairs per FM forward", minimum=64, maximum=65536, in_form=True)
    device: str = knob("auto", "FM device", choices=DEVICES, in_form=True)
    per_user_cap: int = knob(50, "speculative pairs selected per user at most", minimum=1)
    # Speculative candidates go to the users most likely to come back; every other user's requested pairs still
    # reach the FM an hour later through the re-queue of misses.
    likely_users: int = knob(
        LIKELY_USERS,
        "users given speculative candidates each hour: those with the most recency-weighted requests",
        minimum=1,
    )
    window_hours: int = knob(24, "hours of pair codes a user aggregate averages", minimum=1)
    knn_k: int = knob(10, "neighbours kept per user", minimum=1)
    # Users with a request or a sign-up this recent get a neighbour row (new users have no other tier).
    knn_lookback_hours: int = knob(168, "hours of requests and sign-ups that give a user a neighbour row", minimum=1)
    # Every run recomputes every row but writes only the rows that changed; every ``knn_rebuild_hours`` it
    # writes them all, so neighbour rows live that long.
    knn_rebuild_hours: int = knob(24, "hours between full rewrites of the KNN table", minimum=1)
    # The A2A tier: each item's most similar items with a fresh pair code. On the tiny replay's last hour the
    # tier covered 47 / 63 / 81 / 90 / 95% of candidate rows at k 1 / 2 / 5 / 10 / 20: it saturates by 20,
    # and a larger k only costs serving reads.
    a2a_k: int = knob(20, "similar items kept per item (A2A tier)", minimum=1)
    # The cohort tier (solaris.enrichment.cohorts): cohorts x items FM calls an hour, outside fm_budget, for the
    # users no other tier can reach, in their first hour. 0 turns it off.
    cohorts: int = knob(32, "side-feature cohorts of recent users given new-user codes each hour", minimum=0)
    cohort_items: int = knob(200, "most-shown items each cohort gets a new-user code for", minimum=0)
    # Impressions read for the FM's history and exposure counts (its longest count window is 72 h).
    history_hours: int = knob(168, "hours of impressions the FM reads as history", minimum=1)
    # The code log's readers look back at most ``window_hours`` (the user aggregates), ``ttl_hours`` (the
    # replay's staleness) and 1 h (hit rate); ``expire`` deletes the hours older than this, so it must cover
    # them all (checked below). 48 covers the defaults and the largest ``ttl_hours`` the form accepts.
    code_log_retention_hours: int = knob(48, "hours of the pair-code log kept for its readers", minimum=1)

    def __post_init__(self) -> None:
        for f in fields(self):
            f.metadata["knob"].check(f.name, f.type, getattr(self, f.name))
        for reader in ("window_hours", "ttl_hours"):
            if self.code_log_retention_hours < getattr(self, reader):
                raise ValueError(
                    f"code_log_retention_hours must be at least {reader} ({getattr(self, reader)}): the code log's "
                    f"readers look back that far, got {self.code_log_retention_hours}"
                )

    @property
    def expiry_jitter_hours(self) -> int:
        """``ttl_jitter_hours`` as it applies to ``ttl_hours``: a code lives at least an hour."""
        return min(self.ttl_jitter_hours, self.ttl_hours - 1)

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> PrecomputeParams:
        """From DAG params or XCom; unknown keys are an error naming them (a typo must not pass silently)."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown precompute parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**values)


def _field(name: str) -> Any:
    for f in fields(PrecomputeParams):
        if f.name == name:
            return f
    raise KeyError(f"no precompute parameter {name!r}")


FORM = tuple(f.name for f in fields(PrecomputeParams) if f.metadata["knob"].in_form)


def airflow_param(name: str) -> dict[str, Any]:
    """Keyword arguments of ``airflow.sdk.Param`` for one knob: its default and JSON-schema bounds."""
    f = _field(name)
    k: Knob = f.metadata["knob"]
    schema: dict[str, Any] = {"default": f.default, "type": _TYPES[f.type][1], "description": k.description}
    if k.minimum is not None:
        schema["exclusiveMinimum" if k.exclusive_minimum else "minimum"] = k.minimum
    if k.maximum is not None:
        schema["maximum"] = k.maximum
    if k.choices:
        schema["enum"] = list(k.choices)
    return schema


def cli_option(name: str) -> tuple[str, dict[str, Any]]:
    """The flag and ``argparse.add_argument`` keywords for one knob (bounds are checked by the params)."""
    f = _field(name)
    k: Knob = f.metadata["knob"]
    bounds = f" {k.interval}" if k.minimum is not None or k.maximum is not None else ""
    options = {
        "type": _TYPES[f.type][2],
        "default": f.default,
        "help": f"{k.description}{bounds} (default {f.default})",
    }
    if k.choices:
        options["choices"] = k.choices
    return "--" + name.replace("_", "-"), options
