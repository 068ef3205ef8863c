"""Model inputs built in batches: side-feature lookup tables and the last-N interaction history.

Every model takes one float32 matrix whose columns are named here (a registered model's pyfunc serves a single
matrix, and a named layout is a signature the ranker and the precompute can check). Ids travel as float32,
exact up to 2**24, so larger ids are refused rather than silently rounded.

The history of a (user, ts) pair is the user's last N impressions strictly before ts, found for a whole batch
at once by ``searchsorted`` over impressions sorted by (user, ts). Training, evaluation and the precompute
all call :meth:`HistoryIndex.lookup`, so features at serving time are built exactly as in training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris import exposure
from solaris.data.idmap import UNKNOWN

MAX_EXACT_ID = 2**24
US_PER_HOUR = 3_600_000_000
HISTORY_FIELDS = ("h_item", "h_click", "h_conv", "h_gap")
BASE_COLUMNS = ("user_id", "item_id", "hour", "position")
TIERS = ("pair", "agg", "knn", "a2a")  # the store's tiers, in the order the VM's inputs hold them
# The order that names the tier feeding a candidate (the first present) and that coverage accumulates in.
# The value closest to the pair code it stands in for first: on the tiny replay's served rows (seed 0) that
# hold a pair code and every other tier, the mean cosine of each tier's value to the pair code is a2a 0.958,
# user aggregate 0.907, neighbours 0.864 (the serving FM version, 20,654 rows); the NE ladder agrees.
FEEDING_ORDER = ("pair", "a2a", "agg", "knn")
# What every VM sees besides the tiers: the base columns and the exposure counters as the store serves them.
VM_BASE_COLUMNS = BASE_COLUMNS + exposure.columns()


def ts_micros(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False)


def hour_start(ts_us: np.ndarray) -> np.ndarray:
    return np.asarray(ts_us, dtype=np.int64) // US_PER_HOUR * US_PER_HOUR


def hour_of_day(ts_us: np.ndarray) -> np.ndarray:
    return (np.asarray(ts_us, dtype=np.int64) // US_PER_HOUR) % 24


def check_ids(values: np.ndarray, what: str, allow_unknown: bool = False) -> np.ndarray:
    """Dense ids in [0, 2**24); ``allow_unknown`` (a served request) also takes ``UNKNOWN``, the id of a raw id
    the world's map lacks, which every id table maps to its 'unknown' row (:meth:`IdTable.rows`)."""
    values = np.asarray(values, dtype=np.int64)
    low = UNKNOWN if allow_unknown else 0
    bad = (values < low) | (values >= MAX_EXACT_ID)
    if bad.any():
        raise ValueError(f"{what}: id {int(values[bad][0])} outside [{low}, {MAX_EXACT_ID}) cannot be a model input")
    return values


