"""numpy arrays to and from PostgreSQL arrays in binary, each by one vectorised pass.

psycopg dumps a Python list element by element (in text, with a quoting check per element: ~350 us for the
200 ids of one request, a tenth of a serving read) and loads an array into a list of Python numbers; the
binary array format of a fixed-width type is one numpy structured array: a 4-byte length, then the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

INT8_OID, INT8_ARRAY_OID = 20, 1016
# Array type oid -> big-endian element dtype, for the arrays the serving read returns.
ELEMENT_DTYPES = {1005: ">i2", 1007: ">i4", 1016: ">i8", 1021: ">f4", 1022: ">f8"}


class Int8ArrayDumper(Dumper):
    format = Format.BINARY
    oid = INT8_ARRAY_OID

    def dump(self, obj: np.ndarray) -> bytes:
        if obj.ndim != 1 or (obj.size and obj.dtype.kind not in "iu"):
            shape, dtype = obj.shape, obj.dtype
            raise TypeError(f"a bigint[] parameter must be a 1-D integer array, got shape {shape} dtype {dtype}")
        if not len(obj):  # ndim 0 is PostgreSQL's empty array
            return np.array([0, 0, INT8_OID], dtype=">i4").tobytes()
        header = np.array([1, 0, INT8_OID, len(obj), 1], dtype=">i4")  # ndim, has nulls, element type, size, lower
        elements = np.empty(len(obj), dtype=[("len", ">i4"), ("value", ">i8")])
        elements["len"] = 8
        elements["value"] = obj
        return header.tobytes() + elements.tobytes()


class NumpyArrayLoader(Loader):
    """A binary one-dimensional array of fixed-width numbers without NULLs, as a native-order numpy array."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        ndim, has_nulls = (int(v) for v in np.frombuffer(data, ">i4", 2))
        element = np.dtype(ELEMENT_DTYPES[self.oid])
        if ndim == 0:
            return np.empty(0, dtype=element.newbyteorder("="))
        if ndim != 1 or has_nulls:
            raise ValueError(
                f"expected a one-dimensional array without NULLs, got {ndim} dimensions, nulls={has_nulls}"
            )
        size = int(np.frombuffer(data, ">i4", 1, 12)[0])
        cells = np.frombuffer(data, [("len", ">i4"), ("value", element)], size, 20)
        return cells["value"].astype(element.newbyteorder("="))  # a copy: the result buffer is freed later


def register_int8_arrays(conn: Any) -> None:
    """Dump numpy arrays passed to this psycopg connection as ``bigint[]``."""
    conn.adapters.register_dumper(np.ndarray, Int8ArrayDumper)


def register_numpy_array_loaders(conn: Any) -> None:
    """Load the binary number arrays this connection receives as numpy arrays."""
    for oid in ELEMENT_DTYPES:
        conn.adapters.register_loader(oid, NumpyArrayLoader)
