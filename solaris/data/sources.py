"""Read a user's interaction log (CSV or Parquet) and parse its columns, refusing any bad cell.

A log of millions of rows is impossible to fix from "invalid value", so every refusal is a
:class:`LogImportError` naming the file, the row (and, for CSV, the line) and the column. The checks are
vectorised: one bad row among millions costs the same as none. Building events and tables from the parsed
columns is :mod:`solaris.data.importer`'s concern.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from solaris.data.idmap import MAX_RAW_ID_CHARS, canonical_id

# Unix seconds outside this span cannot be held as microsecond timestamps.
_MIN_SECONDS = pd.Timestamp.min.timestamp()
_MAX_SECONDS = pd.Timestamp.max.timestamp()


class LogImportError(ValueError):
    """Input we refuse to import; the message names the file, row and column at fault."""


@dataclass(frozen=True)
class Source:
    """Rows to import, indexed by their 0-based data-row number in the file, and how to cite one."""

    name: str
    frame: pd.DataFrame
    header_lines: int | None  # lines above data row 1 (CSV); None where lines mean nothing (Parquet)

    def where(self, position: int) -> str:
        row = int(self.frame.index[position]) + 1
        line = "" if self.header_lines is None else f" (line {row + self.header_lines})"
        return f"row {row}{line}"

    def fail(self, position: int, column: str, problem: str) -> LogImportError:
        return LogImportError(f"{self.name}, {self.where(position)}, column {column!r}: {problem}")

    def cell(self, position: int, column: str) -> object:
        """A source value as plain Python, so messages show 3, not np.int64(3)."""
        value = self.frame[column].iloc[position]
        return value.item() if isinstance(value, np.generic) else value


def read_csv_source(data: Path | IO[bytes], name: str, columns: list[str], sep: str = ",") -> Source:
    """Read every field as text so that parsing, and its errors, stay ours rather than pandas' guesses."""
    try:
        frame = pd.read_csv(data, sep=sep, dtype=str, keep_default_na=False, na_values=[""], skip_blank_lines=False)
    except pd.errors.EmptyDataError:
        raise LogImportError(f"{name}: the file is empty (no header line)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise LogImportError(f"{name}: not readable as CSV: {exc}") from None
    _check_columns(name, list(frame.columns), columns)
    blank = frame.isna().all(axis=1)  # blank lines keep their numbers, so later rows are cited right
    return Source(name, frame.loc[~blank, columns], header_lines=1)


def read_parquet_source(path: Path, columns: list[str]) -> Source:
    try:
        names = pq.read_schema(path).names
        _check_columns(str(path), names, columns)
        frame = pq.read_table(path, columns=columns).to_pandas()
    except (pa.ArrowInvalid, OSError) as exc:
        raise LogImportError(f"{path}: not a readable Parquet file: {exc}") from None
    return Source(str(path), frame, header_lines=None)


def read_source(path: Path, columns: list[str], fmt: str | None = None) -> Source:
    path = Path(path)
    fmt = fmt or _format_of(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if fmt == "csv":
        return read_csv_source(path, str(path), columns)
    return read_parquet_source(path, columns)


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("csv", "parquet"):
        return suffix
    if suffix == "pq":
        return "parquet"
    raise LogImportError(f"{path}: cannot tell the format from the name; pass --format csv|parquet")


def _check_columns(name: str, present: list[str], needed: list[str]) -> None:
    missing = [c for c in needed if c not in present]
    if missing:
        raise LogImportError(
            f"{name}: missing column(s) {', '.join(missing)} (the file has: {', '.join(map(str, present))})"
        )


def _raise_first(source: Source, column: str, bad: np.ndarray, problem: str) -> None:
    positions = np.flatnonzero(bad)
    if len(positions):
        first = int(positions[0])
        value = source.cell(first, column)
        more = f" ({len(positions)} such rows)" if len(positions) > 1 else ""
        raise source.fail(first, column, f"{problem}, got {value!r}{more}")


def _numbers(source: Source, column: str) -> pd.Series:
    """The column as numbers, NaN where a value is none; exact int64 when every value is an integer.

    Arrow's cast parses a clean text column ~50x faster than pandas' coercion, which therefore runs only when
    some value fails the cast (to find which).
    """
    raw = source.frame[column]
    if pd.api.types.is_bool_dtype(raw.dtype):
        return raw.astype("int64")
    if pd.api.types.is_numeric_dtype(raw.dtype):
        return raw
    for target in (pa.int64(), pa.float64()):
        try:
            parsed = pc.cast(pa.array(raw, from_pandas=True), target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            continue
        return pd.Series(parsed.to_numpy(zero_copy_only=False), index=raw.index)
    return pd.to_numeric(raw, errors="coerce")


def parse_request_ids(source: Source, column: str) -> np.ndarray:
    """Request ids only group a request's rows: non-negative integers, kept as exact int64 beyond float
    precision. (User and item ids may be anything: :func:`parse_raw_ids`.)"""
    numbers = _numbers(source, column)
    values = numbers.to_numpy(dtype="float64", na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(values) | (values < 0) | (values != np.floor(values)) | (values >= 2.0**63)
    _raise_first(source, column, bad, "expected a non-negative integer request id")
    if pd.api.types.is_integer_dtype(numbers.dtype):
        return numbers.to_numpy(dtype="int64")
    return values.astype("int64")


def parse_raw_ids(source: Source, column: str) -> pa.Array:
    """User or item ids as the team has them, as canonical text (:mod:`solaris.data.idmap`): text as written,
    integers (any size, negative too) as decimal text. Refused, naming the row: a missing or empty id, one over
    ``MAX_RAW_ID_CHARS``, and a value that is neither text nor a whole number."""
    raw = source.frame[column]
    if pd.api.types.is_float_dtype(raw.dtype):
        return _whole_float_ids(source, column)
    try:
        values = pa.array(raw, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # an object column mixing text and integers
        values = _mixed_ids(source, column)
    if isinstance(values, pa.ChunkedArray):  # a large text column read by pandas into arrow chunks
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):  # a categorical column
        values = values.dictionary_decode()
    if pa.types.is_integer(values.type):
        values = pc.cast(values, pa.string())
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        _raise_first(source, column, np.ones(len(raw), bool), "expected an id as text or an integer")
    nbytes = pc.binary_length(values)  # from the offsets alone; a character is one byte or more
    extremes = pc.min_max(nbytes)
    if values.null_count or extremes["min"].as_py() == 0:
        missing = pc.fill_null(pc.equal(nbytes, 0), True).to_numpy(zero_copy_only=False)
        _raise_first(source, column, missing, "missing id")
    if extremes["max"].as_py() > MAX_RAW_ID_CHARS:
        too_long = pc.greater(pc.utf8_length(values), MAX_RAW_ID_CHARS).to_numpy(zero_copy_only=False)
        _raise_first(source, column, too_long, f"an id over {MAX_RAW_ID_CHARS} characters")
    return values


def _whole_float_ids(source: Source, column: str) -> pa.Array:
    """A float column's ids (integers stored as floats, e.g. beside a missing value) as integer text; a
    fraction, or a value beyond 2**53 where floats stop being exact, is refused rather than rounded."""
    values = source.frame[column].to_numpy(dtype="float64", na_value=np.nan)
    _raise_first(source, column, np.isnan(values), "missing id")
    with np.errstate(invalid="ignore"):
        inexact = ~np.isfinite(values) | (values != np.floor(values)) | (np.abs(values) >= 2.0**53)
    problem = "expected a whole-number id below 2**53 (store larger ones as integers or text)"
    _raise_first(source, column, inexact, problem)
    return pc.cast(pa.array(values.astype("int64")), pa.string())


def _mixed_ids(source: Source, column: str) -> pa.Array:
    """An object column's values one by one: text and integers are ids, anything else is refused."""
    raw = source.frame[column]
    missing = raw.isna().to_numpy()
    kinds = raw.map(lambda v: isinstance(v, str) or (isinstance(v, int | np.integer) and not isinstance(v, bool)))
    _raise_first(source, column, ~kinds.to_numpy(bool) & ~missing, "expected an id as text or an integer")
    return pa.array([None if gone else canonical_id(v) for v, gone in zip(raw, missing, strict=True)], pa.string())


def parse_timestamps(source: Source, column: str) -> np.ndarray:
    """UTC microseconds from unix seconds or ISO-8601 text; naive ISO times are taken as UTC."""
    raw = source.frame[column]
    if pd.api.types.is_datetime64_any_dtype(raw.dtype):
        stamps = raw.dt.tz_localize("UTC") if raw.dt.tz is None else raw.dt.tz_convert("UTC")
        _raise_first(source, column, stamps.isna().to_numpy(), "missing timestamp")
        return stamps.dt.as_unit("us").astype("int64").to_numpy()
    numbers = _numbers(source, column)
    if pd.api.types.is_numeric_dtype(raw.dtype) or numbers.notna().all():
        seconds = numbers.to_numpy(dtype="float64", na_value=np.nan)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(seconds) | (seconds < _MIN_SECONDS) | (seconds > _MAX_SECONDS)
        _raise_first(source, column, bad, "expected unix seconds within years 1677-2262")
        return np.round(seconds * 1e6).astype("int64")
    stamps = pd.to_datetime(raw, format="ISO8601", utc=True, errors="coerce")
    unparsable = stamps.isna().to_numpy()
    _raise_first(source, column, unparsable, "unparsable timestamp (expected unix seconds or ISO-8601)")
    return stamps.dt.as_unit("us").astype("int64").to_numpy()


def parse_binary(source: Source, column: str) -> np.ndarray:
    values = _numbers(source, column).to_numpy(dtype="float64", na_value=np.nan)
    _raise_first(source, column, ~np.isin(values, (0.0, 1.0)), "expected 0 or 1")
    return values.astype("int8")


def parse_ratings(source: Source, column: str) -> np.ndarray:
    values = _numbers(source, column).to_numpy(dtype="float64", na_value=np.nan)
    _raise_first(source, column, ~np.isfinite(values), "expected a numeric rating")
    return values


def code_feature(values: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Dense codes in sorted value order, so the same values always get the same codes; 0 means missing."""
    codes, vocabulary = pd.factorize(values, sort=True)
    return (codes + 1).astype("int32"), pd.Index(vocabulary).tolist()