@dataclass(frozen=True)
class IdTable:
    """Dense id -> side-feature rows. Row 0 is 'unknown' so unseen ids embed to a learned default."""

    features: np.ndarray  # (vocab + 1, k) int64, categories shifted by +1 (0 = unknown)
    names: tuple[str, ...]

    @property
    def vocab(self) -> int:
        return self.features.shape[0]

    @property
    def cardinalities(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.features.max(axis=0) + 1) if self.features.size else ()

    @classmethod
    def from_table(cls, table: pa.Table, id_column: str, prefix: str) -> IdTable:
        if id_column not in table.column_names:
            raise ValueError(f"side-feature table lacks its id column {id_column!r}")
        names = tuple(c for c in table.column_names if c.startswith(prefix))
        ids = check_ids(table[id_column].to_numpy(), id_column)
        features = np.zeros((int(ids.max(initial=-1)) + 2, len(names)), dtype=np.int64)
        for j, name in enumerate(names):
            col = table[name].to_numpy(zero_copy_only=False).astype(np.int64)
            if (col < 0).any():
                raise ValueError(f"side feature {name!r} has negative values; expected small categorical ints")
            features[ids + 1, j] = col + 1
        return cls(features=features, names=names)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Row index per id: id + 1 when known, else 0."""
        ids = np.asarray(ids, dtype=np.int64)
        return np.where((ids >= 0) & (ids < self.vocab - 1), ids + 1, 0)


@dataclass(frozen=True)
class History:
    item: np.ndarray  # (n, N) int64, -1 where the slot is empty
    click: np.ndarray  # (n, N) float32
    conv: np.ndarray  # (n, N) float32
    gap: np.ndarray  # (n, N) float32, log1p(hours between the past impression and the query)

    def matrix(self) -> np.ndarray:
        return np.concatenate([self.item.astype(np.float32), self.click, self.conv, self.gap], axis=1, dtype=np.float32)


@dataclass(frozen=True)
class HistoryIndex:
    """Impressions sorted by (user, ts), plus their (user, item) keys and times sorted by (user, item, ts):
    the source of every history lookup and exposure count."""

    user: np.ndarray
    ts: np.ndarray
    item: np.ndarray
    click: np.ndarray
    conv: np.ndarray
    pair_key: np.ndarray
    pair_ts: np.ndarray

    @classmethod
    def from_table(cls, impressions: pa.Table) -> HistoryIndex:
        user = impressions["user_id"].to_numpy().astype(np.int64)
        ts = ts_micros(impressions["ts"])
        item = impressions["item_id"].to_numpy().astype(np.int64)
        order = np.lexsort((ts, user))
        key = pair_key(check_ids(user, "user_id"), check_ids(item, "item_id"))
        by_pair = np.lexsort((ts, key))
        return cls(
            user=user[order],
            ts=ts[order],
            item=item[order],
            click=impressions["click"].to_numpy().astype(np.float32)[order],
            conv=impressions["conversion"].to_numpy().astype(np.float32)[order],
            pair_key=key[by_pair],
            pair_ts=ts[by_pair],
        )

    def __len__(self) -> int:
        return int(self.user.size)

    def exposure_counts(self, users: np.ndarray, items: np.ndarray, ts_us: np.ndarray) -> np.ndarray:
        """log1p of :meth:`exposure_raw`: the FM's and the VMs' counter inputs."""
        return np.log1p(self.exposure_raw(users, items, ts_us)).astype(np.float32)

    def exposure_raw(self, users: np.ndarray, items: np.ndarray, ts_us: np.ndarray) -> np.ndarray:
        """Counts of the user's impressions, and of this (user, item) pair, in each window before ts
        (columns :func:`solaris.exposure.columns`), int64.

        Fatigue builds over more impressions than a history of N slots holds; counts over fixed windows
        carry it whatever N is.
        """
        users, ts_us = np.asarray(users, dtype=np.int64), np.asarray(ts_us, dtype=np.int64)
        keys = pair_key(users, np.asarray(items, dtype=np.int64))
        columns = []
        for sorted_keys, sorted_ts, query in ((self.user, self.ts, users), (self.pair_key, self.pair_ts, keys)):
            lo = np.searchsorted(sorted_keys, query, side="left")
            hi = np.searchsorted(sorted_keys, query, side="right")
            end = segment_searchsorted(sorted_ts, lo, hi, ts_us)
            for hours in exposure.WINDOWS_H:
                start = segment_searchsorted(sorted_ts, lo, hi, ts_us - hours * US_PER_HOUR)
                columns.append(end - start)
        return np.stack(columns, axis=1).astype(np.int64)

    def served_exposure(self, users: np.ndarray, items: np.ndarray, ts_us: np.ndarray) -> np.ndarray:
        """The raw counts the store serves at ``ts``: as of the start of its hour, when the precompute wrote them."""
        return self.exposure_raw(users, items, hour_start(ts_us))

    def lookup(self, users: np.ndarray, ts_us: np.ndarray, n: int) -> History:
        """The last ``n`` impressions of each user strictly before each ``ts`` (most recent first)."""
        users = np.asarray(users, dtype=np.int64)
        ts_us = np.asarray(ts_us, dtype=np.int64)
        # Lexicographic search on (user, ts): find the user's segment, then the ts within it.
        seg_lo = np.searchsorted(self.user, users, side="left")
        seg_hi = np.searchsorted(self.user, users, side="right")
        pos = segment_searchsorted(self.ts, seg_lo, seg_hi, ts_us)
        count = np.minimum(pos - seg_lo, n)
        offsets = np.arange(n)
        valid = offsets[None, :] < count[:, None]
        idx = np.where(valid, pos[:, None] - 1 - offsets[None, :], 0)
        take = np.clip(idx, 0, max(len(self) - 1, 0))

        def gather(values: np.ndarray, empty: float) -> np.ndarray:
            out = values[take] if len(self) else np.zeros(take.shape, dtype=values.dtype)
            return np.where(valid, out, empty)

        gap_hours = np.maximum(ts_us[:, None] - gather(self.ts, 0), 0) / US_PER_HOUR
        return History(
            item=gather(self.item, -1).astype(np.int64),
            click=gather(self.click, 0).astype(np.float32),
            conv=gather(self.conv, 0).astype(np.float32),
            gap=np.where(valid, np.log1p(gap_hours), 0).astype(np.float32),
        )


def segment_searchsorted(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray, query: np.ndarray) -> np.ndarray:
    """First index in ``[lo, hi)`` with ``ts >= query``, for every query at once (vectorised bisection)."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        probe = ts[np.minimum(mid, ts.size - 1)] if ts.size else np.zeros_like(mid)
        go_right = active & (probe < query)
        lo = np.where(go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)


