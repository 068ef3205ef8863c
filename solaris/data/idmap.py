"""A world's map between the ids its log came with (raw) and the dense ids its models use (0..n-1).

A team's ids are text ("ad-8") or integers of any size, often sparse; a model embeds an id as a row of a table
(exact as float32 below 2**24), so the importer numbers each distinct raw id densely and keeps the map in the
log's folder. The ranker maps a request's raw ids through the same map; an id the map lacks is
:data:`UNKNOWN`, the models' 'unknown' row (served cold). A generated world has no map: its ids are dense.

A raw id is known by its canonical text: a text value as written (nothing trimmed: "007" and "7" are two ids),
an integer as its decimal text ("-5", "4611686018427387904"). So the JSON integer 7, the string "7" and a
CSV's 7 are one id. Dense ids follow each id's first appearance in time, ties in code-point order of the
text: the same log always gets the same numbers, and a later id a larger one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MAX_RAW_ID_CHARS = 256  # the longest raw id an import keeps and a request may send
UNKNOWN = -1  # the dense id of a raw id the map lacks: the models' 'unknown' row
MAP_FILES = {"user": "user_ids.parquet", "item": "item_ids.parquet"}
_INTEGER_TEXT = re.compile(r"0|-?[1-9][0-9]*")  # what str(int) writes: an integer's canonical text
_KEY_TYPES = {str, int}  # looked up as they come (a bool's type is bool: refused by canonical_id)
_SCHEMA = pa.schema([pa.field("dense_id", pa.int64(), nullable=False), pa.field("raw_id", pa.string(), nullable=False)])


def canonical_id(value: int | str) -> str:
    """The text a raw id is known by (the module's docstring says why)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"an id is text or an integer, got {value!r}")
    return str(int(value))


def _lookup_key(value: int | str) -> int | str:
    """A raw id as :attr:`IdMap._dense_of` holds it: text as it is, an integer as a Python int."""
    canonical_id(value)  # refuses what is no id (a bool: True == 1 to a dict)
    return value if isinstance(value, str) else int(value)


@dataclass(frozen=True, eq=False)
class IdMap:
    """One id column's map: dense id ``d`` is the raw id ``raw[d]`` (canonical text, each once)."""

    raw: pa.StringArray

    @classmethod
    def assign(cls, raw: pa.Array, ts: np.ndarray) -> tuple[IdMap, np.ndarray]:
        """Number the distinct ``raw`` ids (canonical text, one per row) by their first time in ``ts``, ties by
        text; returns the map and each row's dense id. Vectorised: one hash pass and two sorts of the distinct
        ids."""
        encoded = pc.dictionary_encode(raw)
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        values = encoded.dictionary.cast(pa.string())  # the distinct ids only: a short cast
        first = np.full(len(values), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(first, codes, np.asarray(ts, np.int64))
        text_rank = np.empty(len(values), np.int64)
        text_rank[pc.sort_indices(values).to_numpy()] = np.arange(len(values))
        order = np.lexsort((text_rank, first))
        dense_of_code = np.empty(len(values), np.int64)
        dense_of_code[order] = np.arange(len(values))
        return cls(values.take(pa.array(order))), dense_of_code[codes]

    def __len__(self) -> int:
        return len(self.raw)

    @functools.cached_property
    def _dense_of(self) -> dict[int | str, int]:
        """Raw id -> dense id, an integer's text keyed by the integer itself, so that a request's integers are
        looked up as they come (writing 200 ids near 2**62 as text took 30 us: bench_ids)."""
        integer = pc.match_substring_regex(self.raw, f"^(?:{_INTEGER_TEXT.pattern})$").to_numpy(zero_copy_only=False)
        texts = self.raw.to_pylist()
        return {int(r) if i else r: dense for dense, (r, i) in enumerate(zip(texts, integer, strict=True))}

    def dense_ids(self, raw: Sequence[int | str]) -> np.ndarray:
        """Dense id per raw id (:data:`UNKNOWN` for one the map lacks): a request's path, a dict lookup (built
        on first use) run by ``map`` without a Python step per id; an integer's text ("7") is looked up as
        the integer after the first pass misses it."""
        keys = raw if set(map(type, raw)) <= _KEY_TYPES else [_lookup_key(r) for r in raw]
        dense_of = self._dense_of
        dense = np.fromiter(map(dense_of.get, keys, repeat(UNKNOWN)), np.int64, len(keys))
        for at in np.flatnonzero(dense == UNKNOWN):
            key = keys[at]
            if isinstance(key, str) and _INTEGER_TEXT.fullmatch(key):
                dense[at] = dense_of.get(int(key), UNKNOWN)
        return dense

    def raw_ids(self, dense: Iterable[int]) -> list[str]:
        """Raw id per dense id; one outside 0..n-1 is an error naming it."""
        dense = np.fromiter(dense, np.int64)
        outside = (dense < 0) | (dense >= len(self))
        if outside.any():
            raise ValueError(f"dense id {int(dense[outside][0])} is not in this map (0..{len(self) - 1})")
        return self.raw.take(pa.array(dense)).to_pylist()

    def write(self, path: Path) -> None:
        table = pa.table({"dense_id": np.arange(len(self), dtype=np.int64), "raw_id": self.raw}, schema=_SCHEMA)
        pq.write_table(table, path, compression="zstd")

    @classmethod
    def read(cls, path: Path) -> IdMap:
        table = pq.read_table(path, schema=_SCHEMA)
        dense = table["dense_id"].to_numpy()
        if not np.array_equal(dense, np.arange(len(dense))):
            raise ValueError(f"{path}: dense_id is not 0..{len(dense) - 1} in order; the id map is damaged")
        return cls(table["raw_id"].combine_chunks())


@dataclass(frozen=True, eq=False)
class IdMaps:
    """A world's user and item maps, kept beside its log (``user_ids.parquet``, ``item_ids.parquet``)."""

    user: IdMap
    item: IdMap

    def write(self, folder: Path) -> None:
        for role, name in MAP_FILES.items():
            getattr(self, role).write(Path(folder) / name)

    @classmethod
    def read(cls, root: Path) -> IdMaps | None:
        """The maps of the log at ``root``; None when it has none (a generated world: its ids are dense)."""
        present = {role: (Path(root) / name).is_file() for role, name in MAP_FILES.items()}
        if not any(present.values()):
            return None
        if not all(present.values()):
            missing = ", ".join(MAP_FILES[role] for role, here in present.items() if not here)
            raise FileNotFoundError(f"{root}: the id map is incomplete (no {missing}); import the log again")
        return cls(**{role: IdMap.read(Path(root) / name) for role, name in MAP_FILES.items()})
