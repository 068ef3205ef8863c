"""docker-compose.yml, checked without Docker: every command, module, path and port it names exists in the
repo, the services agree on database URLs and the broker, the gpu worker is wired to the gpu queue and an
NVIDIA device, no secret is in the file, and every service has a healthcheck.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from solaris.airflow_env import DAGS_FOLDER, GPU_POOL, PLUGINS_FOLDER
from solaris.cli import build_parser
from solaris.ops import mlflow_server
from solaris.precompute.pipeline import PRECOMPUTE

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
VAR = re.compile(r"(?<!\$)\$\{(\w+)(?::-([^}]*))?\}")  # $${X} is a literal for the container's shell
SECRET_KEY = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|_KEY$")
ONE_SHOT = {"airflow-init", "minio-init"}


def _dotenv(path: Path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ${VAR} and ${VAR:-default}, with ``$$`` as a literal dollar."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value
    return VAR.sub(lambda m: env.get(m[1]) or m[2] or "", value).replace("$$", "$")


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def example() -> dict[str, str]:
    return _dotenv(REPO / ".env.example")


@pytest.fixture(scope="module")
def services(raw: dict[str, Any], example: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The services with the variables of .env.example substituted."""
    return _interpolate(raw["services"], example)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _ours(service: dict[str, Any]) -> bool:
    return "build" in service


def _env(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def _commands(service: dict[str, Any]) -> Iterator[list[str]]:
    """The command line, or each command of a ``bash -c "a && b"`` chain (none for an image's default)."""
    argv = service.get("command", [])
    if not argv:
        return
    argv = shlex.split(argv) if isinstance(argv, str) else [str(a) for a in argv]
    argv = [str(a) for a in service.get("entrypoint", [])] + argv
    if argv[:2] in (["bash", "-c"], ["sh", "-c"]):
        words = shlex.split(argv[2])
        chunks: list[list[str]] = [[]]
        for word in words:
            chunks.append([]) if word == "&&" else chunks[-1].append(word)
        yield from (c for c in chunks if c)
    else:
        yield argv


def _option(argv: list[str], name: str) -> str:
    assert name in argv, f"{argv} has no {name}"
    return argv[argv.index(name) + 1]


def _port_of(service: dict[str, Any]) -> int:
    (argv,) = _commands(service)
    return int(_option(argv, "--port"))


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source (a named volume or a host path)."""
    return {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}


def _database_url(url: str) -> tuple[str, str, str]:
    """(host, user:password, database) of a SQLAlchemy PostgreSQL URL."""
    parts = urlsplit(url.removeprefix("db+"))
    assert parts.scheme == "postgresql+psycopg", f"{url}: expected postgresql+psycopg://"
    return parts.hostname or "", f"{parts.username}:{parts.password}", parts.path.lstrip("/")


def test_every_solaris_command_parses(services: dict[str, dict[str, Any]]) -> None:
    parser = build_parser()
    named = [(name, argv) for name, s in services.items() if _ours(s) for argv in _commands(s) if argv[0] == "solaris"]
    assert {name for name, _ in named} >= {"mlflow", "ranker", "airflow-init"}
    for name, argv in named:
        try:
            args = parser.parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"{name}: `{' '.join(argv)}` is not a valid solaris command")
        assert callable(args.handler), name


def test_every_airflow_command_and_module_exists(services: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """Parsed by Airflow's own CLI parser (with the CeleryExecutor's commands) in a child process, so this
    process never imports airflow with another AIRFLOW_HOME."""
    airflow_argvs = [argv[1:] for s in services.values() if _ours(s) for argv in _commands(s) if argv[0] == "airflow"]
    healthchecks = [s["healthcheck"]["test"] for s in services.values() if _ours(s) and "healthcheck" in s]
    airflow_argvs += [t[2:] for t in healthchecks if t[:2] == ["CMD", "airflow"]]
    shells = [shlex.split(t[1]) for t in healthchecks if t[0] == "CMD-SHELL"]
    celery_apps = [_option(argv, "--app") for argv in shells if argv[0] == "celery"]
    assert {a[0] for a in airflow_argvs} >= {"api-server", "scheduler", "dag-processor", "triggerer", "celery", "db"}
    assert celery_apps, "the workers' healthchecks name the Celery app"
    script = """
import importlib, json, sys
from airflow.cli.cli_parser import get_parser
argvs, apps = json.loads(sys.argv[1])
bad = []
for argv in argvs:
    try:
        get_parser().parse_args(argv)
    except SystemExit:
        bad.append(argv)
for app in apps:
    module, _, attr = app.rpartition(".")
    if not hasattr(importlib.import_module(module), attr):
        bad.append(app)
