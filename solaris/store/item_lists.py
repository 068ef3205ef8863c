"""The A2A tier's item lists, held in the reading process.

A version's lists are written once an hour (one row per catalogue item), but every request needs those of
its 200 candidates: reading them with each request was a third of the serving statement's time. So a reader
keeps each version's lists in memory as the store last held them, with their generation
(``item_list_generations``, moved by every write and expiry of lists in the same transaction), and the
serving statement returns only the generation; the lists are read again when it has moved. Point in time is
kept on the copy: a list serves at ``t`` only when ``created_at <= t < expires_at``, as the table read does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from solaris.store.codec import decode_lists
from solaris.store.combine import ItemLists


@dataclass(frozen=True)
class ItemListSnapshot:
    """One version's lists at one generation, sorted by item, each padded to the longest (id -1, similarity 0)."""

    generation: int
    items: np.ndarray
    created_at: np.ndarray
    expires_at: np.ndarray
    neighbour_ids: np.ndarray  # [items, k]
    similarities: np.ndarray  # [items, k]

    @classmethod
    def from_rows(cls, rows: Sequence[tuple]) -> ItemListSnapshot:
        """From ``read_item_lists`` rows ``(generation, item_id, created_at, expires_at, neighbours)``, sorted
        by item; a version without lists comes as one row of NULLs."""
        lists = [row for row in rows if row[1] is not None]
        blobs = [bytes(row[4]) for row in lists]
        slots = np.array([len(blob) // 8 for blob in blobs], np.int64)
        flat_ids, flat_sims = decode_lists(b"".join(blobs), slots)
        width = int(slots.max(initial=0))
        slot = np.arange(width)
        filled = slot < slots[:, None]  # a list written with a smaller k than another write's
        neighbour_ids = np.full((len(lists), width), -1, np.int64)
        similarities = np.zeros((len(lists), width))
        neighbour_ids[filled], similarities[filled] = flat_ids, flat_sims
        columns = (np.array([row[k] for row in lists], np.int64) for k in (1, 2, 3))
        return cls(int(rows[0][0]), *columns, neighbour_ids, similarities)

    def lists_at(self, items: np.ndarray, t: int) -> ItemLists:
        """The lists of the sorted distinct ``items`` that are fresh at ``t`` (epoch microseconds)."""
        if not len(self.items) or not len(items):
            return ItemLists.empty()
        at = np.minimum(np.searchsorted(self.items, items), len(self.items) - 1)
        fresh = (self.items[at] == items) & (self.created_at[at] <= t) & (self.expires_at[at] > t)
        rows = at[fresh]
        return ItemLists(items[fresh], self.neighbour_ids[rows], self.similarities[rows])


class ItemListCache:
    """Each version's :class:`ItemListSnapshot`, replaced whole when a read finds another generation.

    Safe across threads without a lock: a snapshot never changes, and replacing a dict entry is atomic; two
    reads that find the same new generation may both load it."""

    def __init__(self) -> None:
        self._snapshots: dict[str, ItemListSnapshot] = {}

    def lists_at(
        self, version: str, generation: int | None, items: np.ndarray, t: int, load: Callable[[], Sequence[tuple]]
    ) -> ItemLists:
        """The fresh lists of ``items`` at ``t``, from memory when ``generation`` (read with the request's
        tiers; None when the version has no lists) is the one held, else after ``load`` (``read_item_lists``)."""
        if generation is None:
            return ItemLists.empty()
        snapshot = self._snapshots.get(version)
        if snapshot is None or snapshot.generation != generation:
            # a generation row is never deleted (expiry moves it), so the load finds it
            snapshot = self._snapshots[version] = ItemListSnapshot.from_rows(load())
        return snapshot.lists_at(items, t)
