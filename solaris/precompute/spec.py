"""What one hourly precompute run is: its target hour, its pinned model versions and its parameters.

A run for a data interval ending at ``E`` precomputes for ``[floor_hour(E), +1 h)`` from data strictly before
``floor_hour(E)``. The end is used, not the start, because Airflow 3's cron schedules and manual runs give
``data_interval_start == data_interval_end``. A run with no logical date (the REST API's default) has no data
interval: it is for the hour of its ``run_after``, when it was asked to run. The run key depends on the target
hour alone, so a retry or a cleared rerun of the same hour writes the same store rows and the same staging paths.

Everything here is plain JSON-able data: the DAG passes it between tasks through XCom.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from solaris.data.hourly import HOUR, floor_hour
from solaris.embedding_version import parse_embedding_version
from solaris.precompute.params import PrecomputeParams

RUN_KEY_PREFIX = "solaris_precompute"


@dataclass(frozen=True)
class ShadowChain:
    """The challenger chain a run also writes, so that at its promotion its tiers are already filled."""

    fm_version: str
    ae_version: str
    vm_version: str
    embedding_version: str
    code_dim: int


@dataclass(frozen=True)
class HourRun:
    run_key: str
    interval_start: datetime
    interval_end: datetime
    fm_version: str
    ae_version: str
    vm_version: str
    vm_name: str  # the lead VM (solaris.vms): its champion pinned the chain, and it scores the verifier
    embedding_version: str
    code_dim: int
    params: PrecomputeParams
    demand_version: str | None = None  # solaris-demand, pinned when the selector is ``budget``
    shadow: ShadowChain | None = None  # a challenger awaiting promotion (see :mod:`.shadow`)
    shadow_of: str | None = None  # set on :meth:`as_shadow`'s run: the champion's embedding version

    @property
    def is_shadow(self) -> bool:
        return self.shadow_of is not None

    def as_shadow(self) -> HourRun:
        """The same hour and parameters with the shadow chain's versions: what the shadow steps run."""
        if self.shadow is None:
            raise ValueError(f"run {self.run_key} has no shadow chain")
        s = self.shadow
        return replace(
            self,
            fm_version=s.fm_version,
            ae_version=s.ae_version,
            vm_version=s.vm_version,
            embedding_version=s.embedding_version,
            code_dim=s.code_dim,
            shadow=None,
            shadow_of=self.embedding_version,
        )

    @property
    def code_dtype(self) -> str:
        """How the store keeps this run's codes (float16 unless the embedding version says otherwise)."""
        return parse_embedding_version(self.embedding_version).dtype

    @property
    def expires_at(self) -> datetime:
        return self.interval_start + timedelta(hours=self.params.ttl_hours)

    def as_xcom(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval_start"] = self.interval_start.isoformat()
        data["interval_end"] = self.interval_end.isoformat()
        return data

    @classmethod
    def from_xcom(cls, data: dict[str, Any]) -> HourRun:
        data = dict(data)
        data["interval_start"] = datetime.fromisoformat(data["interval_start"])
        data["interval_end"] = datetime.fromisoformat(data["interval_end"])
        data["params"] = PrecomputeParams.from_mapping(data["params"])
        if data.get("shadow") is not None:
            data["shadow"] = ShadowChain(**data["shadow"])
        return cls(**data)


class NoTargetHour(ValueError):
    """Nothing says which hour a run is for; retrying cannot change that."""


def target_time(data_interval_end: datetime | None, run_after: datetime | None) -> datetime:
    """The time whose hour a run precomputes: its data interval's end, else its ``run_after``.

    Airflow 3 runs triggered without a logical date have no data interval; falling back on ``run_after``
    makes such a run precompute the hour it runs in, as a manual run at that logical date would.
    """
    if data_interval_end is not None:
        return data_interval_end
    if run_after is not None:
        return run_after
    raise NoTargetHour("the run has neither a data interval nor a run_after: no hour to precompute for")


def target_interval(data_interval_end: datetime) -> tuple[datetime, datetime]:
    """The hour to precompute for, as plain UTC datetimes (Airflow hands over pendulum ones)."""
    hour = floor_hour(data_interval_end)
    start = datetime(hour.year, hour.month, hour.day, hour.hour, tzinfo=UTC)
    return start, start + HOUR


def run_key(interval_start: datetime) -> str:
    return f"{RUN_KEY_PREFIX}__{floor_hour(interval_start):%Y-%m-%dT%H}"


def shard_of(user_ids: np.ndarray, shards: int) -> np.ndarray:
    """Shard per user: a fixed 64-bit mix of the id (splitmix64's finaliser), the same in every process,
    unlike Python's ``hash``, and spread evenly even when ids are consecutive."""
    x = np.asarray(user_ids, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(shards)).astype(np.int64)


@dataclass(frozen=True)
class UserShard:
    """The users one user shard's task reads: those :func:`shard_of` puts in ``shard`` of ``count``."""

    shard: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.shard < self.count:
            raise ValueError(f"user shard {self.shard} is outside 0..{self.count - 1}")

    @property
    def every_user(self) -> bool:
        return self.count == 1

    def holds(self, user_ids: np.ndarray) -> np.ndarray:
        """Bool per id: is its user in this shard."""
        if self.every_user:
            return np.ones(len(user_ids), bool)
        return shard_of(user_ids, self.count) == self.shard


EVERY_USER = UserShard()
