"""The hourly precompute as pure node functions, one per DAG task, in the order the DAG runs them.

Each node takes the run (its target hour, pinned versions and parameters, see :mod:`.spec`) and the
settings, reads its inputs from the run's Parquet staging or the store, writes its outputs there, and
returns a small JSON-able dict (counts and its ``seconds``) that travels on as XCom. ``run_hour`` in
:mod:`.run` calls the same nodes without Airflow.

Rerun contract: a rerun of an hour must decide exactly as its first attempt did, although the first attempt
already wrote rows. The freshness checks ignore the pairs the hour's own code log lists
(:func:`earlier_fresh`), the verifier scores without store features (they change as the run writes), the KNN
step starts from the state saved before the hour, and everything else derives from the event log and the
staged tables, all of which a rerun reproduces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.config import Settings
from solaris.enrichment.aggregates import user_aggregates
from solaris.precompute.candidates import (
    CandidateConfig,
    RequestStats,
    candidates_of,
    count_by_source,
    request_stats,
)
from solaris.precompute.demand_features import item_listings_of
from solaris.precompute.expiry import plan_expiry
from solaris.precompute.fm_pool import add_requeued, drop_still_fresh, earlier_fresh, requeue_misses
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.pipeline import (
    CODES,
    HISTORY,
    ITEM_LISTINGS,
    POOL,
    PRECOMPUTE,
    REQUEST_STATS,
    SELECTED,
    USER_AGGREGATES,
    USER_SHARDS,
)
from solaris.precompute.quality import INSTANT
from solaris.precompute.run_files import (
    DEGENERATE,
    Meta,
    code_log,
    code_log_of,
    event_log,
    shard_count,
    staging,
    step_staging,
    timed,
)
from solaris.precompute.selector_choice import choose_selector
from solaris.precompute.spec import HourRun, ShadowChain, UserShard, run_key, shard_of, target_interval
from solaris.precompute.staging import StepStaging, expire_failed_staging
from solaris.store import FeatureStore, open_configured_store
from solaris.store.codec import from_micros
from solaris.store.validate import finite_rows

if TYPE_CHECKING:  # mlflow: imported only by the steps that use the registry
    from mlflow import MlflowClient


class NothingToPrecompute(Exception):
    """The hour has no input to guess candidates from (before the log starts, after it ends, an outage).

    Not a failure, and not a success with every count 0: the caller closes the run record as skipped
    (:func:`skip`) and reports the reason, this exception's message.
    """


# -- nodes ----------------------------------------------------------------------------------------------


def resolve(
    settings: Settings, data_interval_end: datetime, params: Mapping[str, Any] | None, started_at: datetime
) -> Meta:
    """Pin the lead VM's @champion chain (and the demand model's, for the budget selector, unless it is under its
    floor and the verifier runs instead: :mod:`.selector_choice`) once for the whole run, and
    the chain awaiting promotion for the shadow steps; register their embedding versions, mark failed the runs
    an earlier run left ``running`` (counted as ``swept_runs``), open the run record."""
    from solaris.embedding_version import parse_embedding_version
    from solaris.tracking import registry

    with timed({}) as meta:
        checked = PrecomputeParams.from_mapping(dict(params or {}))
        start, end = target_interval(data_interval_end)
        client = registry.connect(settings)
        lead = settings.vms()[0].name
        pinned = registry.resolve_champions(client, lead)
        asked = checked.selector == "budget"
        choice = choose_selector(checked, registry.resolve_demand(client) if asked else None)
        checked = replace(checked, selector=choice.selector)
        fm, ae, dim, _ = parse_embedding_version(pinned.embedding_version)
        shadow = _shadow_chain(client, lead, pinned.embedding_version)
        run = HourRun(
            run_key(start),
            start,
            end,
            fm,
            ae,
            pinned.vm,
            lead,
            pinned.embedding_version,
            dim,
            checked,
            choice.demand_version,
            shadow,
        )
        with open_configured_store(settings, init=True) as store:
            for version in (pinned.embedding_version, *([shadow.embedding_version] if shadow else [])):
                _register_version(store, version, start)
            reason = f"its run ended before it finished (a killed task, a stopped stack); found by run {run.run_key}"
            if swept := store.sweep_unfinished_runs(reason, started_at, keep=run.run_key):
                meta["swept_runs"] = len(swept)
            store.start_run(
                run.run_key,
                start,
                end,
                fm,
                ae,
                pinned.vm,
                pinned.embedding_version,
                started_at,
                choice.selector,
                choice.reason,
            )
        meta["run"] = run.as_xcom()
    return meta


def _shadow_chain(client: MlflowClient, lead: str, champion_version: str) -> ShadowChain | None:
    """The chain awaiting promotion, unless it reads the champion's embedding version (nothing to fill)."""
    from solaris.embedding_version import parse_embedding_version
    from solaris.tracking import registry

    found = registry.resolve_shadow(client, lead)
    if found is None or found.embedding_version == champion_version:
        return None
    dim = parse_embedding_version(found.embedding_version)[2]
    return ShadowChain(found.fm, found.ae, found.vm, found.embedding_version, dim)


