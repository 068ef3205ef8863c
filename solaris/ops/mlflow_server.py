"""The MLflow tracking server's command line, from ``mlflow/server.toml`` and the settings.

One builder for the local stack and for docker-compose (``solaris stack mlflow``), so both run the same
server: the backend store is the settings' tracking URI (a database, never Airflow's) and proxied artifacts
land in the settings' artifact folder.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from solaris.config import Settings

CONFIG = Path(__file__).resolve().parents[2] / "mlflow" / "server.toml"
_SERVER_KEYS = {"host": str, "port": int, "workers": int, "serve_artifacts": bool}
_OPTIONAL_KEYS = {"allowed_hosts": str}


@dataclass(frozen=True)
class ServerConfig:
    host: str
    port: int
    workers: int
    serve_artifacts: bool
    env: dict[str, str]
    allowed_hosts: str | None = None  # MLflow's default: localhost and private IPs (not compose's names)

    @classmethod
    def load(cls, path: Path = CONFIG) -> ServerConfig:
        raw = tomllib.loads(path.read_text())
        server = raw.get("server", {})
        for key, kind in _SERVER_KEYS.items():
            if not isinstance(server.get(key), kind):
                raise ValueError(f"{path}: [server] {key} must be {kind.__name__}, got {server.get(key)!r}")
        for key, kind in _OPTIONAL_KEYS.items():
            if key in server and not isinstance(server[key], kind):
                raise ValueError(f"{path}: [server] {key} must be {kind.__name__}, got {server[key]!r}")
        unknown = (set(server) - set(_SERVER_KEYS) - set(_OPTIONAL_KEYS)) | (set(raw) - {"server", "env"})
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        env = raw.get("env", {})
        if not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"{path}: [env] values must be strings")
        return cls(**server, env=dict(env))


def backend_store_uri(settings: Settings) -> str:
    """The settings' tracking URI, which must be a database the server can own."""
    uri = settings.mlflow_tracking_uri
    if not uri.startswith(("sqlite:///", "postgresql")):
        raise ValueError(
            f"SOLARIS_MLFLOW_TRACKING_URI={uri!r}: the MLflow server needs a database store "
            "(sqlite:///<path> or postgresql+psycopg://…), not a server URL"
        )
    return uri


def command(settings: Settings, config: ServerConfig) -> list[str]:
    """``mlflow server`` with the configured options; run it with ``config.env`` added to the environment."""
    uri = backend_store_uri(settings)
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    settings.mlflow_artifacts_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        config.host,
        "--port",
        str(config.port),
        "--workers",
        str(config.workers),
    ]
    if config.allowed_hosts:
        argv += ["--allowed-hosts", config.allowed_hosts]
    if config.serve_artifacts:
        argv += ["--serve-artifacts", "--artifacts-destination", settings.mlflow_artifacts_dir.as_uri()]
    else:
        argv += ["--no-serve-artifacts", "--default-artifact-root", settings.mlflow_artifacts_dir.as_uri()]
    return argv
