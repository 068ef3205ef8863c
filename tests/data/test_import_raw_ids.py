"""Ids as a team has them: text or integers of any size are imported as dense ids 0..n-1, the map kept with
the log, shown both ways by ``solaris data ids``, and an FM trains on the result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from raw_id_logs import N_ITEMS, N_USERS, RAW_MAPPING, SPELLINGS, write_raw_id_log

from solaris.cli import main
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.idmap import UNKNOWN, IdMap, IdMaps, canonical_id
from solaris.data.importer import import_file, import_source
from solaris.data.sources import LogImportError, Source


@pytest.fixture(params=list(SPELLINGS))
def spelling(request: pytest.FixtureRequest) -> str:
    return request.param


def import_raw(folder: Path, spelling: str) -> EventLog:
    return import_file(write_raw_id_log(folder / "log.csv", spelling), folder / "world", RAW_MAPPING)


def test_raw_ids_become_dense_by_first_appearance_and_the_map_round_trips(tmp_path: Path, spelling: str) -> None:
    log = import_raw(tmp_path, spelling)
    user, item = SPELLINGS[spelling]
    impressions = log.impressions(log.start, log.end).to_pandas()
    assert sorted(impressions.user_id.unique()) == list(range(N_USERS))
    assert sorted(impressions.item_id.unique()) == list(range(N_ITEMS))
    assert log.users()["user_id"].to_pylist() == list(range(N_USERS))

    ids = IdMaps.read(log.root)
    assert ids.user.raw_ids(range(N_USERS)) == [canonical_id(user(u)) for u in range(N_USERS)]
    assert ids.item.raw_ids(range(N_ITEMS)) == [canonical_id(item(i)) for i in range(N_ITEMS)]
    assert ids.user.dense_ids([user(u) for u in range(N_USERS)]).tolist() == list(range(N_USERS))
    assert ids.item.dense_ids([item(3), "never-seen", 7]).tolist() == [3, UNKNOWN, UNKNOWN]
    first = impressions.sort_values("ts").iloc[0]
    assert (first.user_id, first.item_id) == (0, 0)


def test_ties_in_time_are_numbered_in_text_order(tmp_path: Path) -> None:
    """Same first second: "b-10" < "b-9" < "c" as text; a later id gets a larger number."""
    source = tmp_path / "ties.csv"
    source.write_text("user,item,ts,click\nc,x,0,1\nb-9,x,0,0\nb-10,y,0,1\na,y,60,0\n")
    log = import_file(source, tmp_path / "world", RAW_MAPPING)
    assert IdMaps.read(log.root).user.raw_ids(range(4)) == ["b-10", "b-9", "c", "a"]


def test_typed_columns_are_canonical_text(tmp_path: Path) -> None:
    """Parquet: an int64 id is its decimal text, a whole float its integer's, a categorical its category's; a
    frame's object column mixing text and integers too. So a request's 7 or "7" finds the id either way."""
    frame = pd.DataFrame(
        {
            "user": np.array([2**62, -5, 7], np.int64),
            "item": [7.0, 8.0, 7.0],
            "ts": [0, 1, 2],
            "click": [1, 0, 1],
        }
    )
    frame.to_parquet(tmp_path / "typed.parquet")
    ids = IdMaps.read(import_file(tmp_path / "typed.parquet", tmp_path / "typed", RAW_MAPPING).root)
    assert ids.user.raw_ids(range(3)) == [str(2**62), "-5", "7"]
    assert ids.item.raw_ids(range(2)) == ["7", "8"]
    assert ids.user.dense_ids([7, "7", 2**62]).tolist() == [2, 2, 0]
    assert ids.user.dense_ids([7, 2**62]).tolist() == [2, 0]  # all integers: the fast path
    with pytest.raises(ValueError, match="an id is text or an integer, got True"):
        ids.user.dense_ids([True])  # True == 1 to a dict: never looked up as one

    categorical = frame.assign(user=pd.Categorical(["b", "a", "b"]))
    categorical.to_parquet(tmp_path / "categorical.parquet")
    categories = import_file(tmp_path / "categorical.parquet", tmp_path / "categorical", RAW_MAPPING)
    assert IdMaps.read(categories.root).user.raw_ids(range(2)) == ["b", "a"]

    frame = pd.DataFrame({"user": pd.Series(["a", 7], dtype=object), "item": [1, 2], "ts": [0, 1], "click": [0, 1]})
    mixed = import_source(Source("frame", frame, None), tmp_path / "mixed", RAW_MAPPING, origin="test")
    assert IdMaps.read(mixed.root).user.raw_ids(range(2)) == ["a", "7"]
    chunked = frame.assign(user=pd.arrays.ArrowExtensionArray(pa.chunked_array([["b"], ["a"]])))  # a big CSV's
    in_chunks = import_source(Source("frame", chunked, None), tmp_path / "chunks", RAW_MAPPING, origin="test")
    assert IdMaps.read(in_chunks.root).user.raw_ids(range(2)) == ["b", "a"]


BAD_IDS = [
    # (column values for 'user', the message the refusal must carry)
    (pd.Series(["a", None, None], dtype=object), r"row 2, column 'user': missing id, got None \(2 such rows\)"),
    (pd.Series(["a", "", "b"], dtype=object), r"row 2, column 'user': missing id, got ''"),
    (pd.Series(["a", "x" * 257, "b"], dtype=object), r"row 2, column 'user': an id over 256 characters"),
    (pd.Series([1.0, 2.5, np.nan]), r"row 3, column 'user': missing id"),
    (pd.Series([1.0, 2.5, 3.0]), r"row 2, column 'user': expected a whole-number id below 2\*\*53"),
    (pd.Series([1.0, 2.0**60, 3.0]), r"row 2, column 'user': expected a whole-number id below 2\*\*53"),
    (pd.Series(["a", 1.5, "b"], dtype=object), r"row 2, column 'user': expected an id as text or an integer, got 1.5"),
    (pd.Series([True, False, True]), r"row 1, column 'user': expected an id as text or an integer"),
]


@pytest.mark.parametrize(("users", "pattern"), BAD_IDS)
def test_a_bad_id_cell_is_refused_naming_its_row(tmp_path: Path, users: pd.Series, pattern: str) -> None:
    frame = pd.DataFrame({"user": users, "item": ["i", "j", "k"], "ts": [0, 1, 2], "click": [0, 1, 0]})
    with pytest.raises(LogImportError, match=pattern):
        import_source(Source("frame", frame, None), tmp_path / "world", RAW_MAPPING, origin="test")
    assert not (tmp_path / "world").exists()


def test_an_id_map_that_is_damaged_or_half_there_is_an_error(tmp_path: Path) -> None:
    log = import_raw(tmp_path, "text")
    IdMap(pa.array(["b", "a"])).write(log.root / "user_ids.parquet")
    assert IdMaps.read(log.root).user.dense_ids(["a"]).tolist() == [1]
    pd.DataFrame({"dense_id": [1, 0], "raw_id": ["b", "a"]}).to_parquet(log.root / "user_ids.parquet")
    with pytest.raises(ValueError, match="dense_id is not 0..1 in order"):
        IdMaps.read(log.root)
    (log.root / "user_ids.parquet").unlink()
    with pytest.raises(FileNotFoundError, match=r"incomplete \(no user_ids.parquet\)"):
        IdMaps.read(log.root)


def test_an_fm_trains_on_a_raw_id_world(tmp_path: Path, spelling: str) -> None:
    """Ids of 2**62 once stopped ``train fm`` (outside [0, 2**24)); dense ids size the id tables to the ids seen."""
    from solaris.models.fm import FMConfig
    from solaris.models.training import FitConfig, train_fm
    from solaris.training.jobs import World

    world = World.open(import_raw(tmp_path, spelling).root)
    assert (world.users.vocab, world.items.vocab) == (N_USERS + 1, N_ITEMS + 1)  # + the unknown row
    split = world.split
    quick = FitConfig(epochs=1, progress=False, threads=1)
    fm, fit = train_fm(world.log, split.fm_train, split.valid, world.index, world.users, world.items, FMConfig(), quick)
    assert len(fit.valid_loss) == 1 and np.isfinite(fit.valid_loss[0])


def test_cli_shows_an_id_both_ways_and_refuses_unknown_ones(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_raw_id_log(tmp_path / "log.csv", "text")
    flags = ["--user", "user", "--item", "item", "--timestamp", "ts", "--label", "click"]
    assert main(["data", "import", str(source), "--name", "ads", *flags]) == 0
    capsys.readouterr()

    assert main(["data", "ids", "--name", "ads", "--item", "ad-8"]) == 0
    assert json.loads(capsys.readouterr().out) == {"item": {"raw": "ad-8", "dense": 8}}
    assert main(["data", "ids", "--name", "ads", "--user", "2", "--dense"]) == 0
    assert json.loads(capsys.readouterr().out) == {"user": {"raw": "user-2", "dense": 2}}

    assert main(["data", "ids", "--name", "ads", "--user", "ad-8"]) == 2
    assert "world ads has no user 'ad-8' in its id map (4 users)" in capsys.readouterr().err
    assert main(["data", "ids", "--name", "ads", "--item", "31", "--dense"]) == 2
    assert "world ads, items: dense id 31 is not in this map (0..30)" in capsys.readouterr().err
    assert main(["data", "ids", "--name", "ads", "--item", "ad-8", "--dense"]) == 2
    assert "--dense: item id 'ad-8' is not an integer" in capsys.readouterr().err

    assert main(["data", "generate", "--preset", "tiny", "--days", "1", "--name", "generated"]) == 0
    capsys.readouterr()
    assert main(["data", "ids", "--name", "generated", "--user", "3"]) == 2
    assert "world generated has no id map: its ids are used as they are" in capsys.readouterr().err
    assert main(["data", "ids", "--name", "nowhere", "--user", "3"]) == 2
    assert "nowhere is not an event log" in capsys.readouterr().err
