"""Importing CSV/Parquet logs: the tables built, the errors on bad input, and that failures write nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import hypothesis
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from source_ids import as_source_ids, source_frame

from solaris.cli import main
from solaris.config import Settings
from solaris.data import importer
from solaris.data.eventlog import EventLog
from solaris.data.importer import ColumnMapping, DuplicateRowsWarning, build_requests, import_file, parse_events
from solaris.data.sources import LogImportError, Source

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HEADER = "user,item,ts,click,seg,genre"
# (user, item, UTC time, click, user segment, item genre); item 12 has no genre.
EVENTS = [
    (1, 10, T0 + timedelta(minutes=10), 1, "b", "x"),
    (1, 11, T0 + timedelta(minutes=5), 0, "b", "y"),
    (2, 10, T0 + timedelta(minutes=30), 0, "a", "x"),
    (1, 12, T0 + timedelta(hours=1), 1, "b", ""),
    (2, 11, T0 + timedelta(hours=2, minutes=59, seconds=59), 1, "a", "y"),
]
MAPPING = ColumnMapping(
    user="user", item="item", timestamp="ts", label="click", user_features=("seg",), item_features=("genre",)
)
# One request per user per hour, candidates in time order.
EXPECTED_REQUESTS = {
    (T0, 1): [11, 10],
    (T0, 2): [10],
    (T0 + timedelta(hours=1), 1): [12],
    (T0 + timedelta(hours=2), 2): [11],
}


def csv_file(folder: Path, lines: list[str], name: str = "log.csv") -> Path:
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def iso_lines() -> list[str]:
    """ISO times in three spellings: naive (meaning UTC), 'Z' and a +02:00 offset."""
    spellings = [
        lambda t: t.strftime("%Y-%m-%dT%H:%M:%S"),
        lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"),
        lambda t: t.astimezone(timezone(timedelta(hours=2))).isoformat(),
    ]
    return [HEADER] + [f"{u},{i},{spellings[n % 3](t)},{c},{s},{g}" for n, (u, i, t, c, s, g) in enumerate(EVENTS)]


def unix_lines() -> list[str]:
    return [HEADER] + [f"{u},{i},{t.timestamp()},{c},{s},{g}" for u, i, t, c, s, g in EVENTS]


def leftovers(target: Path) -> list[str]:
    """What sits beside the target: the log itself and any temporary folder a build left behind."""
    return sorted(p.name for p in target.parent.iterdir()) if target.parent.exists() else []


def requests_by_user_hour(log: EventLog) -> dict[tuple[datetime, int], list[int]]:
    frame = source_frame(log, log.requests(log.start, log.end))
    return {
        (ts.to_pydatetime().replace(minute=0, second=0, microsecond=0), user): list(candidates)
        for ts, user, candidates in zip(frame.ts, frame.user_id, frame.candidates, strict=True)
    }


def impressions_frame(log: EventLog) -> pd.DataFrame:
    frame = source_frame(log, log.impressions(log.start, log.end))
    return frame.sort_values(["ts", "user_id", "item_id"]).reset_index(drop=True)


@pytest.mark.parametrize("lines", [iso_lines, unix_lines], ids=["iso", "unix"])
def test_csv_import_groups_requests_per_user_hour(tmp_path: Path, lines) -> None:
    source = csv_file(tmp_path, lines())
    log = import_file(source, tmp_path / "out" / "log", MAPPING)

    assert requests_by_user_hour(log) == EXPECTED_REQUESTS
    imps = impressions_frame(log)
    assert sorted((r.user_id, r.item_id, r.click) for r in imps.itertuples()) == sorted(
        (u, i, c) for u, i, _, c, _, _ in EVENTS
    )
    requests = source_frame(log, log.requests(log.start, log.end)).set_index("request_id")
    assert requests.loc[imps.request_id[imps.item_id == 10].min(), "ts"] == T0 + timedelta(minutes=5)
    for r in imps.itertuples():
        assert requests.loc[r.request_id, "candidates"][r.position] == r.item_id
        assert (requests.loc[r.request_id, "user_id"], requests.loc[r.request_id, "ts"]) == (r.user_id, r.ts)
    assert (imps.conversion == 0).all()

    assert (log.start, log.end) == (T0, T0 + timedelta(hours=3))
    assert log.meta["hours"] == 3 and log.meta["source"] == str(source.resolve())
    assert log.meta["mapping"]["label"] == "click"
    for dataset in ("requests", "impressions"):
        hours = sorted(p.name for p in (log.root / dataset / "dt=2024-01-01").iterdir())
        assert hours == ["hour=00", "hour=01", "hour=02"]
    one_hour = source_frame(log, log.impressions(T0 + timedelta(hours=1), T0 + timedelta(hours=2)))
    assert list(one_hour.item_id) == [12]

    users = source_frame(log, log.users()).set_index("user_id")
    assert users.u_seg.to_dict() == {1: 2, 2: 1}  # sorted: a -> 1, b -> 2
    items = source_frame(log, log.items()).set_index("item_id")
    assert items.i_genre.to_dict() == {10: 1, 11: 2, 12: 0}  # 0: missing
    assert log.meta["vocabularies"] == {"u_seg": ["a", "b"], "i_genre": ["x", "y"]}


def test_iso_and_unix_imports_agree(tmp_path: Path) -> None:
    iso = import_file(csv_file(tmp_path, iso_lines(), "iso.csv"), tmp_path / "iso", MAPPING)
    unix = import_file(csv_file(tmp_path, unix_lines(), "unix.csv"), tmp_path / "unix", MAPPING)
    pd.testing.assert_frame_equal(impressions_frame(iso), impressions_frame(unix))


def test_parquet_with_request_ids_rating_and_conversion(tmp_path: Path) -> None:
    """Request ids decide the grouping, even across hours; rating >= threshold is a click."""
    frame = pd.DataFrame(
        {
            "req": [7, 7, 9, 7, 9],
            "uid": [u for u, *_ in EVENTS],
            "iid": [i for _, i, *_ in EVENTS],
            "when": pd.to_datetime([t for _, _, t, *_ in EVENTS], utc=True),
            "stars": [5.0, 2.0, 3.5, 4.0, 4.5],
            "bought": [1, 0, 0, 0, 1],
        }
    )
    source = tmp_path / "log.parquet"
    frame.to_parquet(source)
    mapping = ColumnMapping(
        user="uid",
        item="iid",
        timestamp="when",
        rating="stars",
        rating_threshold=4.0,
        request_id="req",
        conversion="bought",
    )
    log = import_file(source, tmp_path / "out" / "log", mapping)

    requests = source_frame(log, log.requests(log.start, log.end)).set_index("request_id")
    assert list(requests.loc[7, "candidates"]) == [11, 10, 12]
    assert list(requests.loc[9, "candidates"]) == [10, 11]
    assert requests.loc[7, "ts"].to_pydatetime() == T0 + timedelta(minutes=5)
    imps = impressions_frame(log)
    assert (imps.ts[imps.request_id == 7] == requests.loc[7, "ts"]).all()  # item 12's hour-1 event included
    expected_clicks = (frame.stars >= 4.0).astype(int)
    by_event = imps.set_index(["user_id", "item_id"])
    for u, i, click, bought in zip(frame.uid, frame.iid, expected_clicks, frame.bought, strict=True):
        assert (by_event.loc[(u, i), "click"], by_event.loc[(u, i), "conversion"]) == (click, bought)
    assert log.meta["counts"]["clicks"] == expected_clicks.sum()
    assert list(log.users().column_names) == ["user_id"]


def test_duplicates_dropped_with_a_warning(tmp_path: Path) -> None:
    lines = unix_lines()
    lines.insert(3, lines[1].replace(",1,b,", ",0,b,"))  # repeats data row 1 as data row 3, other label
    with pytest.warns(DuplicateRowsWarning, match=r"1 duplicate row\(s\).*row 3 \(line 4\) repeats row 1 \(line 2\)"):
        log = import_file(csv_file(tmp_path, lines), tmp_path / "out" / "log", MAPPING)
    assert log.meta["counts"]["impressions"] == len(EVENTS)
    assert log.meta["dropped_duplicates"] == 1
    kept = impressions_frame(log).set_index(["user_id", "item_id"])
    assert kept.loc[(1, 10), "click"] == 1  # the first of the two rows


def test_duplicates_refused_on_error(tmp_path: Path) -> None:
    lines = unix_lines()
    lines.append(lines[2])
    target = tmp_path / "out" / "log"
    with pytest.raises(LogImportError, match=r"1 duplicate row\(s\).*row 6 \(line 7\) repeats row 2 \(line 3\)"):
        import_file(csv_file(tmp_path, lines), target, MAPPING, on_duplicate="error")
    assert leftovers(target) == []


def test_an_item_shown_twice_in_one_user_hour_is_a_duplicate(tmp_path: Path) -> None:
    """Not the same second, but the same request: downstream an impression is known by (request, item)."""
    lines = unix_lines()
    again = T0 + timedelta(minutes=50)  # user 1 saw item 10 at minute 10 of this hour
    lines.append(f"1,10,{again.timestamp()},0,b,x")
    with pytest.warns(
        DuplicateRowsWarning, match=r"the same item twice in one request.*row 6 \(line 7\) repeats row 1"
    ):
        log = import_file(csv_file(tmp_path, lines), tmp_path / "out" / "log", MAPPING)
    assert requests_by_user_hour(log) == EXPECTED_REQUESTS
    with pytest.raises(LogImportError, match="row 6"):
        import_file(csv_file(tmp_path, lines), tmp_path / "out" / "strict", MAPPING, on_duplicate="error")


def test_time_scale_compresses_the_span_and_keeps_the_order(tmp_path: Path) -> None:
    """Each hour of the log holds ``time_scale`` source hours, counted from the first event."""
    start = T0 + timedelta(minutes=5)  # the first event
    lines = [HEADER] + [
        f"{u},{i},{(start + (t - start) * 24).timestamp()},{c},{s},{g}" for u, i, t, c, s, g in EVENTS
    ]  # EVENTS slowed down 24 times
    log = import_file(csv_file(tmp_path, lines), tmp_path / "out" / "log", MAPPING, time_scale=24)
    assert requests_by_user_hour(log) == EXPECTED_REQUESTS
    assert (log.meta["time_scale"], log.meta["hours"]) == (24, 3)
    unscaled = import_file(csv_file(tmp_path, unix_lines(), "unscaled.csv"), tmp_path / "out" / "unscaled", MAPPING)
    pd.testing.assert_frame_equal(impressions_frame(log), impressions_frame(unscaled))  # the same times, to the µs


@pytest.mark.parametrize("scale", [0.5, 0.0, float("nan"), float("inf")])
def test_time_scale_below_one_is_refused(tmp_path: Path, scale: float) -> None:
    target = tmp_path / "out" / "log"
    with pytest.raises(LogImportError, match=r"time_scale=.*must be a number >= 1"):
        import_file(csv_file(tmp_path, unix_lines()), target, MAPPING, time_scale=scale)
    assert leftovers(target) == []


def test_existing_log_refused_without_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "out" / "log"
    first = import_file(csv_file(tmp_path, unix_lines()), target, MAPPING)
    before = {p: p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()}
    other = csv_file(tmp_path, [HEADER, "5,6,0,1,a,x"], "other.csv")
    with pytest.raises(FileExistsError, match="already exists"):
        import_file(other, target, MAPPING)
    assert {p: p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()} == before
    assert leftovers(target) == ["log"]

    replaced = import_file(other, target, MAPPING, overwrite=True)
    assert replaced.meta["counts"]["impressions"] == 1 and first.root == replaced.root
    assert leftovers(target) == ["log"]


BAD_CSV = [
    # (lines, a pattern the message must match: row, line and column)
    ([HEADER, "1,10,yesterday,1,a,x"], r"row 1 \(line 2\), column 'ts': unparsable timestamp"),
    ([HEADER, "1,10,0,1,a,x", "1,11,2024-01-01T00:00:00,1,a,x"], r"row 1 \(line 2\), column 'ts': unparsable"),
    ([HEADER, "1,10,1e300,1,a,x"], r"row 1 \(line 2\), column 'ts': expected unix seconds"),
    ([HEADER, "1,10,0,1,a,x", ",11,0,1,a,x"], r"row 2 \(line 3\), column 'user': missing id, got nan$"),
    ([HEADER, f"1,{'x' * 257},0,1,a,x"], r"row 1 \(line 2\), column 'item': an id over 256 characters"),
    (
        [HEADER, "1,10,0,1,a,x", ",11,0,1,a,x", ",1,0,1,a,x"],
        r"row 2 \(line 3\), column 'user': missing id.*\(2 such rows\)",
    ),
    ([HEADER, "1,10,0,1,a,x", "", "1,11,0,2,a,x"], r"row 3 \(line 4\), column 'click': expected 0 or 1, got '2'"),
    ([HEADER, "1,10,0,,a,x"], r"row 1 \(line 2\), column 'click': expected 0 or 1"),
    ([HEADER, "1,10,0,1,a,x", "1,11,0,1,b,x"], r"row 2 \(line 3\), column 'seg': user_id 1 already had 'a' at row 1"),
    (["user,item,ts,seg,genre", "1,10,0,a,x"], r"missing column\(s\) click \(the file has"),
    ([HEADER], r"no data rows"),
]


@pytest.mark.parametrize(("lines", "pattern"), BAD_CSV)
def test_bad_csv_names_file_row_and_column(tmp_path: Path, lines: list[str], pattern: str) -> None:
    source = csv_file(tmp_path, lines)
    target = tmp_path / "out" / "log"
    with pytest.raises(LogImportError, match=pattern) as error:
        import_file(source, target, MAPPING)
    assert str(error.value).startswith(str(source))
    assert leftovers(target) == []


def test_empty_file_refused(tmp_path: Path) -> None:
    source = tmp_path / "empty.csv"
    source.write_bytes(b"")
    with pytest.raises(LogImportError, match=f"^{source}: the file is empty"):
        import_file(source, tmp_path / "out" / "log", MAPPING)
    assert leftovers(tmp_path / "out" / "log") == []


def test_bad_rating_and_mixed_request_users(tmp_path: Path) -> None:
    source = csv_file(tmp_path, ["r,u,i,t,stars", "1,1,10,0,4", "1,1,11,0,good"])
    rated = ColumnMapping(user="u", item="i", timestamp="t", rating="stars", rating_threshold=4)
    with pytest.raises(LogImportError, match=rf"^{source}, row 2 \(line 3\), column 'stars': expected a numeric"):
        import_file(source, tmp_path / "out" / "log", rated)

    source = csv_file(tmp_path, ["r,u,i,t,stars", "1,1,10,0,4", "2,2,11,0,4", "1,3,12,5,4"])
    requested = ColumnMapping(user="u", item="i", timestamp="t", rating="stars", rating_threshold=4, request_id="r")
    with pytest.raises(LogImportError, match=r"row 3 \(line 4\), column 'r': request 1 belongs to user 1 \(row 1"):
        import_file(source, tmp_path / "out" / "log", requested)
    assert leftovers(tmp_path / "out" / "log") == []


def test_bad_parquet_row_is_cited_without_a_line(tmp_path: Path) -> None:
    source = tmp_path / "log.parquet"
    pd.DataFrame({"user": [1, 2], "item": [10, 11], "ts": [0, 1], "click": [1, 3]}).to_parquet(source)
    mapping = ColumnMapping(user="user", item="item", timestamp="ts", label="click")
    with pytest.raises(LogImportError, match=rf"^{source}, row 2, column 'click': expected 0 or 1, got 3"):
        import_file(source, tmp_path / "out" / "log", mapping)
    assert leftovers(tmp_path / "out" / "log") == []


def test_mapping_must_name_one_click_source() -> None:
    with pytest.raises(LogImportError, match="exactly one of label"):
        ColumnMapping(user="u", item="i", timestamp="t")
    with pytest.raises(LogImportError, match="needs a threshold"):
        ColumnMapping(user="u", item="i", timestamp="t", rating="r")
    with pytest.raises(LogImportError, match="u mapped to more than one role"):
        ColumnMapping(user="u", item="i", timestamp="t", label="c", user_features=("u",))


def test_cli_import_reports_dropped_duplicates(settings: Settings, tmp_path: Path, capsys) -> None:
    lines = unix_lines()
    source = csv_file(tmp_path, [*lines, lines[1]])
    flags = ["--user", "user", "--item", "item", "--timestamp", "ts", "--label", "click", "--user-feature", "seg"]
    assert main(["data", "import", str(source), "--name", "imported", *flags]) == 0
    out, err = capsys.readouterr()
    assert "warning:" in err and "1 duplicate row(s)" in err
    log = EventLog(settings.world_dir("imported"))
    assert json.loads(out)["counts"] == log.meta["counts"]
    assert log.users().column_names == ["user_id", "u_seg"]

    assert main(["data", "import", str(source), "--name", "again", *flags, "--on-duplicate", "error"]) == 2
    assert "duplicate row(s)" in capsys.readouterr().err
    assert not settings.world_dir("again").exists()
    assert main(["data", "import", str(source), "--name", "x", "--user", "user"]) == 2
    assert "needs --item, --timestamp" in capsys.readouterr().err


@hypothesis.settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 3 * 3600)),
        min_size=1,
        max_size=40,
        unique_by=lambda e: e,
    )
)
def test_requests_match_a_groupby_of_the_events(events: list[tuple[int, int, int]]) -> None:
    """Against pandas' groupby: one request per user-hour, candidates in (time, file) order."""
    frame = pd.DataFrame(events, columns=["user", "item", "ts"]).assign(click=0)
    source = Source("events", frame, header_lines=None)
    mapping = ColumnMapping(user="user", item="item", timestamp="ts", label="click")
    events = parse_events(source, mapping)
    requests, impressions = build_requests(source, events, "user")

    hour = frame.ts // 3600
    expected = {
        (h * 3600, user): group.sort_values("ts", kind="stable").item.tolist()
        for (h, user), group in frame.groupby([hour, frame.user])
    }
    got = as_source_ids(events.ids, requests.to_pandas())
    starts = got.ts.astype("int64") // 10**6 // 3600 * 3600
    assert dict(zip(zip(starts, got.user_id, strict=True), got.candidates.map(list), strict=True)) == expected
    by_id = got.set_index("request_id")
    for r in as_source_ids(events.ids, impressions.to_pandas()).itertuples():
        assert by_id.loc[r.request_id, "candidates"][r.position] == r.item_id
        assert (by_id.loc[r.request_id, "user_id"], by_id.loc[r.request_id, "ts"]) == (r.user_id, r.ts)


def test_failure_while_writing_leaves_the_old_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out" / "log"
    import_file(csv_file(tmp_path, unix_lines()), target, MAPPING)
    before = (target / "meta.json").read_text()

    def write_half(folder: Path, *args: object, **kwargs: object) -> None:
        (folder / "requests").mkdir()
        raise OSError("disk full")

    monkeypatch.setattr(importer, "write_event_log", write_half)
    with pytest.raises(OSError, match="disk full"):
        import_file(csv_file(tmp_path, [HEADER, "5,6,0,1,a,x"], "other.csv"), target, MAPPING, overwrite=True)
    assert leftovers(target) == ["log"]
    assert (target / "meta.json").read_text() == before