def _register_version(store: FeatureStore, version: str, start: datetime) -> None:
    from solaris.embedding_version import parse_embedding_version

    fm, ae, dim, dtype = parse_embedding_version(version)
    registered = store.register_embedding_version(fm, ae, dim, dtype, created_at=start)
    if registered != version:
        raise ValueError(f"store version {registered!r} differs from the VM's {version!r}")


def count_requests(run: HourRun, settings: Settings) -> Meta:
    """What the candidates count over every user's requests of the lookback (:class:`.RequestStats`: the likely
    users, co-visitation, popularity) and the item listings the demand model reads, both an hour of the log at
    a time. A lookback without requests (then the re-queue's last hour has none either) leaves nothing to
    precompute."""
    with timed({}) as meta:
        log, start = event_log(settings), run.interval_start
        config = CandidateConfig(max_users=run.params.likely_users)
        stats = request_stats(log, start, config)
        if stats.empty:
            lookback = config.lookback / timedelta(hours=1)
            raise NothingToPrecompute(
                f"nothing to precompute for {start:%Y-%m-%d %H}:00 UTC: the event log has no requests in the "
                f"{lookback:g} h before it"
            )
        stage = step_staging(settings, run, "count_requests")
        stage.write(REQUEST_STATS, stats.to_table())
        meta["rows"] = stage.write(ITEM_LISTINGS, item_listings_of(log, start).to_table())["rows"]
    return meta


