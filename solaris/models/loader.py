"""Streams a span of the log in blocks of hour partitions, so training never holds the whole log.

Blocks come in a seeded shuffled order and rows are shuffled within a block: minibatches mix hours without
reading more than ``block_hours`` partitions at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.models.splits import Span


def hour_blocks(span: Span, block_hours: int) -> list[Span]:
    if block_hours < 1:
        raise ValueError(f"block_hours must be at least 1, got {block_hours}")
    starts = [span.start + k * block_hours * HOUR for k in range(-(-span.hours // block_hours))]
    return [Span(s, min(s + block_hours * HOUR, span.end)) for s in starts]


def stream_impressions(
    log: EventLog, span: Span, block_hours: int, rng: np.random.Generator | None = None
) -> Iterator[pa.Table]:
    """Impressions of ``span`` block by block: time order without ``rng``, shuffled blocks with it."""
    blocks = hour_blocks(span, block_hours)
    order = rng.permutation(len(blocks)) if rng is not None else range(len(blocks))
    for k in order:
        table = log.impressions(blocks[k].start, blocks[k].end)
        if table.num_rows:
            yield table


def minibatches(
    arrays: tuple[np.ndarray, ...], batch_size: int, rng: np.random.Generator | None = None
) -> Iterator[tuple[np.ndarray, ...]]:
    n = arrays[0].shape[0]
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for s in range(0, n, batch_size):
        take = order[s : s + batch_size]
        yield tuple(a[take] for a in arrays)
