"""MovieLens-100K as an event log, read from the RecBole 1.2.1 wheel on PyPI.

The GroupLens licence forbids redistributing the data, so it is never committed: it is fetched on demand
with pip (an ordinary package-registry client, the one route out of our machines) into a local cache and
read straight from the wheel's zip, without installing RecBole. The wheel's SHA-256 is pinned so that an
offline copy passed with ``--wheel`` is held to the same bytes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from solaris.data.eventlog import EventLog
from solaris.data.importer import ColumnMapping, import_source
from solaris.data.sources import Source, read_csv_source

SOURCE_NAME = "movielens-100k"
WHEEL_REQUIREMENT = "recbole==1.2.1"
WHEEL_NAME = "recbole-1.2.1-py3-none-any.whl"
WHEEL_SHA256 = "9c9948202011f37eb0a7c6768129313f00d6403ad221ec940d5e2d5d5f33a407"
MEMBER_DIR = "recbole/dataset_example/ml-100k/"
CLICK_RATING = 4.0  # a rating of 4 or 5 counts as a click
# MovieLens-1M's age groups (lower bounds), so ages become a handful of comparable buckets.
AGE_BUCKETS = np.array([0, 18, 25, 35, 45, 50, 56])

MAPPING = ColumnMapping(
    user="user_id:token",
    item="item_id:token",
    timestamp="timestamp:float",
    rating="rating:float",
    rating_threshold=CLICK_RATING,
    user_features=("age", "gender", "occupation"),
    item_features=("genre", "decade"),
)

RATING_COLUMNS = [MAPPING.user, MAPPING.item, MAPPING.timestamp, MAPPING.rating]


class MovieLensUnavailable(FileNotFoundError):
    """The RecBole wheel could not be downloaded, or the given one is not it."""


def fetch_wheel(cache_dir: Path) -> Path:
    """The cached wheel, downloaded once with pip when absent; a failed download leaves no file behind."""
    cached = Path(cache_dir) / WHEEL_NAME
    if cached.is_file():
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cached.parent, prefix=".download-") as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", WHEEL_REQUIREMENT]
        result = subprocess.run([*command, "-d", tmp], capture_output=True, text=True, check=False)
        downloaded = Path(tmp) / WHEEL_NAME
        if result.returncode != 0 or not downloaded.is_file():
            detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise MovieLensUnavailable(
                f"could not download {WHEEL_REQUIREMENT} from the package index (pip exit {result.returncode}: "
                f"{detail[0]}); fetch {WHEEL_NAME} elsewhere and pass --wheel PATH"
            )
        _check_wheel(downloaded)
        os.replace(downloaded, cached)
    return cached


def _check_wheel(wheel: Path) -> None:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise MovieLensUnavailable(f"{wheel}: SHA-256 {digest} is not that of {WHEEL_NAME} ({WHEEL_SHA256})")


def load_source(wheel: Path) -> Source:
    """The ratings as an import source, with user and item side features joined onto each row."""
    _check_wheel(wheel)
    with zipfile.ZipFile(wheel) as zf:
        inter, users, items = (zf.read(f"{MEMBER_DIR}ml-100k.{kind}") for kind in ("inter", "user", "item"))
    source = read_csv_source(io.BytesIO(inter), f"{wheel}!{MEMBER_DIR}ml-100k.inter", RATING_COLUMNS, sep="\t")
    frame = source.frame.copy()
    user_features = _user_features(_read_table(users)).set_index(MAPPING.user)
    item_features = _item_features(_read_table(items)).set_index(MAPPING.item)
    for feature in MAPPING.user_features:
        frame[feature] = frame[MAPPING.user].map(user_features[feature])
    for feature in MAPPING.item_features:
        frame[feature] = frame[MAPPING.item].map(item_features[feature])
    return Source(source.name, frame, source.header_lines)


def _read_table(raw: bytes) -> pd.DataFrame:
    # Titles contain quote characters that are data, not CSV quoting.
    return pd.read_csv(io.BytesIO(raw), sep="\t", dtype=str, quoting=csv.QUOTE_NONE)


def _user_features(users: pd.DataFrame) -> pd.DataFrame:
    age = pd.to_numeric(users["age:token"], errors="raise").to_numpy()
    return pd.DataFrame(
        {
            "user_id:token": users["user_id:token"],
            "age": AGE_BUCKETS[np.searchsorted(AGE_BUCKETS, age, side="right") - 1],
            "gender": users["gender:token"],
            "occupation": users["occupation:token"],
        }
    )


def _item_features(items: pd.DataFrame) -> pd.DataFrame:
    """Primary genre (the first listed) and release decade; 'unknown' genres and years become missing."""
    genre = items["class:token_seq"].str.split(" ").str[0]
    year = pd.to_numeric(items["release_year:token"], errors="coerce").astype("Int64")
    return pd.DataFrame(
        {
            "item_id:token": items["item_id:token"],
            "genre": genre.where(genre != "unknown"),
            "decade": year // 10 * 10,
        }
    )


def import_movielens_100k(
    target: Path,
    *,
    cache_dir: Path,
    wheel: Path | None = None,
    name: str | None = None,
    time_scale: float = 1.0,
    overwrite: bool = False,
) -> EventLog:
    """Import MovieLens-100K from ``wheel``, else from the wheel cached (or downloaded) under ``cache_dir``."""
    wheel = Path(wheel) if wheel is not None else fetch_wheel(cache_dir)
    if not wheel.is_file():
        raise MovieLensUnavailable(f"{wheel}: no such file (expected {WHEEL_NAME})")
    # The dataset has no duplicate ratings; any would mean a corrupted file, so they are refused.
    return import_source(
        load_source(wheel),
        target,
        MAPPING,
        origin=SOURCE_NAME,
        name=name,
        on_duplicate="error",
        time_scale=time_scale,
        overwrite=overwrite,
    )
