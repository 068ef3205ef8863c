from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from solaris.precompute.staging import Staging

RUN = "scheduled__2026-11-30T01:00:00+00:00"


def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "user_id": range(n),
            "item_id": range(100, 100 + n),
            "source": pd.Categorical(["recent", "popular"] * (n // 2), categories=["recent", "popular"]),
        }
    )


def test_round_trip_returns_small_json_metadata(tmp_path: Path) -> None:
    staging = Staging(tmp_path, RUN)
    meta = staging.write("candidates", frame(6))
    assert json.loads(json.dumps(meta)) == meta  # fit for XCom
    assert meta["rows"] == 6 and meta["table"] == "candidates" and meta["run"] == RUN
    assert Path(meta["path"]).is_file() and Path(meta["path"]).is_relative_to(tmp_path.resolve())
    back = staging.read("candidates").to_pandas()
    pd.testing.assert_frame_equal(back, frame(6))
    assert staging.read("candidates", columns=["item_id"]).column_names == ["item_id"]


def test_rerun_with_the_same_key_overwrites_in_place(tmp_path: Path) -> None:
    first = Staging(tmp_path, RUN).write("scores", pa.table({"x": [1, 2, 3]}))
    second = Staging(tmp_path, RUN).write("scores", pa.table({"x": [7]}))
    assert first["path"] == second["path"]
    assert Staging(tmp_path, RUN).read("scores").to_pydict() == {"x": [7]}
    assert [p.name for p in Path(Staging(tmp_path, RUN).path).iterdir()] == ["scores.parquet"]  # no temp files left


def test_keys_that_differ_only_in_unsafe_characters_stay_apart(tmp_path: Path) -> None:
    a, b = Staging(tmp_path, "run:1"), Staging(tmp_path, "run+1")
    assert a.path != b.path and Path(a.path).parent == Path(b.path).parent == tmp_path.resolve()
    assert ":" not in Path(a.path).name and "+" not in Path(b.path).name


def test_cleanup_removes_the_run_and_nothing_else(tmp_path: Path) -> None:
    done, other = Staging(tmp_path, RUN), Staging(tmp_path, "manual__other")
    done.write("candidates", frame(2))
    other.write("candidates", frame(2))
    done.cleanup()
    assert not done.exists() and list(tmp_path.iterdir()) == [Path(other.path)]
    done.cleanup()  # a retried cleanup is a no-op
    with pytest.raises(FileNotFoundError, match="'candidates' of run"):
        done.read("candidates")


def test_bad_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dag_run_key is empty"):
        Staging(tmp_path, "")
    with pytest.raises(ValueError, match="table name '../x' is invalid"):
        Staging(tmp_path, RUN).write("../x", frame(2))


def test_an_object_store_url_stages_across_processes(s3_url: str, tmp_path: Path) -> None:
    """What a Celery worker on another host does: it finds the table by the run key and the URL alone."""
    written = Staging(s3_url, RUN).write("candidates", frame(6))
    assert written["path"].startswith("staging/runs/") and written["rows"] == 6
    reader = f"""
import sys
from solaris.precompute.staging import Staging
print(Staging(sys.argv[1], {RUN!r}).read("candidates").num_rows)
"""
    other = subprocess.run([sys.executable, "-c", reader, s3_url], capture_output=True, text=True, cwd=tmp_path)
    assert other.returncode == 0 and other.stdout.strip() == "6", other.stderr
    assert not list(tmp_path.iterdir()), "nothing staged on the local disk"

    rerun = Staging(s3_url, RUN)
    rerun.write("candidates", frame(2))
    pd.testing.assert_frame_equal(rerun.read("candidates").to_pandas(), frame(2))
    rerun.cleanup()
    assert not rerun.exists()
    with pytest.raises(FileNotFoundError, match="'candidates' of run"):
        rerun.read("candidates")
    rerun.cleanup()


def test_a_location_pyarrow_cannot_open_is_named() -> None:
    with pytest.raises(ValueError, match="staging location 'ftp://host/x' cannot be opened"):
        Staging("ftp://host/x", RUN)
