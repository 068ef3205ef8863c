"""The hourly precompute, declared once as data: its steps in order, the staged tables each reads and
writes, and the steps that fan out: over user shards (the per-user work, on the ``default`` queue) and over
FM shards (the embedding, in the ``gpu`` pool and queue).

The ``solaris_precompute`` DAG builds its tasks from :data:`PRECOMPUTE`, :mod:`.run` executes it in one
process, and the run record's timings and the main job's table list its steps. Every run also opens with
``resolve`` (pins the versions, opens the run record; its output goes to every step), closes with
``finish`` (gets every step's output) and calls ``fail`` when a step failed (functions of :mod:`.nodes`).
Each step names its code as ``module:function``, imported only when the step runs: stdlib only here, since the
DAG file imports this at parse time.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from solaris.airflow_env import GPU_POOL

OPEN, CLOSE, ON_FAILURE = "resolve", "finish", "fail"
SHADOW = "shadow_"  # the prefix of a shadow step's name, its staged tables and its counts and figures
NODES, SHADOW_NODES, SIMILARITY_NODES, SELECTION_NODES, QUALITY_NODES, EXPOSURE_NODES = (
    f"solaris.precompute.{m}"
    for m in ("nodes", "shadow", "similarity_nodes", "selection_nodes", "quality_nodes", "exposures")
)
NODE_REFERENCE = re.compile(r"[a-z_][a-z0-9_.]*:[a-z_][a-z0-9_]*")
# The two fan-outs, each named by the knob that counts its tasks (solaris.precompute.params): FM shards split
# the selected pairs among embedding tasks; user shards split the users, by a stable hash of the id
# (solaris.precompute.spec.shard_of), so that no per-user task holds another shard's users.
SHARDS, USER_SHARDS = "shards", "user_shards"
FAN_OUTS = (SHARDS, USER_SHARDS)


@dataclass(frozen=True)
class Staged:
    """A table handed from one step to the next as Parquet in the run's staging folder."""

    name: str
    description: str
    sharded_by: str | None = None  # a fan-out (FAN_OUTS): the table is written in that many parts, one a shard

    def __post_init__(self) -> None:
        if self.sharded_by not in (None, *FAN_OUTS):
            raise ValueError(f"staged table {self.name!r}: sharded_by {self.sharded_by!r} is not one of {FAN_OUTS}")

    def file_name(self, shard: int | None = None) -> str:
        if (self.sharded_by is not None) != (shard is not None):
            need = "needs a shard" if self.sharded_by else "has no shards"
            raise ValueError(f"staged table {self.name!r} {need} (got shard={shard!r})")
        return self.name if shard is None else f"{self.name}-{shard}"

    def shadow(self) -> Staged:
        """The same table written for the shadow chain (:data:`SHADOW`), beside the champion's."""
        return Staged(f"{SHADOW}{self.name}", f"{self.description}, for the shadow chain", self.sharded_by)


