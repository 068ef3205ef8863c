"""Logs without request ids: a session gap makes an item shown again after a pause a new request, not a duplicate."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import hypothesis
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from source_ids import as_source_ids, source_frame

from solaris.cli import main
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.importer import (
    ColumnMapping,
    DuplicateRowsWarning,
    build_requests,
    import_file,
    parse_events,
    sessions,
)
from solaris.data.sources import LogImportError, Source

T0 = datetime(2024, 1, 1, tzinfo=UTC)
MAPPING = ColumnMapping(user="user", item="item", timestamp="ts", label="click")
# (user, item, minutes after T0, click)
ROWS = [
    (1, 10, 0, 1),
    (1, 11, 5, 0),
    (2, 10, 10, 0),
    (1, 10, 40, 1),  # item 10 again, after a 35-minute pause: a second request with a 30-minute gap
    (1, 12, 42, 0),
    (1, 10, 43, 0),  # and again 3 minutes later: a duplicate in that second request either way
    (3, 20, 55, 0),
    (3, 21, 62, 1),  # 7 minutes later but in the next hour: requests never leave their hour
]


def csv_file(folder: Path) -> Path:
    path = folder / "ads.csv"
    seconds = int(T0.timestamp())
    lines = ["user,item,ts,click"] + [f"{u},{i},{seconds + 60 * m},{c}" for u, i, m, c in ROWS]
    path.write_text("\n".join(lines) + "\n")
    return path


def requests(log: EventLog) -> list[tuple[int, int, list[int]]]:
    """(user, minute of the request's ts, candidates), in time order."""
    frame = source_frame(log, log.requests(log.start, log.end)).sort_values(["ts", "user_id"])
    minute = ((frame.ts - T0) / timedelta(minutes=1)).astype(int)
    return [(int(u), int(m), list(c)) for u, m, c in zip(frame.user_id, minute, frame.candidates, strict=True)]


def test_with_a_session_gap_a_repeat_after_a_pause_is_kept_as_a_second_request(tmp_path: Path) -> None:
    with pytest.warns(DuplicateRowsWarning, match=r"1 duplicate row\(s\).*row 6 \(line 7\) repeats row 4 \(line 5\)"):
        log = import_file(csv_file(tmp_path), tmp_path / "out", MAPPING, session_gap_minutes=30)

    assert requests(log) == [(1, 0, [10, 11]), (2, 10, [10]), (1, 40, [10, 12]), (3, 55, [20]), (3, 62, [21])]
    imps = log.impressions(log.start, log.end).to_pandas()
    assert len(imps) == 7 and imps.click.sum() == 3  # the click on the repeat is kept
    assert log.meta["rows"] == {"read": 8, "kept": 7, "dropped": 1, "dropped_clicks": 0}
    assert log.meta["session_gap_minutes"] == 30 and log.meta["dropped_duplicates"] == 1


def test_without_a_session_gap_the_repeat_is_dropped_and_counted(tmp_path: Path) -> None:
    with pytest.warns(DuplicateRowsWarning, match=r"2 duplicate row\(s\).*--session-gap-minutes"):
        log = import_file(csv_file(tmp_path), tmp_path / "out", MAPPING)

    assert requests(log) == [(1, 0, [10, 11, 12]), (2, 10, [10]), (3, 55, [20]), (3, 62, [21])]
    assert log.meta["rows"] == {"read": 8, "kept": 6, "dropped": 2, "dropped_clicks": 1}
    assert log.meta["session_gap_minutes"] is None


def test_a_repeat_within_a_session_is_still_refused_on_error(tmp_path: Path) -> None:
    with pytest.raises(LogImportError, match=r"1 duplicate row\(s\).*row 6 \(line 7\) repeats row 4"):
        import_file(csv_file(tmp_path), tmp_path / "out", MAPPING, session_gap_minutes=30, on_duplicate="error")
    assert not (tmp_path / "out").exists()


def test_a_session_gap_is_refused_with_request_ids_or_when_not_positive(tmp_path: Path) -> None:
    source = csv_file(tmp_path)
    with_ids = tmp_path / "with_ids.csv"
    with_ids.write_text("user,item,ts,click,req\n1,10,0,1,7\n1,10,3600,0,8\n")
    mapping = ColumnMapping(user="user", item="item", timestamp="ts", label="click", request_id="req")
    with pytest.raises(LogImportError, match="applies only to logs without --request-id"):
        import_file(with_ids, tmp_path / "a", mapping, session_gap_minutes=30)
    for bad in (0, -5, float("nan")):
        with pytest.raises(LogImportError, match="must be a number of minutes > 0"):
            import_file(source, tmp_path / "b", MAPPING, session_gap_minutes=bad)


def test_cli_import_summary_says_how_many_rows_were_kept_and_dropped(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = csv_file(tmp_path)
    flags = ["--user", "user", "--item", "item", "--timestamp", "ts", "--label", "click"]

    assert main(["data", "import", str(source), "--name", "plain", *flags]) == 0
    out, err = capsys.readouterr()
    assert "2 duplicate row(s)" in err
    assert json.loads(out)["rows"] == {"read": 8, "kept": 6, "dropped": 2, "dropped_clicks": 1}

    assert main(["data", "import", str(source), "--name", "sessions", *flags, "--session-gap-minutes", "30"]) == 0
    out, _ = capsys.readouterr()
    summary = json.loads(out)
    assert summary["rows"] == {"read": 8, "kept": 7, "dropped": 1, "dropped_clicks": 0}
    assert summary["counts"]["requests"] == 5 and summary["counts"]["clicks"] == 3

    assert main(["data", "import", "movielens-100k", "--name", "ml", "--session-gap-minutes", "30"]) == 2
    assert "drop --session-gap-minutes" in capsys.readouterr().err


@hypothesis.settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 3 * 3600)), min_size=1, max_size=40),
    st.sampled_from([1, 10, 30]),
)
def test_session_requests_match_a_groupby_of_the_events(events: list[tuple[int, int, int]], gap: int) -> None:
    """Against pandas: a request is a user's run of events with no pause over ``gap`` minutes, cut at hours."""
    frame = pd.DataFrame(events, columns=["user", "item", "ts"]).assign(click=0)
    source = Source("events", frame, header_lines=None)
    events = sessions(parse_events(source, MAPPING), gap)
    requests, _ = build_requests(source, events, "user")

    ordered = frame.sort_values(["user", "ts"], kind="stable")
    pause = ordered.groupby("user").ts.diff().fillna(0) > gap * 60
    ordered = ordered.assign(session=pause.groupby(ordered.user).cumsum(), hour=ordered.ts // 3600)
    groups = ordered.groupby(["hour", "user", "session"])
    expected = sorted((int(g.ts.iloc[0]), int(user), g.item.tolist()) for (_, user, _), g in groups)
    got = as_source_ids(events.ids, requests.to_pandas())
    starts = got.ts.astype("int64") // 10**6
    assert sorted(zip(starts, got.user_id, map(list, got.candidates), strict=True)) == expected
