"""PostgreSQL binary COPY payloads built from numpy columns in one vectorised pass.

Every column the store copies is fixed-width within a batch (int8, float4, vectors of one dimension), so a
whole batch is one numpy structured array: no per-row Python, which is what lets a store write keep pace
with a raw COPY.
"""

from __future__ import annotations

import numpy as np

HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
TRAILER = (-1).to_bytes(2, "big", signed=True)
_WIRE = {"int8": np.dtype(">i8"), "float4": np.dtype(">f4")}


def _wire_dtype(kind: str, column: np.ndarray) -> np.dtype:
    if kind == "bytea":
        if column.dtype.kind != "V":
            raise TypeError(f"bytea column must hold fixed-width bytes (numpy V dtype), got {column.dtype}")
        return column.dtype
    if kind not in _WIRE:
        raise ValueError(f"no binary COPY encoding for column kind {kind!r}")
    return _WIRE[kind]


def binary_copy_payload(columns: list[tuple[str, np.ndarray]]) -> bytes:
    """``COPY ... FROM STDIN (FORMAT BINARY)`` bytes for equally long columns given as (kind, values)."""
    n = len(columns[0][1])
    if any(len(values) != n for _, values in columns):
        raise ValueError("binary COPY columns differ in length")
    wire = [_wire_dtype(kind, values) for kind, values in columns]
    layout = [("count", ">i2")]
    for k, dtype in enumerate(wire):
        layout += [(f"len{k}", ">i4"), (f"val{k}", dtype)]
    rows = np.empty(n, dtype=np.dtype(layout))
    rows["count"] = len(columns)
    for k, ((_, values), dtype) in enumerate(zip(columns, wire, strict=True)):
        rows[f"len{k}"] = dtype.itemsize
        rows[f"val{k}"] = values
    return HEADER + rows.tobytes() + TRAILER
