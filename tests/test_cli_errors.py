"""Bad input to the ``solaris`` command: exit status 2 and a message naming the problem, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from solaris.cli import main

CASES = {
    "main, unknown preset": (
        ["main", "--preset", "nope"],
        "--preset 'nope': choose one of tiny, default, churn, plain, large",
    ),
    "main, no hours": (["main", "--hours", "0"], "--hours must be at least 1, got 0"),
    "main, no shards": (["main", "--shards", "0"], r"shards must be in [1, 64], got 0"),
    "serve, no workers": (["serve", "--workers", "0"], "--workers must be at least 1, got 0"),
    "serve, no such port": (["serve", "--port", "70000"], "--port must be in [0, 65535], got 70000"),
    "store stats, not a time": (
        ["store", "stats", "--version", "fm1-ae1-d32", "--at", "garbage"],
        "'garbage' is not an ISO time",
    ),
    "replay, TTL out of bounds": (["replay", "--preset", "tiny", "--ttl-hours", "0"], "ttl_hours must be in [1, 48]"),
    "replay, no seeds": (["replay", "--seeds"], "--seeds: expected at least one argument"),
    "replay, no swept hours": (["replay", "--sweep-hours", "0"], "--sweep-hours must be at least 1, got 0"),
    "replay, negative warm-up": (["replay", "--sweep-warmup-hours", "-1"], "--sweep-warmup-hours must be at least 0"),
    "replay, unknown FM cadence": (["replay", "--fm-refresh", "hourly"], "invalid choice: 'hourly'"),
    "train, unknown variant": (["train", "vm", "--variant", "nope"], "--variant 'nope': choose one of"),
    "data generate, unknown preset": (["data", "generate", "--preset", "nope"], "--preset 'nope'"),
    "data generate, prefix past the span": (
        ["data", "generate", "--preset", "tiny", "--hours", "73"],
        "hours=73 must lie in [1, 72]",
    ),
    "data live, no world": (["data", "live", "--name", "absent"], "is not an event log"),
    "data profile, no world": (["data", "profile", "absent"], "no world 'absent' under"),
    "data profile, TTL out of bounds": (
        ["data", "profile", "absent", "--ttl-hours", "49"],
        "ttl_hours must be in [1, 48]",
    ),
    "data live, a clock too fast": (["data", "live", "--hour-seconds", "0.1"], "hour_seconds must be at least 1"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_naming_the_problem_before_doing_anything(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, message = CASES[case]
    monkeypatch.setenv("SOLARIS_HOME", str(tmp_path))
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        status = exit_.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "var" / "worlds").exists(), "a refused command generated a world"
