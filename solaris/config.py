"""One typed settings object, read from ``SOLARIS_*`` environment variables.

Every default works with no setup: data under ``./var``, the feature store in SQLite, MLflow tracking in
``./mlflow``. Relative defaults resolve against ``SOLARIS_HOME`` (the current directory unless set), so a
job started from the repo root and a test pointing ``SOLARIS_HOME`` at a temporary folder never share state.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from solaris.vms import VMSpec, load_vms

DEVICES = ("auto", "cpu", "cuda")


class ConfigError(ValueError):
    """A ``SOLARIS_*`` variable holds a value we cannot use."""


@dataclass(frozen=True)
class Settings:
    home: Path
    data_dir: Path
    staging_url: str | None  # an object-store URL or folder every worker reaches; unset: ``data_dir/staging``
    store_url: str
    store_conn_id: str | None
    mlflow_tracking_uri: str
    mlflow_artifacts_dir: Path
    airflow_home: Path
    device: str
    world: str
    vms_file: Path
    ranker_url: str | None = None  # where the health page reads the ranker's /metrics; unset: not read

    @property
    def worlds_dir(self) -> Path:
        return self.data_dir / "worlds"

    def world_dir(self, name: str | None = None) -> Path:
        return self.worlds_dir / (name or self.world)

    @property
    def staging_root(self) -> str:
        """Where a run's tasks hand tables on (:mod:`solaris.precompute.staging`)."""
        return self.staging_url or str(self.data_dir / "staging")

    @property
    def served_root(self) -> Path:
        """Features as served, one dataset per VM (``solaris.serving.servedlog.served_dir``)."""
        return self.data_dir / "served"

    def vms(self) -> tuple[VMSpec, ...]:
        """The configured vertical models (:mod:`solaris.vms`); the first leads."""
        return load_vms(self.vms_file)

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)

    def as_env(self) -> dict[str, str]:
        """The settings as ``SOLARIS_*`` variables, for child processes (Airflow tasks, servers)."""
        env = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                env[f"SOLARIS_{f.name.upper()}"] = str(value)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        home = Path(env.get("SOLARIS_HOME") or os.getcwd()).resolve()

        def path(name: str, default: str) -> Path:
            raw = env.get(f"SOLARIS_{name}") or default
            p = Path(raw)
            return p if p.is_absolute() else home / p

        data_dir = path("DATA_DIR", "var")
        device = env.get("SOLARIS_DEVICE", "auto")
        if device not in DEVICES:
            raise ConfigError(f"SOLARIS_DEVICE={device!r} is not one of {', '.join(DEVICES)}")
        store_url = env.get("SOLARIS_STORE_URL") or f"sqlite:///{data_dir / 'feature_store.db'}"
        _check_store_url(store_url)
        tracking = env.get("SOLARIS_MLFLOW_TRACKING_URI") or f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
        world = env.get("SOLARIS_WORLD", "default")
        if not world or "/" in world or world.startswith("."):
            raise ConfigError(f"SOLARIS_WORLD={world!r} must be a plain folder name")
        return cls(
            home=home,
            data_dir=data_dir,
            staging_url=_staging_url(env.get("SOLARIS_STAGING_URL"), home),
            store_url=store_url,
            store_conn_id=env.get("SOLARIS_STORE_CONN_ID") or None,
            mlflow_tracking_uri=tracking,
            mlflow_artifacts_dir=path("MLFLOW_ARTIFACTS_DIR", "mlflow/artifacts"),
            airflow_home=path("AIRFLOW_HOME", "var/airflow"),
            device=device,
            world=world,
            vms_file=path("VMS_FILE", "vms.toml"),
            ranker_url=env.get("SOLARIS_RANKER_URL") or None,
        )


def _staging_url(raw: str | None, home: Path) -> str | None:
    """A URL as given; a relative folder against ``SOLARIS_HOME`` like every other path."""
    if not raw:
        return None
    return raw if "://" in raw or Path(raw).is_absolute() else str(home / raw)


def is_tracking_server(uri: str) -> bool:
    """An MLflow tracking URI that names a server (which then owns the store and the artifacts), not a store."""
    return uri.startswith(("http://", "https://"))


def _check_store_url(url: str) -> None:
    if not url.startswith(("sqlite://", "postgresql")):
        raise ConfigError(
            f"SOLARIS_STORE_URL={url!r}: expected sqlite:///<path> or postgresql+psycopg://<user>@<host>/<db>"
        )


def get_settings() -> Settings:
    return Settings.from_env()
