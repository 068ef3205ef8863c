"""The ``plain`` preset: a synthetic world's traffic written as a team's plain log (user, item, timestamp,
label; text ids) and imported by the importer's code. The tiny config stands in for the default one."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from solaris.cli import main
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.idmap import IdMaps
from solaris.data.importer import DuplicateRowsWarning
from solaris.data.plain import ITEM_PREFIX, PLAIN_MAPPING, USER_PREFIX, write_plain_csv
from solaris.data.synthetic import PRESETS, generate_world, preset
from solaris.data.synthetic import world as world_module
from solaris.eval.job import ReplayRequest, log_root

TINY = PRESETS["tiny"]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    return generate_world(TINY, tmp_path_factory.mktemp("simulated") / "world")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    return generate_world(TINY.with_overrides(plain=True), tmp_path_factory.mktemp("plain") / "world")


def _raw_impressions(log: EventLog) -> pd.DataFrame:
    """The plain world's impressions with the ids its log had, by hour."""
    frame = log.impressions(log.start, log.end, ["user_id", "item_id", "ts", "click", "conversion"]).to_pandas()
    maps = IdMaps.read(log.root)
    return pd.DataFrame(
        {
            "user": maps.user.raw_ids(frame["user_id"]),
            "item": maps.item.raw_ids(frame["item_id"]),
            "hour": frame["ts"].dt.floor("h"),
            "click": frame["click"],
            "conversion": frame["conversion"],
        }
    )


def test_the_preset_is_the_default_world_written_plain() -> None:
    assert preset("plain").plain and not preset("default").plain
    assert dataclasses.replace(preset("plain"), name="default", plain=False) == preset("default")


def test_the_csv_is_the_plain_shape_with_text_ids(simulated: EventLog, tmp_path: Path) -> None:
    rows = write_plain_csv(simulated, tmp_path / "log.csv")
    lines = (tmp_path / "log.csv").read_text().splitlines()
    assert lines[0] == "user,item,timestamp,label"
    assert rows == len(lines) - 1 == simulated.meta["counts"]["impressions"]
    first = simulated.impressions(simulated.start, simulated.end).slice(0, 1).to_pylist()[0]
    seconds = int(first["ts"].timestamp())
    assert lines[1] == f"{USER_PREFIX}{first['user_id']},{ITEM_PREFIX}{first['item_id']},{seconds},{first['click']}"


def test_the_plain_world_is_the_simulated_traffic_as_an_import_keeps_it(simulated: EventLog, plain: EventLog) -> None:
    """Every impression is there, by raw id and hour, except an item shown again to a user within the hour (the
    importer's duplicate: without request ids a request is a user-hour), counted in meta.json ``rows``."""
    truth = simulated.impressions(simulated.start, simulated.end, ["user_id", "item_id", "ts", "click"]).to_pandas()
    expected = pd.DataFrame(
        {
            "user": USER_PREFIX + truth["user_id"].astype(str),
            "item": ITEM_PREFIX + truth["item_id"].astype(str),
            "hour": truth["ts"].dt.floor("h"),
            "click": truth["click"],
        }
    )
    kept = expected.drop_duplicates(["user", "item", "hour"], keep="first")
    got = _raw_impressions(plain)
    key = ["hour", "user", "item"]
    in_order = [frame.sort_values(key)[[*key, "click"]].reset_index(drop=True) for frame in (got, kept)]
    pd.testing.assert_frame_equal(*in_order)
    rows = plain.meta["rows"]
    assert rows["read"] == len(expected) and rows["kept"] == len(kept)
    assert rows["dropped"] == len(expected) - len(kept) > 0
    assert rows["dropped_clicks"] == int(expected["click"].sum() - kept["click"].sum())
    requests = plain.requests(plain.start, plain.end).to_pandas()
    assert not requests.assign(hour=requests["ts"].dt.floor("h")).duplicated(["user_id", "hour"]).any()


def test_the_plain_world_has_nothing_but_the_four_columns(plain: EventLog) -> None:
    meta = plain.meta
    assert meta["mapping"] == json.loads(json.dumps(PLAIN_MAPPING.as_dict()))
    assert meta["source"] == "synthetic world tiny (seed 0), exported plain"
    assert plain.users().column_names == ["user_id"] and plain.items().column_names == ["item_id"]
    assert meta["counts"]["conversions"] == 0 and meta["vocabularies"] == {}
    got = _raw_impressions(plain)
    assert got["user"].str.fullmatch(r"u-\d+").all() and got["item"].str.fullmatch(r"ad-\d+").all()


def test_only_the_world_is_left_and_an_existing_one_is_kept_unsimulated(
    plain: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [p.name for p in plain.root.parent.iterdir()] == ["world"]  # the simulation and the CSV are gone
    before = plain.meta

    def no_simulation(config: object) -> None:
        raise AssertionError("simulated a world whose target was taken")

    monkeypatch.setattr(world_module, "Simulator", no_simulation)
    with pytest.raises(FileExistsError, match="already exists; pass overwrite"):
        generate_world(TINY.with_overrides(plain=True, n_users=50), plain.root)
    assert plain.meta == before and [p.name for p in plain.root.parent.iterdir()] == ["world"]


def test_a_prefix_of_a_plain_world_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="a plain world is an imported log, which live traffic cannot continue"):
        generate_world(TINY.with_overrides(plain=True), tmp_path / "world", hours=10)
    assert not any(tmp_path.iterdir())


def test_the_cli_generates_a_plain_preset_and_shows_its_rows(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--users", "60", "--items", "40", "--days", "1", "--candidates", "20", "--pool-size", "30"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["data", "generate", "--preset", "plain", "--seed", "2", "--name", "p", *flags]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source"] == "synthetic world plain (seed 2), exported plain"
    assert not [w for w in caught if issubclass(w.category, DuplicateRowsWarning)]  # counted in rows instead
    rows = summary["rows"]
    assert rows["read"] == rows["kept"] + rows["dropped"] and rows["dropped"] > 0
    assert IdMaps.read(settings.world_dir("p")) is not None
    assert main(["data", "generate", "--preset", "plain", "--hours", "5", "--name", "q"]) == 2
    assert "a plain world is an imported log" in capsys.readouterr().err


def test_a_replay_of_the_plain_preset_generates_it_per_seed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PRESETS, "plain", TINY.with_overrides(name="plain", plain=True, n_users=60, days=1))
    root = log_root(settings, ReplayRequest(preset="plain"), 1)
    assert root == settings.world_dir("plain-seed1")
    assert EventLog(root).meta["source"] == "synthetic world plain (seed 1), exported plain"
