"""Where a local stack keeps its files under ``<data_dir>/stack``, and the state file in which ``up`` records
what it started (pids, start times, logs, health checks), so ``down`` and ``status`` work from any later shell."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from solaris.config import Settings
from solaris.ops import procs
from solaris.ops.health import Check


def stack_dir(settings: Settings) -> Path:
    return settings.data_dir / "stack"


def worker_data_dir(settings: Settings, worker: str) -> Path:
    return stack_dir(settings) / f"worker-{worker}"


def state_path(settings: Settings) -> Path:
    return stack_dir(settings) / "stack.json"


@dataclass
class StackState:
    """What ``up`` started, persisted for ``down`` and ``status``."""

    urls: dict[str, str]
    metadata_url: str
    password_file: str
    procs: list[procs.Proc]
    checks: dict[str, Check] = field(default_factory=dict)
    clock: str | None = None  # a live stack's clock (LiveClock.to_json)

    def save(self, path: Path) -> None:
        body = asdict(self) | {"procs": [asdict(p) | {"log": str(p.log)} for p in self.procs]}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> StackState | None:
        if not path.is_file():
            return None
        body = json.loads(path.read_text())
        return cls(
            urls=body["urls"],
            metadata_url=body["metadata_url"],
            password_file=body["password_file"],
            procs=[procs.Proc(p["name"], p["pid"], p["create_time"], Path(p["log"])) for p in body["procs"]],
            checks={
                name: Check(**check | {"queues": tuple(check.get("queues", ()))})
                for name, check in body["checks"].items()
            },
            clock=body.get("clock"),
        )
