"""Each live hour's load figures: one JSON line per hour on disk, and MLflow metrics at the simulated hour."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.live.figures import EXPERIMENT, MlflowHours, append_hour, hour_line, load_log_path, read_hours
from solaris.live.load import LoadStats

HOUR = datetime(2026, 1, 7, 5, tzinfo=UTC)


def stats(*ms: float) -> LoadStats:
    counted = LoadStats()
    for value in ms:
        counted.count(200, value / 1000)
    counted.count(503, 0.0)
    return counted


def test_hours_are_read_back_in_order_and_a_line_cut_short_is_left_out(tmp_path: Path) -> None:
    path = load_log_path(tmp_path)
    append_hour(path, hour_line(HOUR, stats(10, 20)))
    append_hour(path, hour_line(HOUR.replace(hour=6), stats(30)))
    with path.open("a") as out:
        out.write('{"hour": "2026-01-07T07:00:00+00:0')  # killed mid-write
    hours = read_hours(path)
    assert [h["hour"] for h in hours] == ["2026-01-07T05:00:00+00:00", "2026-01-07T06:00:00+00:00"]
    assert hours[0] | {"ranker_p50_ms": round(hours[0]["ranker_p50_ms"], 6)} == {
        "hour": "2026-01-07T05:00:00+00:00",
        "sent": 3,
        "answered": 2,
        "not_ready": 1,
        "failed": 0,
        "ranker_p50_ms": 15.0,
        "ranker_p99_ms": hours[0]["ranker_p99_ms"],
    }
    assert read_hours(tmp_path / "none.jsonl") == []


@pytest.mark.slow  # a fresh MLflow database: a few seconds
def test_mlflow_gets_each_hours_figures_at_its_simulated_time(settings: Settings) -> None:
    hours = MlflowHours(settings)
    hours.log(hour_line(HOUR, stats(10, 20)))
    hours.log(hour_line(HOUR.replace(hour=6), LoadStats()))  # nothing answered: no percentiles to log
    hours.close()
    client = MlflowClient(settings.mlflow_tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    p99 = client.get_metric_history(run.info.run_id, "ranker_p99_ms")
    sent = client.get_metric_history(run.info.run_id, "sent")
    assert [(m.timestamp, m.step) for m in p99] == [(int(HOUR.timestamp() * 1000), int(HOUR.timestamp()) // 3600)]
    assert [m.value for m in sent] == [3.0, 0.0]
    assert client.get_run(run.info.run_id).info.status == "FINISHED"


def test_a_tracking_server_that_does_not_answer_costs_a_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the client's own retries take minutes
    hours = MlflowHours(settings.with_overrides(mlflow_tracking_uri="http://127.0.0.1:9"))
    with caplog.at_level(logging.WARNING):
        hours.log(hour_line(HOUR, stats(10)))
        hours.close()
    assert "could not log the hour 2026-01-07T05:00:00+00:00 to MLflow" in caplog.text


def test_the_load_driver_never_waits_for_mlflow(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """``log`` returns while the tracking client is still busy with the hour before."""
    busy, logged = threading.Event(), []
    monkeypatch.setattr(MlflowHours, "_log", lambda self, line: busy.wait(30) and logged.append(line["hour"]))
    hours = MlflowHours(settings)
    hours.log(hour_line(HOUR, stats(10)))
    hours.log(hour_line(HOUR.replace(hour=6), stats(10)))
    assert logged == []  # both handed over, neither logged yet
    busy.set()
    hours.close()
    assert logged == ["2026-01-07T05:00:00+00:00", "2026-01-07T06:00:00+00:00"]