def pair_key(users: np.ndarray, items: np.ndarray) -> np.ndarray:
    return users * MAX_EXACT_ID + items


def history_columns(n: int) -> tuple[str, ...]:
    return tuple(f"{field}_{i}" for field in HISTORY_FIELDS for i in range(n))


def base_matrix(users: np.ndarray, items: np.ndarray, ts_us: np.ndarray, position: np.ndarray) -> np.ndarray:
    """The columns of :data:`BASE_COLUMNS` as float32; an unknown id (a request's) is one too."""
    return np.stack(
        [
            check_ids(users, "user_id", allow_unknown=True),
            check_ids(items, "item_id", allow_unknown=True),
            hour_of_day(ts_us),
            np.asarray(position, dtype=np.int64),
        ],
        axis=1,
    ).astype(np.float32)


def vm_base_matrix(
    users: np.ndarray, items: np.ndarray, ts_us: np.ndarray, position: np.ndarray, exposure_raw: np.ndarray
) -> np.ndarray:
    """The columns of :data:`VM_BASE_COLUMNS` from raw exposure counts (the store's, or
    :meth:`HistoryIndex.served_exposure`'s: the same values)."""
    counts = np.asarray(exposure_raw, np.float64)
    if counts.shape != (len(users), len(exposure.columns())) or (counts < 0).any():
        raise ValueError(f"exposure counts of shape {counts.shape} cannot feed {len(users)} rows")
    return np.concatenate([base_matrix(users, items, ts_us, position), np.log1p(counts)], axis=1, dtype=np.float32)


def fm_matrix(impressions: pa.Table, index: HistoryIndex, n: int) -> np.ndarray:
    """FM inputs for logged impressions: base columns, exposure counts, then the history, all as of each
    impression's ts."""
    users, items = impressions["user_id"].to_numpy(), impressions["item_id"].to_numpy()
    ts = ts_micros(impressions["ts"])
    return pair_matrix(users, items, ts, impressions["position"].to_numpy(), index, n)


def hour_start_matrix(
    impressions: pa.Table, index: HistoryIndex, n: int, age_hours: np.ndarray | None = None, at_position: bool = False
) -> np.ndarray:
    """FM inputs for logged impressions as the precompute builds them: as of the start of each impression's
    hour (or of the hour ``age_hours`` before it, for a code written that much earlier and still fresh), at
    position 0 (the precompute embeds before the hour's requests and knows no position; ``at_position``: the
    impression's own, for an ablation)."""
    users, items = impressions["user_id"].to_numpy(), impressions["item_id"].to_numpy()
    start = hour_start(ts_micros(impressions["ts"]))
    if age_hours is not None:
        start = start - np.asarray(age_hours, np.int64) * US_PER_HOUR
    position = impressions["position"].to_numpy() if at_position else np.zeros(len(start), np.int64)
    return pair_matrix(users, items, start, position, index, n)


def pair_matrix(
    users: np.ndarray, items: np.ndarray, ts_us: np.ndarray, position: np.ndarray, index: HistoryIndex, n: int
) -> np.ndarray:
    """FM inputs for any (user, item, ts) batch: the precompute calls this with candidate pairs."""
    base = base_matrix(users, items, ts_us, position)
    counts = index.exposure_counts(users, items, ts_us)
    return np.concatenate([base, counts, index.lookup(users, ts_us, n).matrix()], axis=1)


def labels(impressions: pa.Table) -> np.ndarray:
    """(n, 2) float32: click, conversion."""
    return np.stack([impressions["click"].to_numpy(), impressions["conversion"].to_numpy()], axis=1).astype(np.float32)
