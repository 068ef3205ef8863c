from pathlib import Path

import pytest

from solaris.config import ConfigError, Settings


def test_defaults_need_no_setup(tmp_path: Path) -> None:
    s = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    assert s.data_dir == tmp_path / "var"
    assert s.store_url == f"sqlite:///{tmp_path / 'var' / 'feature_store.db'}"
    assert s.mlflow_tracking_uri == f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    assert s.mlflow_artifacts_dir == tmp_path / "mlflow" / "artifacts"
    assert s.airflow_home == tmp_path / "var" / "airflow"
    assert s.world_dir() == tmp_path / "var" / "worlds" / "default"
    assert s.staging_url is None and s.staging_root == str(tmp_path / "var" / "staging")
    assert s.with_overrides(data_dir=tmp_path / "elsewhere").staging_root == str(tmp_path / "elsewhere" / "staging")


@pytest.mark.parametrize(
    ("raw", "root"),
    [("s3://bucket/runs?endpoint_override=minio:9000&scheme=http", None), ("stage", "{home}/stage"), ("/s", "/s")],
)
def test_staging_url_keeps_a_url_and_resolves_a_folder_against_home(tmp_path: Path, raw: str, root: str | None) -> None:
    s = Settings.from_env({"SOLARIS_HOME": str(tmp_path), "SOLARIS_STAGING_URL": raw})
    assert s.staging_root == (root or raw).format(home=tmp_path)
    assert Settings.from_env(s.as_env()) == s


def test_env_overrides_and_round_trip(tmp_path: Path) -> None:
    env = {
        "SOLARIS_HOME": str(tmp_path),
        "SOLARIS_DATA_DIR": "/data/solaris",
        "SOLARIS_STORE_URL": "postgresql+psycopg://postgres@db/fs",
        "SOLARIS_DEVICE": "cpu",
        "SOLARIS_WORLD": "ml100k",
    }
    s = Settings.from_env(env)
    assert s.data_dir == Path("/data/solaris")
    assert s.device == "cpu"
    assert Settings.from_env(s.as_env()) == s


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("SOLARIS_DEVICE", "tpu", "SOLARIS_DEVICE='tpu'"),
        ("SOLARIS_STORE_URL", "mysql://x", "SOLARIS_STORE_URL='mysql://x'"),
        ("SOLARIS_WORLD", "../etc", "SOLARIS_WORLD='../etc'"),
    ],
)
def test_bad_values_name_the_variable(tmp_path: Path, key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Settings.from_env({"SOLARIS_HOME": str(tmp_path), key: value})
