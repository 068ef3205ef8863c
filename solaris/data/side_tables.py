"""The side tables of an imported log: one row per user or item, each feature coded, one value per id."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from solaris.data.idmap import IdMap
from solaris.data.schema import side_feature_schema
from solaris.data.sources import Source, code_feature


def build_side_table(
    source: Source,
    positions: np.ndarray,
    ids: np.ndarray,
    id_map: IdMap,
    id_column: str,
    features: tuple[str, ...],
    prefix: str,
) -> tuple[pa.Table, dict[str, list[Any]]]:
    """One row per (dense) id seen, each feature coded; a feature that changes for one id is refused, not
    guessed, citing the id as the source has it (``id_map``). ``positions``: each event's row in the source."""
    columns: dict[str, np.ndarray] = {id_column: np.unique(ids)}
    vocabularies = {}
    for feature in features:
        values = source.frame[feature].iloc[positions]
        codes, vocabulary = code_feature(values)
        _check_constant(source, positions, ids, id_map, codes, feature, id_column)
        name = f"{prefix}{feature}"
        columns[name] = pd.Series(codes).groupby(ids).first().to_numpy("int32")  # groups come out id-sorted
        vocabularies[name] = vocabulary
    schema = side_feature_schema(id_column, [f"{prefix}{f}" for f in features])
    return pa.table(columns, schema=schema), vocabularies


def _check_constant(
    source: Source,
    positions: np.ndarray,
    ids: np.ndarray,
    id_map: IdMap,
    codes: np.ndarray,
    feature: str,
    id_column: str,
) -> None:
    pairs = pd.DataFrame({"id": ids, "code": codes})
    changed = (~pairs.duplicated() & pairs["id"].duplicated()).to_numpy()
    if changed.any():
        p = int(np.argmax(changed))
        q = int(np.argmax(ids == ids[p]))
        earlier, later = source.cell(int(positions[q]), feature), source.cell(int(positions[p]), feature)
        raise source.fail(
            int(positions[p]),
            feature,
            f"{id_column} {id_map.raw_ids([ids[p]])[0]} already had {earlier!r} at {source.where(int(positions[q]))}, "
            f"got {later!r}; a side feature must have one value per id",
        )
