"""The small id tables the model tests share: six users of three countries, five items of three categories."""

from __future__ import annotations

import pyarrow as pa

from solaris.models.features import IdTable

COUNTRIES = [0, 1, 2, 0, 1, 2]  # of users 0-5
CATEGORIES = [0, 0, 1, 1, 2]  # of items 0-4


def small_id_tables() -> tuple[IdTable, IdTable]:
    users = pa.table({"user_id": pa.array(range(6), pa.int64()), "u_country": pa.array(COUNTRIES, pa.int32())})
    items = pa.table({"item_id": pa.array(range(5), pa.int64()), "i_category": pa.array(CATEGORIES, pa.int32())})
    return IdTable.from_table(users, "user_id", "u_"), IdTable.from_table(items, "item_id", "i_")