# The hour past's quality, counted by user shard (solaris.precompute.quality_nodes).
HOUR_COUNTS = Staged(
    "hour_counts",
    "one user shard's counts of the hour past, one row: served pairs covered per tier (the shadow chain's too) "
    "and hits of the pairs earlier runs wrote",
    USER_SHARDS,
)
REQUESTED_LABELS = Staged(
    "requested_labels",
    "the pool scored ttl_hours ago: each pair's score and whether it was requested while it would have been fresh",
    USER_SHARDS,
)
# The exposure counters, counted by user shard, one row a user and one a (user, item) pair shown.
EXPOSURE_USERS = Staged("exposure_users", "the counters of one shard's users as of the hour's start", USER_SHARDS)
EXPOSURE_PAIRS = Staged(
    "exposure_pairs",
    "the counters of each (user, item) pair one shard's users were shown in the longest window",
    USER_SHARDS,
)
# What the candidates count over every user's requests (solaris.precompute.candidates.RequestStats).
REQUEST_STATS = Staged("request_stats", "likely users, co-visitation and popularity over every user's requests")
POOL = Staged("pool", "candidate pairs with their source, minus pairs an earlier run keeps fresh all hour", USER_SHARDS)
# What the demand model reads of every user's requests: each item's listings, counted over all users.
ITEM_LISTINGS = Staged("item_listings", "each item's listings in the requests of the day before the hour")
SCORED = Staged(
    "scored", "the pool scored by the selector, in its rank order, each row's rank class beside it", USER_SHARDS
)
CUT = Staged("cut", "the last pair the selector takes, in the rank order over every user shard (none: all)")
SELECTED = Staged(
    "selected",
    "the pairs the selector chose, with their score (the budget selector's with their demand too)",
    USER_SHARDS,
)
# The FM's history of the selected users, so that an embedding task needs no event log: a worker on the
# ``gpu`` queue reaches only the staging and MLflow (no disk shared with the hosts that hold the logs).
HISTORY = Staged("history", "impressions of the selected users in the FM's history window, as of the hour", USER_SHARDS)
CODES = Staged("codes", "compressed FM codes of one shard's selected pairs", SHARDS)
USER_VECTORS = Staged(
    "user_vectors",
    "the FM's user vector of every active user, flagged when its pair codes are fresh: the KNN's input",
    USER_SHARDS,
)
KNN_INDEX = Staged("knn_index", "the hour's one KNN index over the pooled users' vectors, serialized, and their ids")
NEIGHBOUR_ROWS = Staged(
    "neighbour_rows", "each of one shard's users' knn_k nearest pooled users and their similarities", USER_SHARDS
)
USER_AGGREGATES = Staged(
    "user_aggregates",
    "each of one shard's users' mean pair code over the trailing window, and how many codes it is the mean of",
    USER_SHARDS,
)
SHADOW_CODES, SHADOW_USER_VECTORS, SHADOW_USER_AGGREGATES, SHADOW_KNN_INDEX, SHADOW_NEIGHBOUR_ROWS = (
    t.shadow() for t in (CODES, USER_VECTORS, USER_AGGREGATES, KNN_INDEX, NEIGHBOUR_ROWS)
)


@dataclass(frozen=True)
class Step:
    """One task of the run. ``name`` is the Airflow task id and the timings key; ``node`` its code."""

    name: str
    node: str  # "module:function", called with (run, settings[, shard]); imported when the step runs
    after: tuple[str, ...] = ()  # steps that must have finished (``resolve`` always has)
    reads: tuple[Staged, ...] = ()
    writes: tuple[Staged, ...] = ()
    # A fan-out (FAN_OUTS): one task per shard, each reading its own part of the tables sharded the same way
    # and every part of the others; FM shards run in the GPU pool and queue.
    mapped_over: str | None = None
    figures: bool = False  # its output is the hour's quality figures, not counts
    shadow: bool = False  # ``node`` run for the chain awaiting promotion (solaris.precompute.shadow.shadowed)

    @property
    def per_shard(self) -> bool:
        return self.mapped_over is not None

    @property
    def pool(self) -> str | None:
        return GPU_POOL if self.mapped_over == SHARDS else None

    def code(self) -> Callable[..., Any]:
        module, _, function = self.node.partition(":")
        node = getattr(importlib.import_module(module), function)
        if self.shadow:
            from solaris.precompute.shadow import shadowed

            node = shadowed(node)
        return node


@dataclass(frozen=True)
class Pipeline:
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        """Refuses a declaration whose order or data flow cannot run (checked when the module loads)."""
        seen: dict[str, Step] = {}
        for step in self.steps:
            if step.name in seen or step.name in (OPEN, CLOSE, ON_FAILURE):
                raise ValueError(f"step name {step.name!r} is used twice")
            if not NODE_REFERENCE.fullmatch(step.node):
                raise ValueError(f"step {step.name!r}: its node {step.node!r} is not a 'module:function'")
            if step.shadow and step.name != SHADOW + step.node.partition(":")[2]:
                raise ValueError(f"shadow step {step.name!r} must be named {SHADOW} + its node's function")
            if unknown := [a for a in step.after if a not in seen]:
                raise ValueError(f"step {step.name!r} runs after {unknown}, which are not declared before it")
            made = {t for s in self.ancestors(step, seen) for t in s.writes}
            if missing := [t.name for t in step.reads if t not in made]:
                raise ValueError(f"step {step.name!r} reads {missing}, which no step before it writes")
            if step.mapped_over not in (None, *FAN_OUTS):
                raise ValueError(f"step {step.name!r} is mapped over {step.mapped_over!r}, not one of {FAN_OUTS}")
            # A mapped step writes its own part of tables sharded as it is; a step of its own writes whole tables,
            # or every part of a user-sharded one (the split candidates hands to the per-user steps).
            if wrong := [t.name for t in step.writes if step.per_shard and t.sharded_by != step.mapped_over]:
                raise ValueError(f"step {step.name!r} writes {wrong}: a mapped step writes its own shard's part")
            if wrong := [t.name for t in step.writes if not step.per_shard and t.sharded_by == SHARDS]:
                raise ValueError(f"step {step.name!r} writes {wrong}: FM-shard tables come from the FM-shard steps")
            before = {s.name for s in self.ancestors(step, seen)}
            if step.figures and (beside := [s.name for s in seen.values() if s.figures and s.name not in before]):
                raise ValueError(
                    f"step {step.name!r} records figures beside {beside}: the run record's figures are replaced "
                    "whole, so a figures step must run after every one declared before it"
                )
            seen[step.name] = step

    @staticmethod
    def ancestors(step: Step, declared: dict[str, Step]) -> Iterator[Step]:
        for name in step.after:
            yield declared[name]
            yield from Pipeline.ancestors(declared[name], declared)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"no step {name!r}; steps: {', '.join(self.names)}")


