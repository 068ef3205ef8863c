"""The hour past's quality figures (:mod:`.quality`) in two steps: each user shard counts its own users'
served pairs, hits and scored pool (``hour_counts``), one task adds the shards' counts up into the figures
and records them on the run record before any write (``coverage``; the shadow chain's: ``shadow_coverage``).

No task holds more than one shard's requests or pairs; the adding-up task holds one row a shard and the
scored pool's scores and labels, which the AUC ranks together.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from solaris.config import Settings
from solaris.precompute import quality
from solaris.precompute.pipeline import HOUR_COUNTS, REQUESTED_LABELS, SHADOW, USER_SHARDS
from solaris.precompute.run_files import Meta, code_log, event_log, shard_count, step_staging, timed
from solaris.precompute.spec import HourRun, UserShard
from solaris.store import open_configured_store


def hour_counts(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The shard's counts of the hour past (:func:`.quality.hour_counts`), the shadow chain's coverage counts
    beside them (``shadow_``-prefixed) when a challenger is in shadow, and its scored pool's labels.

    Counted on a rerun too, though the store may by then hold the first attempt's writes: ``coverage`` and
    ``shadow_coverage`` then reuse the figures that attempt recorded and never read these.
    """
    users = UserShard(shard, shard_count(run, USER_SHARDS))
    with timed({"shard": shard}) as meta, open_configured_store(settings) as store:
        stage = step_staging(settings, run, "hour_counts")
        log, codes, ttl = event_log(settings), code_log(settings, run), run.params.ttl_hours
        counts = quality.hour_counts(store, run.embedding_version, log, codes, run.interval_start, ttl, users)
        if run.shadow is not None:
            shadow = quality.coverage_counts(store, run.shadow.embedding_version, log, run.interval_start, users)
            counts |= {SHADOW + key: value for key, value in shadow.items()}
        stage.write(HOUR_COUNTS, pa.table({key: [value] for key, value in counts.items()}), shard)
        labels = quality.requested_labels(log, codes.score_log, run.interval_start, ttl, users)
        meta["rows"] = stage.write(REQUESTED_LABELS, labels, shard)["rows"]
    return meta


def coverage(run: HourRun, settings: Settings) -> Meta:
    """The quality figures of the hour past from every shard's counts (:func:`.quality.figures_of`), on the
    run record at once.

    A rerun of the hour reuses the figures its first attempt recorded: that attempt replaced the aggregates
    and neighbours the hour was served from, so measuring again would report coverage the hour never had.
    """
    with timed({}) as meta, open_configured_store(settings) as store:
        if (earlier := store.get_run(run.run_key)) is not None and earlier.figures:
            meta |= {key: value for key, value in earlier.figures.items() if not key.startswith(SHADOW)}
        else:
            stage = step_staging(settings, run, "coverage")
            counts = summed(stage.read(HOUR_COUNTS, columns=list(quality.HOUR_COUNTS)))
            meta |= quality.figures_of(counts, stage.read(REQUESTED_LABELS, columns=["score", "requested"]))
            store.record_run_figures(run.run_key, meta)
    return meta


def summed(counts: pa.Table) -> dict[str, int]:
    """Each column of the shards' count rows added up."""
    return {name: int(pc.sum(counts[name]).as_py() or 0) for name in counts.column_names}
