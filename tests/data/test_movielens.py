"""MovieLens-100K from the RecBole wheel (downloaded once per test session): counts, clicks, features, reads."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import zipfile
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from source_ids import source_frame

from solaris.cli import main
from solaris.config import Settings
from solaris.data import movielens
from solaris.data.eventlog import EventLog
from solaris.data.idmap import IdMaps
from solaris.data.movielens import MEMBER_DIR, WHEEL_NAME, MovieLensUnavailable, fetch_wheel, import_movielens_100k


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fetch_wheel(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="session")
def raw(wheel: Path) -> dict[str, pd.DataFrame]:
    """The wheel's own files, read independently of the importer, to check the import against."""
    with zipfile.ZipFile(wheel) as zf:
        return {
            kind: pd.read_csv(io.BytesIO(zf.read(f"{MEMBER_DIR}ml-100k.{kind}")), sep="\t", quoting=3)
            for kind in ("inter", "user", "item")
        }


def _no_download(*args: object, **kwargs: object) -> None:
    pytest.fail("pip was run although the wheel was cached")


@pytest.fixture(scope="session")
def log(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    """Imported once, through the CLI, from the wheel cache under SOLARIS_DATA_DIR (a download would fail)."""
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("SOLARIS_") and k != "SOLARIS_TEST_PG_URL"]:
            patch.delenv(key)
        patch.setenv("SOLARIS_HOME", str(tmp_path_factory.mktemp("home")))
        settings = Settings.from_env()
        cache = settings.data_dir / "cache" / "wheels"
        cache.mkdir(parents=True)
        shutil.copy(wheel, cache / WHEEL_NAME)
        patch.setattr(movielens.subprocess, "run", _no_download)
        assert main(["data", "import", "movielens-100k", "--name", "ml"]) == 0
        return EventLog(settings.world_dir("ml"))


def test_counts_and_clicks_match_the_raw_ratings(log: EventLog, raw: dict[str, pd.DataFrame]) -> None:
    ratings = raw["inter"]
    counts = log.meta["counts"]
    assert (counts["impressions"], counts["users"], counts["items"]) == (100_000, 943, 1_682)
    assert counts["clicks"] == int((ratings["rating:float"] >= 4).sum())
    assert log.meta["source"] == "movielens-100k"
    impressions = log.impressions(log.start, log.end).to_pandas()
    assert len(impressions) == len(ratings)
    assert impressions.user_id.nunique() == ratings["user_id:token"].nunique()
    ids = IdMaps.read(log.root)  # the same mapping as any import: dense ids, the map beside the log
    assert (len(ids.user), len(ids.item)) == (943, 1_682)
    assert (impressions.user_id.max(), impressions.item_id.max()) == (942, 1_681)


def test_requests_are_user_hours(log: EventLog) -> None:
    requests = log.requests(log.start, log.end).to_pandas()
    hour = requests.ts.dt.floor("h")
    assert not pd.DataFrame({"hour": hour, "user": requests.user_id}).duplicated().any()
    assert requests.candidates.map(len).sum() == 100_000


def test_side_features_are_coded(log: EventLog, raw: dict[str, pd.DataFrame]) -> None:
    users = log.users().to_pandas()
    assert users.columns.tolist() == ["user_id", "u_age", "u_gender", "u_occupation"]
    female = log.meta["vocabularies"]["u_gender"].index("F") + 1
    assert (users.u_gender == female).sum() == (raw["user"]["gender:token"] == "F").sum()
    assert users.u_occupation.nunique() == raw["user"]["occupation:token"].nunique()
    items = log.items().to_pandas()
    assert items.columns.tolist() == ["item_id", "i_genre", "i_decade"]
    unknown_genre = raw["item"]["class:token_seq"].str.startswith("unknown")
    unknown_year = pd.to_numeric(raw["item"]["release_year:token"], errors="coerce").isna()
    assert ((items.i_genre == 0).sum(), (items.i_decade == 0).sum()) == (unknown_genre.sum(), unknown_year.sum())
    assert items.i_genre.max() == len(log.meta["vocabularies"]["i_genre"])


def test_time_range_read_returns_only_the_hours_asked(log: EventLog, raw: dict[str, pd.DataFrame]) -> None:
    start = log.start + timedelta(hours=log.meta["hours"] // 2)
    end = start + timedelta(hours=24)
    window = log.impressions(start, end).to_pandas()
    seconds = raw["inter"]["timestamp:float"]
    expected = ((seconds >= start.timestamp()) & (seconds < end.timestamp())).sum()
    assert len(window) == expected > 0
    assert window.ts.min() >= start and window.ts.max() < end


def test_cli_refuses_a_mapping_for_movielens(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "import", "movielens-100k", "--name", "ml", "--label", "x", "--user", "u"]) == 2
    assert "fixed column mapping; drop --user, --label" in capsys.readouterr().err
    assert not settings.world_dir("ml").exists()


def test_failed_download_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failed = subprocess.CompletedProcess([], 1, stdout="", stderr="ERROR: network unreachable")
    monkeypatch.setattr(movielens.subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(MovieLensUnavailable, match="could not download recbole==1.2.1.*network unreachable.*--wheel"):
        import_movielens_100k(tmp_path / "log", cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
    assert not (tmp_path / "log").exists()


def test_wrong_wheel_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / WHEEL_NAME
    fake.write_bytes(b"not the wheel")
    with pytest.raises(MovieLensUnavailable, match="SHA-256 .* is not that of"):
        import_movielens_100k(tmp_path / "log", cache_dir=tmp_path, wheel=fake)
    assert not (tmp_path / "log").exists()


def test_time_scale_24_makes_each_hour_a_day_of_ratings(
    wheel: Path, log: EventLog, raw: dict[str, pd.DataFrame], tmp_path: Path
) -> None:
    """The replay's MovieLens log: 7 months in 215 hours, each request a user's ratings within one day."""
    scaled = import_movielens_100k(tmp_path / "ml24", cache_dir=tmp_path, wheel=wheel, time_scale=24)
    assert (scaled.meta["hours"], scaled.meta["counts"]["impressions"]) == (215, log.meta["counts"]["impressions"])
    assert scaled.meta["counts"]["requests"] < log.meta["counts"]["requests"]  # user-hours join into user-days
    ratings = raw["inter"].rename(columns={"user_id:token": "user_id", "item_id:token": "item_id"})
    shown = source_frame(scaled, scaled.impressions(scaled.start, scaled.end)).merge(ratings, on=["user_id", "item_id"])
    assert len(shown) == len(ratings)
    source_span = shown.groupby("request_id")["timestamp:float"].agg(lambda s: s.max() - s.min())
    assert 0 < source_span.max() < 24 * 3600
    in_order = shown.sort_values(["request_id", "position"]).groupby("request_id")["timestamp:float"]
    assert in_order.apply(lambda s: s.is_monotonic_increasing).all()  # positions follow the source's times
