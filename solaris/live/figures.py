"""Each live hour's load figures: requests sent, how the ranker answered, its p50 and p99 round trip.

One JSON line per simulated hour in the data folder's ``live/load.jsonl`` (the plugin page and the soak test
read it), and the same figures logged to MLflow (experiment ``solaris-live``, one run per traffic process)
with the hour's simulated time as the metric's timestamp and its hour number as the step.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solaris.live.load import LoadStats

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from solaris.config import Settings

logger = logging.getLogger(__name__)
EXPERIMENT = "solaris-live"
HOUR_MS = 3_600_000
CLOSE_TIMEOUT_S = 30.0  # at a stop, how long the last hours may take to reach MLflow


def load_log_path(data_dir: Path) -> Path:
    return data_dir / "live" / "load.jsonl"


def hour_line(hour: datetime, stats: LoadStats) -> dict[str, Any]:
    return {"hour": hour.astimezone(UTC).isoformat()} | stats.figures()


def append_hour(path: Path, line: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(line) + "\n")


def read_hours(path: Path) -> list[dict[str, Any]]:
    """Every hour recorded, oldest first; a line cut short by a crash mid-write is left out."""
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    return lines


class MlflowHours:
    """The hours' figures as metrics of one MLflow run, opened at the first hour (the stack starts the
    traffic before its tracking server answers). A thread of its own logs them: MLflow's client retries a
    server that does not answer for minutes, which costs a warning, never the traffic's pace."""

    def __init__(self, settings: Settings) -> None:
        from solaris.tracking import registry  # MLflow and torch: imported at the start, not mid-run

        self.registry = registry
        self.settings = settings
        self.client: MlflowClient | None = None
        self.run_id: str | None = None
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._log_each, name="mlflow-hours", daemon=True)
        self._thread.start()

    def log(self, line: dict[str, Any]) -> None:
        self._lines.put(line)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Logs what is queued and ends the run, waiting at most ``timeout_s``."""
        self._lines.put(None)
        self._thread.join(timeout_s)

    def _log_each(self) -> None:
        while (line := self._lines.get()) is not None:
            try:
                self._log(line)
            except Exception as exc:  # noqa: BLE001 (whatever the tracking client raises)
                logger.warning("could not log the hour %s to MLflow: %s", line["hour"], exc)
        if self.client is not None and self.run_id is not None:
            try:
                self.client.set_terminated(self.run_id)
            except Exception as exc:  # noqa: BLE001
                logger.warning("could not end the MLflow run %s: %s", self.run_id, exc)

    def _log(self, line: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        if self.client is None or self.run_id is None:
            client = self.registry.connect(self.settings)
            experiment = self.registry.experiment(client, self.settings, EXPERIMENT)
            self.run_id = client.create_run(experiment, run_name="live-load").info.run_id
            self.client = client
        at = int(datetime.fromisoformat(line["hour"]).timestamp() * 1000)
        metrics = [Metric(k, float(v), at, at // HOUR_MS) for k, v in line.items() if k != "hour" and v is not None]
        self.client.log_batch(self.run_id, metrics=metrics)