def candidates(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The shard's speculative candidates (its likely users') plus its users' misses of the last hour, minus
    pairs an earlier run keeps fresh all hour; its users' requests read with their ids in the scan filter.

    "Fresh all hour" is fresh at the hour's last instant: a row expiring at the hour's end still serves the
    whole hour. Rows start and expire on hour boundaries, so that is exactly "fresh at the start", and the
    run never overwrites a row its re-queue check counted as covered, which keeps a rerun's view unchanged.
    """
    users = UserShard(shard, shard_count(run, USER_SHARDS))
    with timed({"shard": shard}) as meta, open_configured_store(settings) as store:
        log, stage = event_log(settings), step_staging(settings, run, "candidates")
        start, end = run.interval_start, run.interval_end
        own = code_log(settings, run).read(start, end, with_codes=False, users=users)
        fresh = earlier_fresh(store, run.embedding_version, own.user_ids, own.item_ids)
        stats = RequestStats.from_table(stage.read(REQUEST_STATS))
        likely = stats.likely_users[users.holds(stats.likely_users)]
        found = candidates_of(log, stats, likely, start, end, CandidateConfig())
        requeued = requeue_misses(log, start, fresh, users=users)
        pool = add_requeued(found, requeued)
        kept = drop_still_fresh(pool, fresh, end - INSTANT)
        meta["rows"] = stage.write(POOL, kept, shard)["rows"]
        meta |= {f"candidates_{k}": v for k, v in count_by_source(found).items()}
        meta |= {"requeued": len(requeued), "pool": len(pool), "still_fresh": len(pool) - len(kept)}
    return meta


def embed_shard(run: HourRun, settings: Settings, shard: int) -> Meta:
    """FM embeddings of one shard's selected pairs as of the hour, compressed by the pinned AE; a code the store
    would refuse (non-finite as stored) is left out and counted, so it reaches neither the code log nor the store."""
    from solaris.embedding_version import check_ae_fm
    from solaris.models.autoencoder import Autoencoder
    from solaris.models.features import HistoryIndex
    from solaris.models.fm import FoundationModel
    from solaris.precompute.embedding import embed_codes, of_users
    from solaris.tracking import registry

    if not 0 <= shard < run.params.shards:
        raise ValueError(f"shard {shard} is outside 0..{run.params.shards - 1}")
    with timed({"shard": shard}) as meta:
        stage = step_staging(settings, run, "embed_shard")
        selected = stage.read(SELECTED, columns=["user_id", "item_id", "score"])
        mine = shard_of(selected["user_id"].to_numpy(), run.params.shards) == shard
        # In (user, item) order, so that the FM's batches, and the codes, are the same whatever the user shards.
        rows = selected.filter(pa.array(mine)).sort_by([("user_id", "ascending"), ("item_id", "ascending")])
        registry.connect(settings)
        fm, ae = registry.load_fm(run.fm_version), registry.load_ae(run.ae_version)
        if not isinstance(fm, FoundationModel) or not isinstance(ae, Autoencoder):
            raise ValueError(f"FM {run.fm_version} / AE {run.ae_version} are not SOLARIS models")
        check_ae_fm(run.ae_version, ae.config.fm_version, run.fm_version)
        users, items = rows["user_id"].to_numpy(), rows["item_id"].to_numpy()
        index = HistoryIndex.from_table(of_users(stage.read(HISTORY), users))
        codes = embed_codes(fm, ae, index, users, items, run.interval_start, run.params.batch_size, run.params.device)
        storable = finite_rows(codes, run.code_dtype)
        rows, codes = rows.filter(pa.array(storable)), codes[storable]
        meta[DEGENERATE["pair"]] = int((~storable).sum())
        table = rows.append_column("code", pa.FixedSizeListArray.from_arrays(pa.array(codes.ravel()), run.code_dim))
        meta["embedded"] = stage.write(CODES, table, shard)["rows"]
    return meta


def write_pairs(run: HourRun, settings: Settings) -> Meta:
    """Every shard's codes to the code log, then to the store, each with its expiry (:mod:`.expiry`): one
    transaction per expiry hour, the unit PostgreSQL partitions pair rows by. A challenger in shadow writes the
    champion's selection, and plans its expiries from the champion's code log: its pairs then expire as the
    champion's do, and its pair tier is as full as the champion's when it is promoted."""
    with timed({}) as meta, open_configured_store(settings) as store:
        users, items, scores, codes = _staged_codes(step_staging(settings, run, "write_pairs"), run)
        log, p = code_log(settings, run), run.params
        planned_by = log
        if run.is_shadow:
            from solaris.embedding_version import parse_embedding_version

            planned_by = code_log_of(settings, run.shadow_of, parse_embedding_version(run.shadow_of).dim)
        expires = plan_expiry(planned_by, run.interval_start, users, items, p.ttl_hours, p.expiry_jitter_hours)
        log.write_hour(run.interval_start, users, items, scores, codes, expires)
        meta["pairs_written"] = 0
        for at in np.unique(expires):
            mine = expires == at
            meta["pairs_written"] += store.write_pair_embeddings(
                run.run_key,
                run.embedding_version,
                users[mine],
                items[mine],
                codes[mine],
                scores[mine],
                run.interval_start,
                from_micros(int(at.astype(np.int64))),
            )
    return meta


def _staged_codes(stage: StepStaging, run: HourRun) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(users, items, scores, codes) of every FM shard's codes, copied out of the staged tables, which go when
    this returns: at a million users they held another 0.4 GB through the code log's and the store's writes."""
    table = pa.concat_tables([stage.read(CODES, s) for s in range(run.params.shards)])
    codes = pc.list_flatten(table["code"]).to_numpy().reshape(table.num_rows, run.code_dim)
    return table["user_id"].to_numpy(), table["item_id"].to_numpy(), table["score"].to_numpy(), codes


def mean_codes(run: HourRun, settings: Settings, shard: int) -> Meta:
    """Each of the shard's users' mean pair code over the trailing window, from the code log (the store's TTL
    is shorter), reading its users' codes only."""
    users = UserShard(shard, shard_count(run, USER_SHARDS))
    with timed({"shard": shard}) as meta:
        start, window = run.interval_start, run.params.window_hours
        codes = code_log(settings, run).read(start - timedelta(hours=window - 1), run.interval_end, users=users)
        ids, means, counts = user_aggregates(codes.user_ids, codes.codes, codes.created_at, start, window)
        table = pa.table(
            {
                "user_id": pa.array(ids, pa.int64()),
                "mean": pa.FixedSizeListArray.from_arrays(pa.array(means.ravel()), means.shape[1]),
                "codes": pa.array(counts, pa.int64()),
            }
        )
        meta["rows"] = step_staging(settings, run, "mean_codes").write(USER_AGGREGATES, table, shard)["rows"]
    return meta