PRECOMPUTE = Pipeline(
    (
        # Coverage of the hour past must read the store before this run writes to it: each user shard counts
        # its users, then the figures are added up. Both figures steps replace the run record's figures with
        # theirs added, so they run one after the other (checked below).
        Step(
            "hour_counts",
            f"{QUALITY_NODES}:hour_counts",
            writes=(HOUR_COUNTS, REQUESTED_LABELS),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "coverage",
            f"{QUALITY_NODES}:coverage",
            after=("hour_counts",),
            reads=(HOUR_COUNTS, REQUESTED_LABELS),
            figures=True,
        ),
        Step(
            "shadow_coverage",
            f"{SHADOW_NODES}:shadow_coverage",
            after=("coverage",),
            reads=(HOUR_COUNTS,),
            figures=True,
        ),
        # The candidates in two passes: what is counted over every user's requests, then each shard's pairs.
        Step("count_requests", f"{NODES}:count_requests", writes=(REQUEST_STATS, ITEM_LISTINGS)),
        Step(
            "candidates",
            f"{NODES}:candidates",
            after=("count_requests",),
            reads=(REQUEST_STATS,),
            writes=(POOL,),
            mapped_over=USER_SHARDS,
        ),
        # The counters every VM reads, as of the hour's start, from the event log alone, counted by user shard
        # and written by one task; after candidates, so that an hour with nothing to precompute writes nothing
        # (its run is skipped), and before the pairs.
        Step(
            "count_exposures",
            f"{EXPOSURE_NODES}:count_exposures",
            after=("candidates",),
            writes=(EXPOSURE_USERS, EXPOSURE_PAIRS),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "exposures",
            f"{EXPOSURE_NODES}:exposures",
            after=("coverage", "shadow_coverage", "count_exposures"),
            reads=(EXPOSURE_USERS, EXPOSURE_PAIRS),
        ),
        # The selection in three steps, so that no task holds every user's pool and the budget stays exact: each
        # user shard scores and ranks its pool, one task finds the last pair taken over all shards from their
        # heads, each shard takes its pairs up to it (solaris.precompute.selection).
        Step(
            "score",
            f"{SELECTION_NODES}:score",
            after=("candidates",),
            reads=(POOL, ITEM_LISTINGS),
            writes=(SCORED,),
            mapped_over=USER_SHARDS,
        ),
        Step("cut", f"{SELECTION_NODES}:cut", after=("score",), reads=(SCORED,), writes=(CUT,)),
        Step(
            "select",
            f"{SELECTION_NODES}:select",
            after=("cut",),
            reads=(SCORED, CUT),
            writes=(SELECTED, HISTORY),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "embed_shard",
            f"{NODES}:embed_shard",
            after=("select",),
            reads=(SELECTED, HISTORY),
            writes=(CODES,),
            mapped_over=SHARDS,
        ),
        Step("write_pairs", f"{NODES}:write_pairs", after=("exposures", "embed_shard"), reads=(CODES,)),
        Step(
            "mean_codes",
            f"{NODES}:mean_codes",
            after=("write_pairs",),
            writes=(USER_AGGREGATES,),
            mapped_over=USER_SHARDS,
        ),
        Step("aggregates", f"{NODES}:aggregates", after=("mean_codes",), reads=(USER_AGGREGATES,)),
        # The pool of neighbours is the users with fresh pair codes, this run's included; no store write.
        Step(
            "user_vectors",
            f"{SIMILARITY_NODES}:user_vectors",
            after=("write_pairs",),
            writes=(USER_VECTORS,),
            mapped_over=USER_SHARDS,
        ),
        # One index an hour over every shard's pooled users, searched by each shard for its own users; the rows
        # written after aggregates, since the store's writers run one at a time.
        Step(
            "knn_index",
            f"{SIMILARITY_NODES}:knn_index",
            after=("user_vectors",),
            reads=(USER_VECTORS,),
            writes=(KNN_INDEX,),
        ),
        Step(
            "knn_search",
            f"{SIMILARITY_NODES}:knn_search",
            after=("knn_index",),
            reads=(USER_VECTORS, KNN_INDEX),
            writes=(NEIGHBOUR_ROWS,),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "neighbours",
            f"{SIMILARITY_NODES}:neighbours",
            after=("aggregates", "knn_search"),
            reads=(NEIGHBOUR_ROWS,),
        ),
        # The A2A tier's item neighbours: among the items with fresh pair codes, this run's included.
        Step("item_neighbours", f"{SIMILARITY_NODES}:item_neighbours", after=("neighbours",)),
        # New-user codes of the recent users' side-feature cohorts (solaris.enrichment.cohorts).
        Step("cohorts", "solaris.precompute.cohort_codes:cohorts", after=("item_neighbours",)),
        # The challenger awaiting promotion, if any: the same selected pairs and the same tiers, with its
        # versions (each step a no-op without one). Its writers follow the champion's, one at a time.
        Step(
            "shadow_embed_shard",
            f"{NODES}:embed_shard",
            shadow=True,
            after=("select",),
            reads=(SELECTED, HISTORY),
            writes=(SHADOW_CODES,),
            mapped_over=SHARDS,
        ),
        Step(
            "shadow_write_pairs",
            f"{NODES}:write_pairs",
            shadow=True,
            after=("shadow_coverage", "shadow_embed_shard", "cohorts"),
            reads=(SHADOW_CODES,),
        ),
        Step(
            "shadow_mean_codes",
            f"{NODES}:mean_codes",
            shadow=True,
            after=("shadow_write_pairs",),
            writes=(SHADOW_USER_AGGREGATES,),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "shadow_aggregates",
            f"{NODES}:aggregates",
            shadow=True,
            after=("shadow_mean_codes",),
            reads=(SHADOW_USER_AGGREGATES,),
        ),
        Step(
            "shadow_user_vectors",
            f"{SIMILARITY_NODES}:user_vectors",
            shadow=True,
            after=("shadow_write_pairs",),
            writes=(SHADOW_USER_VECTORS,),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "shadow_knn_index",
            f"{SIMILARITY_NODES}:knn_index",
            shadow=True,
            after=("shadow_user_vectors",),
            reads=(SHADOW_USER_VECTORS,),
            writes=(SHADOW_KNN_INDEX,),
        ),
        Step(
            "shadow_knn_search",
            f"{SIMILARITY_NODES}:knn_search",
            shadow=True,
            after=("shadow_knn_index",),
            reads=(SHADOW_USER_VECTORS, SHADOW_KNN_INDEX),
            writes=(SHADOW_NEIGHBOUR_ROWS,),
            mapped_over=USER_SHARDS,
        ),
        Step(
            "shadow_neighbours",
            f"{SIMILARITY_NODES}:neighbours",
            shadow=True,
            after=("shadow_aggregates", "shadow_knn_search"),
            reads=(SHADOW_NEIGHBOUR_ROWS,),
        ),
        Step(
            "shadow_item_neighbours", f"{SIMILARITY_NODES}:item_neighbours", shadow=True, after=("shadow_neighbours",)
        ),
        Step(
            "shadow_cohorts", "solaris.precompute.cohort_codes:cohorts", shadow=True, after=("shadow_item_neighbours",)
        ),
        Step("expire", f"{NODES}:expire", after=("shadow_cohorts",)),
        # Promotes the challenger once it has been written ``shadow_hours``, or refuses it (:mod:`.shadow`).
        Step("shadow_gate", f"{SHADOW_NODES}:shadow_gate", after=("expire",)),
    )
)
