"""A small log whose user and item ids are raw, in two spellings: text ("user-1", "ad-10") and integers
around 2**62 (items negative). Row k, at minute 3k, shows user k % 4 item k % 31, so user u first appears at
row u and item i at row i: their dense ids are u and i, and a raw id names a known dense id in tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from solaris.data.importer import ColumnMapping

T0 = datetime(2024, 1, 1, tzinfo=UTC)
N_USERS, N_ITEMS, ROWS = 4, 31, 240  # 12 hours: enough for a time split
RAW_MAPPING = ColumnMapping(user="user", item="item", timestamp="ts", label="click")
SPELLINGS: dict[str, tuple[Callable[[int], int | str], Callable[[int], int | str]]] = {
    "text": (lambda u: f"user-{u}", lambda i: f"ad-{i}"),
    "2**62": (lambda u: 2**62 + u, lambda i: -(2**62) - i),
}


def write_raw_id_log(path: Path, spelling: str) -> Path:
    """The log as CSV at ``path``; ``spelling`` is a key of :data:`SPELLINGS`."""
    user, item = SPELLINGS[spelling]
    start = int(T0.timestamp())
    rows = [f"{user(k % N_USERS)},{item(k % N_ITEMS)},{start + 180 * k},{int(k % 3 == 0)}" for k in range(ROWS)]
    path.write_text("\n".join(["user,item,ts,click", *rows]) + "\n")
    return path