def aggregates(run: HourRun, settings: Settings) -> Meta:
    """The shards' user aggregates to the store, a shard at a time (each user's row replaces its last)."""
    with timed({}) as meta, open_configured_store(settings) as store:
        stage = step_staging(settings, run, "aggregates")
        meta["aggregates_written"] = 0
        for shard in range(shard_count(run, USER_SHARDS)):
            part = stage.read(USER_AGGREGATES, shard)
            dim = part.schema.field("mean").type.list_size
            means = pc.list_flatten(part["mean"]).to_numpy().reshape(part.num_rows, dim)
            meta["aggregates_written"] += store.write_user_aggregates(
                run.run_key,
                run.embedding_version,
                part["user_id"].to_numpy(),
                means,
                part["codes"].to_numpy(),
                run.params.window_hours,
                run.interval_start,
                run.expires_at,
            )
    return meta


def expire(run: HourRun, settings: Settings) -> Meta:
    """Delete what expired by the hour's start (reads already ignore it; this reclaims the space), and the code
    and score logs' hours older than the retention (``expired_code_log_hours`` / ``_score_log_hours``: files gone)."""
    with timed({}) as meta, open_configured_store(settings) as store:
        meta |= {f"expired_{k}": v for k, v in store.expire(run.interval_start).items()}
        kept_from = run.interval_start - timedelta(hours=run.params.code_log_retention_hours)
        meta["expired_code_log_hours"] = code_log(settings, run).prune(kept_from)
        meta["expired_score_log_hours"] = code_log(settings, run).score_log.prune(kept_from)
        meta["expired_failed_staging"] = expire_failed_staging(store, settings.staging_root, kept_from)
    return meta


def finish(
    run: HourRun,
    settings: Settings,
    resolved: Meta,
    outputs: Mapping[str, Meta | Sequence[Meta]],
    finished_at: datetime,
) -> Meta:
    """Close the run record (counts, seconds per step), log the run to MLflow, remove the staging.

    ``outputs`` holds every declared step's output, a list of them for a step mapped over shards.
    """
    if missing := [name for name in PRECOMPUTE.names if name not in outputs]:
        raise ValueError(f"finish needs the output of step(s) {', '.join(missing)}")
    timings, figures = {"resolve": float(resolved["seconds"])}, {}
    counts = {"swept_runs": int(resolved["swept_runs"])} if resolved.get("swept_runs") else {}
    for step in PRECOMPUTE.steps:
        metas = list(outputs[step.name]) if step.per_shard else [outputs[step.name]]  # type: ignore[list-item]
        timings[step.name] = float(sum(m["seconds"] for m in metas))
        for meta in metas:
            for key, value in meta.items():
                if key in ("seconds", "rows", "shard"):
                    continue
                if step.figures:
                    figures[key] = float(value)
                elif isinstance(value, int | np.integer):
                    counts[key] = counts.get(key, 0) + int(value)
    with open_configured_store(settings) as store:
        store.finish_run(run.run_key, "succeeded", counts, timings, finished_at)
    from solaris.precompute.summary import log_run  # MLflow is imported only where a run finishes

    log_run(run, settings, counts, timings, figures)
    staging(settings, run).cleanup()
    return {"run_key": run.run_key, "counts": counts, "timings": timings, "quality": figures}


def skip(run: HourRun, settings: Settings, finished_at: datetime) -> None:
    """Close the run record as skipped, with no counts: :class:`NothingToPrecompute` stopped it before any
    staging or store write."""
    with open_configured_store(settings) as store:
        store.finish_run(run.run_key, "skipped", {}, {}, finished_at)


def fail(run: HourRun, settings: Settings, finished_at: datetime) -> None:
    """Mark the run record failed; its staging stays for the retry to reuse."""
    with open_configured_store(settings) as store:
        if store.get_run(run.run_key) is not None:
            store.finish_run(run.run_key, "failed", {}, {}, finished_at)


def hour_run(meta: Meta) -> HourRun:
    return HourRun.from_xcom(meta["run"])