print(json.dumps(bad))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env |= {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor"}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps([airflow_argvs, celery_apps])],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], "commands or modules Airflow does not know"


def test_python_healthchecks_compile_and_probe_the_served_port(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        test = service.get("healthcheck", {}).get("test", [])
        if test[:3] != ["CMD", "python", "-c"]:
            continue
        compile(test[3], f"{name} healthcheck", "exec")
        port = urlsplit(re.search(r"'(http://[^']+)'", test[3])[1]).port
        if name == "airflow-scheduler":
            assert _env(service)["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] == "True" and port == 8974
        else:
            assert port == _port_of(service), f"{name}: healthcheck probes {port}, the service listens elsewhere"


def test_published_ports_are_the_ones_served(services: dict[str, dict[str, Any]]) -> None:
    published = {name: s["ports"] for name, s in services.items() if _ours(s) and "ports" in s}
    assert set(published) == {"airflow-api-server", "mlflow", "ranker"}
    for name, ports in published.items():
        (mapping,) = ports
        host_port, container_port = mapping.split(":")
        assert int(container_port) == _port_of(services[name]) and host_port.isdigit(), name


def test_paths_named_exist_in_the_repo(services: dict[str, dict[str, Any]], raw: dict[str, Any]) -> None:
    dockerfile = REPO / raw["x-image"]["build"]["dockerfile"]
    assert dockerfile.is_file()
    copies = re.findall(r"^COPY (\S+(?: \S+)*) \S+$", dockerfile.read_text(), re.M)
    for sources in copies:
        for source in sources.split():
            assert (REPO / source).exists(), f"Dockerfile copies {source}, missing from the repo"
    assert re.search(r"^WORKDIR /opt/solaris$", dockerfile.read_text(), re.M)
    for name, service in services.items():
        for target, source in _mounts(service).items():
            if source.startswith("."):
                assert (REPO / source).is_file(), f"{name} mounts {source}, missing from the repo"
            else:
                assert source in raw["volumes"], f"{name} mounts undeclared volume {source}"
        for key, value in _env(service).items():
            if value.startswith("/opt/solaris/"):
                assert (REPO / value.removeprefix("/opt/solaris/")).is_dir(), f"{name}: {key}={value}"
    airflow = _env(services["airflow-api-server"])
    assert REPO / airflow["AIRFLOW__CORE__DAGS_FOLDER"].removeprefix("/opt/solaris/") == DAGS_FOLDER
    assert REPO / airflow["AIRFLOW__CORE__PLUGINS_FOLDER"].removeprefix("/opt/solaris/") == PLUGINS_FOLDER


def test_services_agree_on_databases_and_broker(services: dict[str, dict[str, Any]]) -> None:
    init_sql = _mounts(services["postgres"])["/docker-entrypoint-initdb.d/10-databases.sql"]
    created = set(re.findall(r"CREATE DATABASE (\w+);", (REPO / init_sql).read_text()))
    postgres = _env(services["postgres"])
    credentials = f"{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}"
    airflow = {n: _env(s) for n, s in services.items() if "AIRFLOW__CORE__EXECUTOR" in _env(s)}
    assert set(airflow) >= {"airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-worker-gpu"}

    databases = {
        "airflow": {e["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] for e in airflow.values()},
        "mlflow": {_env(services["mlflow"])["SOLARIS_MLFLOW_TRACKING_URI"]},
        "store": {_env(s)["SOLARIS_STORE_URL"] for s in services.values() if "SOLARIS_STORE_URL" in _env(s)},
    }
    for role, urls in databases.items():
        assert len(urls) == 1, f"services disagree on the {role} database: {urls}"
    parsed = {role: _database_url(urls.pop()) for role, urls in databases.items()}
    for role, (host, user_password, database) in parsed.items():
        assert host == "postgres" and user_password == credentials, role
        assert database in created, f"the {role} database {database!r} is not created by {init_sql}"
    assert len({db for _, _, db in parsed.values()}) == 3, "Airflow, MLflow and the store need separate databases"

    for name, env in airflow.items():
        conn = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] == conn, name
        assert env["AIRFLOW__CELERY__RESULT_BACKEND"] == f"db+{conn}", name
    brokers = {e["AIRFLOW__CELERY__BROKER_URL"] for e in airflow.values()}
    assert len(brokers) == 1, brokers
    broker = urlsplit(brokers.pop())
    assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)
    assert broker.password == _env(services["redis"])["REDIS_PASSWORD"]
    assert len({e["AIRFLOW__API_AUTH__JWT_SECRET"] for e in airflow.values()}) == 1


def test_services_reach_each_other_where_they_listen(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        env = _env(service)
        for key in ("SOLARIS_MLFLOW_TRACKING_URI", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL"):
            url = urlsplit(env.get(key, ""))
            if url.scheme == "http":
                assert url.hostname in services and url.port == _port_of(services[url.hostname]), f"{name}: {key}"
        if "SOLARIS_DATA_DIR" in env and name != "airflow-worker-gpu":
            assert env["SOLARIS_DATA_DIR"] in _mounts(service), f"{name}: SOLARIS_DATA_DIR is not a mounted volume"


def test_no_disk_is_shared_for_models_or_staging(services: dict[str, dict[str, Any]]) -> None:
    """Model files only behind MLflow's server; staged tables in the bucket; the GPU worker mounts no data."""
    holders = {name for name, s in services.items() if "mlflow-artifacts" in _mounts(s).values()}
    assert holders == {"mlflow"}, f"only the MLflow server may mount the model files: {holders}"
    mlflow = services["mlflow"]
    assert _mounts(mlflow)[_env(mlflow)["SOLARIS_MLFLOW_ARTIFACTS_DIR"]] == "mlflow-artifacts"
    assert mlflow_server.ServerConfig.load().serve_artifacts, "the server must proxy artifacts (mlflow/server.toml)"
    assert set(_mounts(services["airflow-worker-gpu"]).values()) == {"airflow-logs"}

    airflow = {n: _env(s) for n, s in services.items() if "AIRFLOW__CORE__EXECUTOR" in _env(s)}
    (staging,) = {e["SOLARIS_STAGING_URL"] for e in airflow.values()}
    url = urlsplit(staging)
    endpoint = urlsplit("//" + parse_qs(url.query)["endpoint_override"][0])
    assert url.scheme == "s3" and endpoint.hostname in services, staging
    store = services[endpoint.hostname]
    assert _option(store["command"], "--address") == f":{endpoint.port}", "the staging URL names the store's port"
    (made,) = [argv for argv in _commands(services["minio-init"]) if argv[:2] == ["mc", "mb"]]
    assert made[-1] == f"local/{url.hostname}", "minio-init creates the staging bucket"
    keys = {(e["AWS_ACCESS_KEY_ID"], e["AWS_SECRET_ACCESS_KEY"]) for e in airflow.values()}
    store_env = _env(store)
    assert keys == {(store_env["MINIO_ROOT_USER"], store_env["MINIO_ROOT_PASSWORD"])}


def test_gpu_worker_consumes_the_gpu_queue_on_an_nvidia_device(services: dict[str, dict[str, Any]]) -> None:
    consumed = {}
    for name, service in services.items():
        for argv in _commands(service):
            if argv[:3] == ["airflow", "celery", "worker"]:
                consumed[name] = set(_option(argv, "--queues").split(","))
    assert consumed == {"airflow-worker": {"default"}, "airflow-worker-gpu": {"gpu"}}
    # The DAG places each step in its declared pool and queue of the same name (tests/dags/test_dag_files.py).
    pools = {step.pool for step in PRECOMPUTE.steps if step.pool}
    assert pools == {GPU_POOL} == {"gpu"}, "the precompute routes FM shards to the gpu queue and pool"
    (device,) = services["airflow-worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert re.search(r"/cu\d+$", services["airflow-worker-gpu"]["build"]["args"]["TORCH_INDEX_URL"]), "CUDA torch"
    (init,) = [argv for argv in _commands(services["airflow-init"]) if argv[1:3] == ["pools", "set"]]
    assert init[3] == GPU_POOL and int(init[4]) >= 1


def test_no_secret_in_the_compose_file(raw: dict[str, Any], example: dict[str, str]) -> None:
    referenced = set()
    for name, service in raw["services"].items():
        for key, value in (service.get("environment") or {}).items():
            value = str(value)
            referenced |= {m[1] for m in VAR.finditer(value)}
            if SECRET_KEY.search(key):
                assert VAR.fullmatch(value) and VAR.fullmatch(value)[2] is None, f"{name}: {key} must be ${{VAR}}"
            parts = urlsplit(value)
            if parts.password is not None:
                assert VAR.fullmatch(parts.password), f"{name}: {key} has a literal password"
    defaults = set()
    for value in _strings(raw):
        referenced |= {m[1] for m in VAR.finditer(value)}
        defaults |= {m[1] for m in VAR.finditer(value) if m[2] is not None}
    missing = referenced - set(example) - defaults
    assert not missing, f"variables without a default missing from .env.example: {sorted(missing)}"
    secrets = {k: v for k, v in example.items() if SECRET_KEY.search(k)}
    assert secrets and set(secrets.values()) == {"CHANGE-ME"}, ".env.example holds placeholders, not secrets"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=REPO)
    assert ignored.returncode == 0, ".env must be git-ignored"


def test_every_service_has_a_healthcheck_and_waits_on_health(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no" and "healthcheck" not in service
            continue
        assert service["healthcheck"]["test"], f"{name} has no healthcheck"
        for dependency, condition in (service.get("depends_on") or {}).items():
            expected = "service_completed_successfully" if dependency in ONE_SHOT else "service_healthy"
            assert condition["condition"] == expected, f"{name} -> {dependency}"
