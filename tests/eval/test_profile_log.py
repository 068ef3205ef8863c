"""`solaris data profile`: every figure on a hand-built log with known answers, the refusals, and the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from solaris.cli import main
from solaris.config import Settings
from solaris.data.eventlog import EventLog, building, write_event_log
from solaris.data.schema import IMPRESSIONS, REQUESTS, TS
from solaris.eval.profile import profile_log
from solaris.precompute.params import PrecomputeParams

T0 = datetime(2026, 3, 2, tzinfo=UTC)
H = timedelta(hours=1)
# (hour, user, candidates, shown). 72 hours: the replay's spans are train [0, 36), logging [36, 58), eval [58, 72).
REQUESTS_72H = [
    (0, 1, [10, 11], [10]),  # I0: user 1's first hour: unknown
    (2, 1, [10, 12], [10, 12]),  # I1 (1, 10) shown 2 h before: a repeat; I2 (1, 12) new
    (2, 2, [10], [10]),  # I3: user 2's first hour
    (30, 3, [13], [13]),  # I4: item 13 and user 3 first shown on day 1, inside the train span
    (40, 1, [11], [11]),  # I5: item 11 first shown after the train span (a candidate at hour 0 only)
    (41, 1, [11], [11]),  # I6: (1, 11) shown the hour before: a repeat
    (50, 4, [10], [10]),  # I7: user 4 signed up at hour 45: known on first request
    (60, 2, [10, 12], [12]),  # I8: eval span
    (62, 2, [10, 13], [10]),  # I9: (2, 10) a candidate at hour 60: a repeat
    (63, 5, [10], [10]),  # I10: user 5's first hour, no impression in the 72 h before: counterless
]
SIGNUP = {4: T0 + 45 * H}


def write_log(target: Path, requests: list[tuple[int, int, list[int], list[int]]], hours: int = 72) -> EventLog:
    impressions: dict[str, list[Any]] = {name: [] for name in IMPRESSIONS.names}
    for request_id, (hour, user, _, shown) in enumerate(requests):
        for position, item in enumerate(shown):
            row = (request_id, T0 + hour * H, user, item, position, 0, 0)
            for name, value in zip(IMPRESSIONS.names, row, strict=True):
                impressions[name].append(value)
    request_table = pa.table(
        {
            "request_id": list(range(len(requests))),
            "ts": [T0 + r[0] * H for r in requests],
            "user_id": [r[1] for r in requests],
            "candidates": [r[2] for r in requests],
        },
        schema=REQUESTS,
    )
    users = pa.table(
        {
            "user_id": [1, 2, 3, 4, 5],
            "u_seg": pa.array([0, 1, 0, 1, 0], pa.int32()),
            "signup_ts": pa.array([SIGNUP.get(u) for u in range(1, 6)], TS),
        }
    )
    items = pa.table({"item_id": [10, 11, 12, 13]})  # no side features: a common case
    with building(target) as folder:
        meta = {"name": target.name, "source": "test", "start": str(T0), "end": str(T0 + hours * H)}
        write_event_log(folder, request_table, pa.table(impressions, schema=IMPRESSIONS), users, items, meta)
    return EventLog(target)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    return write_log(tmp_path_factory.mktemp("profile") / "hand", REQUESTS_72H)


@pytest.fixture(scope="module")
def profile(log: EventLog) -> dict[str, Any]:
    return profile_log(log)


def test_known_users_and_new_ids_by_day(profile: dict[str, Any]) -> None:
    assert profile["impressions"] == 11
    assert profile["users_known"] == pytest.approx(7 / 11)
    days = {row["day"]: row for row in profile["by_day"]}
    assert list(days) == ["2026-03-02", "2026-03-03", "2026-03-04"]
    assert [days[d]["impressions"] for d in days] == [4, 3, 4]
    assert [days[d]["users_known"] for d in days] == pytest.approx([2 / 4, 2 / 3, 3 / 4])
    # The first span's FM (trained up to hour 36) against the FM refreshed each day.
    assert [days[d]["items_not_in_train_span"] for d in days] == pytest.approx([0, 2 / 3, 0])
    assert [days[d]["items_not_seen_before_day"] for d in days] == pytest.approx([1, 1, 0])
    assert [days[d]["users_not_in_train_span"] for d in days] == pytest.approx([0, 0, 2 / 4])
    assert [days[d]["users_not_seen_before_day"] for d in days] == pytest.approx([1, 1 / 3, 2 / 4])


def test_side_features_requests_and_hourly_volume(profile: dict[str, Any]) -> None:
    assert profile["side_features"] == {
        "users": {"rows": 5, "features": {"u_seg": 2}},
        "items": {"rows": 4, "features": {}},
    }
    # User-days with a request: 2, 1, 1, 2, 1, 2, 1.
    assert profile["requests_per_user_day"] == pytest.approx({"user_days": 7, "mean": 10 / 7, "p50": 1, "p90": 2})
    volume = profile["hourly_volume"]
    assert volume["hours"] == 72
    assert volume["empty_share"] == pytest.approx(63 / 72)  # requests in 9 of the 72 hours
    assert volume["requests"] == pytest.approx({"mean": 10 / 72, "p50": 0, "max": 2})
    assert volume["impressions"] == pytest.approx({"mean": 11 / 72, "p50": 0, "max": 3})


def test_repeat_exposure_counts_shown_and_candidate_pairs_within_the_ttl(
    log: EventLog, profile: dict[str, Any]
) -> None:
    assert profile["repeat_exposure"] == pytest.approx({"ttl_hours": 4, "share": 3 / 11})
    # At 1 h only I6 (shown the hour before) is still a repeat: I1's and I9's sightings are 2 h back.
    assert profile_log(log, PrecomputeParams(ttl_hours=1))["repeat_exposure"]["share"] == pytest.approx(1 / 11)


def test_ceilings_over_the_evaluation_span(log: EventLog, profile: dict[str, Any]) -> None:
    assert profile["replay_spans"]["eval"] == f"{(T0 + 58 * H).isoformat()}/{(T0 + 72 * H).isoformat()}"
    ceilings = profile["ceilings"]
    assert ceilings["impressions"] == 3  # I8, I9, I10
    assert ceilings["users_known"] == pytest.approx(2 / 3)
    assert ceilings["pair_from_repeats"] == pytest.approx(1 / 3)
    # User 5 is counterless, of a recent cohort (segment 0), shown item 10: among the day's most shown.
    assert ceilings["cohort"] == pytest.approx({"grid": "32x200", "share": 1 / 3, "counterless": 1 / 3})
    no_cohorts = profile_log(log, PrecomputeParams(cohorts=0))["ceilings"]["cohort"]
    assert no_cohorts["share"] == 0


def test_a_log_too_short_for_a_replay_is_profiled_without_its_span_figures(tmp_path: Path) -> None:
    profile = profile_log(write_log(tmp_path / "short", REQUESTS_72H[:3], hours=10))
    assert "too few for a replay" in profile["replay_spans"]["problem"]
    assert profile["ceilings"] is None
    assert profile["by_day"][0]["items_not_in_train_span"] is None
    assert profile["users_known"] == pytest.approx(2 / 4)


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_refuses_a_missing_or_malformed_world(settings: Settings, tmp_path: Path, capsys) -> None:
    write_log(settings.world_dir("hand"), REQUESTS_72H)
    err = _refusal(["data", "profile", "nope"], capsys)
    assert "no world 'nope' under" in err and "worlds there: hand" in err
    assert "is not a folder" in _refusal(["data", "profile", str(tmp_path / "absent")], capsys)
    (tmp_path / "plain").mkdir()
    assert "is not an event log (no meta.json)" in _refusal(["data", "profile", str(tmp_path / "plain")], capsys)
    (tmp_path / "plain" / "meta.json").write_text("{")
    assert "meta.json is not JSON" in _refusal(["data", "profile", str(tmp_path / "plain")], capsys)
    (tmp_path / "plain" / "meta.json").write_text(json.dumps({"start": str(T0), "end": str(T0 + H)}))
    err = _refusal(["data", "profile", str(tmp_path / "plain")], capsys)
    assert "is not a whole event log: no users.parquet, items.parquet" in err
    empty = write_log(tmp_path / "empty", [(0, 1, [10], [])])
    assert f"{empty.root} has no impressions" in _refusal(["data", "profile", str(empty.root)], capsys)


def test_cli_prints_the_table_and_writes_json(settings: Settings, tmp_path: Path, capsys) -> None:
    write_log(settings.world_dir("hand"), REQUESTS_72H)
    assert main(["data", "profile", "hand"]) == 0
    out = capsys.readouterr().out
    default = settings.data_dir / "profiles" / "hand.json"
    assert f"wrote {default}" in out
    assert "users known before their hour (a request or a sign-up before it): 63.6% of impressions" in out
    assert "repeat exposure within 4 h: 27.3%" in out
    assert "items: 4 rows; none" in out
    assert "new-user cohort tier at 32x200: 33.3%" in out
    assert json.loads(default.read_text())["impressions"] == 11
    target = tmp_path / "out" / "profile.json"
    assert main(["data", "profile", str(settings.world_dir("hand")), "--json", str(target), "--ttl-hours", "1"]) == 0
    assert f"wrote {target}" in capsys.readouterr().out
    assert json.loads(target.read_text())["repeat_exposure"] == pytest.approx({"ttl_hours": 1, "share": 1 / 11})
