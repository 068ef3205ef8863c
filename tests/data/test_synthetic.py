"""The synthetic world: determinism, internal consistency, and the behaviours the models are meant to find."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest

from solaris.cli import main
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.synthetic import PRESETS, generate_world, retrieval, simulate
from solaris.data.synthetic.population import make_items, make_users, unit_rows
from solaris.data.synthetic.stats import ITEM_CTR_PRIOR

TINY = PRESETS["tiny"]
DAY_US = 24 * 3_600_000_000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    return generate_world(TINY, tmp_path_factory.mktemp("a") / "world")


@pytest.fixture(scope="module")
def impressions(world: EventLog) -> pd.DataFrame:
    return world.impressions(world.start, world.end).to_pandas()


@pytest.fixture(scope="module")
def requests(world: EventLog) -> pd.DataFrame:
    return world.requests(world.start, world.end).to_pandas()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_identical_files(world: EventLog, tmp_path: Path) -> None:
    again = generate_world(TINY, tmp_path / "world")
    first, second = _files(world.root), _files(again.root)
    assert any(name.startswith("impressions/") for name in first)
    assert first.keys() == second.keys()
    assert all(first[name] == second[name] for name in first)


def test_other_seed_gives_other_world(world: EventLog, impressions: pd.DataFrame, tmp_path: Path) -> None:
    other = generate_world(TINY.with_seed(1), tmp_path / "world")
    theirs = other.impressions(other.start, other.end).to_pandas()
    assert len(theirs) != len(impressions) or not theirs.equals(impressions)
    assert not other.users().equals(world.users())


def test_counts_and_meta_match_the_files(world: EventLog, impressions: pd.DataFrame, requests: pd.DataFrame) -> None:
    meta = world.meta
    counts = meta["counts"]
    assert counts["requests"] == len(requests) and counts["impressions"] == len(impressions)
    assert counts["clicks"] == impressions.click.sum() and counts["conversions"] == impressions.conversion.sum()
    assert counts["users"] == world.users().num_rows == TINY.n_users
    assert counts["items"] == world.items().num_rows == TINY.n_items
    assert meta["source"] == "synthetic" and meta["seed"] == TINY.seed and meta["name"] == "world"
    assert meta["hours"] == len(world.hours()) == TINY.days * 24
    assert datetime.fromisoformat(meta["config"]["start"]) == world.start == TINY.start
    ts = impressions.ts.astype("int64") // 10**6
    assert world.start.timestamp() <= ts.min() and ts.max() < world.end.timestamp()
    assert len(impressions) == len(requests) * TINY.n_shown
    assert not (impressions.conversion > impressions.click).any()


def test_impressions_are_their_requests_top_candidates(impressions: pd.DataFrame, requests: pd.DataFrame) -> None:
    candidates = np.stack(requests.candidates.to_numpy())
    assert candidates.shape == (len(requests), TINY.n_candidates)
    assert (np.sort(candidates, axis=1)[:, 1:] != np.sort(candidates, axis=1)[:, :-1]).all()
    shown = impressions.sort_values(["request_id", "position"])
    by_request = shown.item_id.to_numpy().reshape(-1, TINY.n_shown)
    assert (shown.position.to_numpy().reshape(-1, TINY.n_shown) == np.arange(TINY.n_shown)).all()
    order = requests.request_id.to_numpy().argsort()
    assert (shown.request_id.to_numpy()[:: TINY.n_shown] == requests.request_id.to_numpy()[order]).all()
    assert (shown.user_id.to_numpy()[:: TINY.n_shown] == requests.user_id.to_numpy()[order]).all()
    assert (shown.ts.to_numpy()[:: TINY.n_shown] == requests.ts.to_numpy()[order]).all()
    assert (by_request[:, :, None] == candidates[order][:, None, :]).any(axis=2).all()


def test_ids_are_in_range(world: EventLog, impressions: pd.DataFrame, requests: pd.DataFrame) -> None:
    candidates = np.concatenate(requests.candidates.to_numpy())
    for ids, n in ((impressions.item_id, TINY.n_items), (candidates, TINY.n_items), (requests.user_id, TINY.n_users)):
        assert 0 <= ids.min() and ids.max() < n
    assert requests.request_id.is_unique and requests.request_id.min() >= 0
    for table in (world.users(), world.items()):
        for name in table.column_names[1:]:
            if name.startswith(("u_", "i_")):
                assert pc.min(table[name]).as_py() >= 0


def test_traffic_follows_the_day(requests: pd.DataFrame) -> None:
    hour_of_day = requests.ts.dt.hour
    assert (hour_of_day.between(13, 19)).sum() > 2 * (hour_of_day.between(1, 7)).sum()


def test_expected_requests_is_the_rate_the_log_was_drawn_from(world: EventLog, requests: pd.DataFrame) -> None:
    """The ground truth of when users come back (what ablations/demand_bound.py gives its oracle): a day's
    rates sum to the user's activity once signed up, nothing before signup, and the log's counts follow it."""
    users = make_users(TINY, np.random.default_rng(TINY.seed))
    hours = np.arange(TINY.hours)
    rate = simulate.expected_requests(TINY, users, hours)
    day = rate[24:48].sum(axis=0)
    early = users.signup_hour == 0
    np.testing.assert_allclose(day[early], users.activity[early], rtol=1e-9)
    assert (rate[hours[:, None] < users.signup_hour[None, :]] == 0).all()
    drawn = requests.groupby("user_id").size().reindex(np.arange(TINY.n_users), fill_value=0).to_numpy()
    assert np.corrcoef(drawn, rate.sum(axis=0))[0, 1] > 0.8
    assert drawn.sum() == pytest.approx(rate.sum(), rel=0.05)


def test_candidate_repeat_share_matches_the_requests(world: EventLog, requests: pd.DataFrame) -> None:
    """Recompute meta's share from the files: a candidate repeats if the same user had it in the 24 whole
    hours before the request's hour."""
    pairs = requests[["request_id", "user_id", "ts", "candidates"]].explode("candidates")
    pairs["hour"] = pairs.ts.astype("int64") // 3_600_000_000
    keys = ["user_id", "candidates"]
    hours = pairs[[*keys, "hour"]].drop_duplicates().sort_values([*keys, "hour"])
    hours["previous"] = hours.groupby(keys).hour.shift()
    pairs = pairs.merge(hours, on=[*keys, "hour"])
    repeated = (pairs.hour - pairs.previous) <= 24
    assert world.meta["candidate_repeat_share"] == pytest.approx(repeated.mean(), rel=1e-12)
    any_repeat = repeated.groupby(pairs.request_id).any()
    assert repeated.mean() > 0.3 and any_repeat.mean() > 0.5


def test_new_users_have_no_impressions_before_signup(world: EventLog, impressions: pd.DataFrame) -> None:
    users = world.users().to_pandas().set_index("user_id")
    start = pd.Timestamp(world.start)
    assert (users.signup_ts > start).mean() == pytest.approx(TINY.new_user_share, abs=0.08)
    signup = users.signup_ts.reindex(impressions.user_id).to_numpy()
    assert (impressions.ts.to_numpy() >= signup).all()
    late = users.index[users.signup_ts > start + pd.Timedelta(hours=12)]
    assert impressions.user_id.isin(late).any()


def test_repeated_exposure_lowers_ctr(impressions: pd.DataFrame) -> None:
    """Fatigue, read back from the data: within (user, item) pairs shown 3+ times in 24 h, clicks at the
    3rd+ exposure are rarer than at the first (comparing within pairs removes the policy's selection)."""
    df = impressions.sort_values(["user_id", "item_id", "ts"])
    key = df.user_id.to_numpy() * TINY.n_items + df.item_id.to_numpy()
    t = df.ts.astype("int64").to_numpy()
    stamp = key.astype(np.float64) * 1e18 + t  # sorted by (key, t); float is exact at these sizes
    assert (np.diff(stamp) >= 0).all()
    prior = np.searchsorted(stamp, stamp, "left") - np.searchsorted(stamp, stamp - DAY_US + 1, "left")
    df["prior"] = prior
    fatigued_pairs = df.groupby(["user_id", "item_id"]).prior.transform("max") >= 2
    df = df[fatigued_pairs]
    first, third_on = df[df.prior == 0].click.mean(), df[df.prior >= 2].click.mean()
    assert third_on < 0.85 * first


def test_rates_are_in_the_target_band(impressions: pd.DataFrame) -> None:
    ctr = impressions.click.mean()
    assert 0.04 <= ctr <= 0.08
    assert 0.10 <= impressions.conversion.sum() / impressions.click.sum() <= 0.20


def test_ne_headroom_is_reported_and_consistent(world: EventLog, impressions: pd.DataFrame) -> None:
    ne = world.meta["ne"]
    base = impressions.click.mean()
    per_item = impressions.groupby("item_id").click.agg(["sum", "size"])
    p = (per_item["sum"] + ITEM_CTR_PRIOR * base) / (per_item["size"] + ITEM_CTR_PRIOR)
    log_loss = -(per_item["sum"] * np.log(p) + (per_item["size"] - per_item["sum"]) * np.log1p(-p)).sum()
    entropy = -(base * np.log(base) + (1 - base) * np.log1p(-base))
    assert ne["item_ctr"] == pytest.approx(log_loss / len(impressions) / entropy, rel=1e-9)
    assert ne["constant"] == 1.0
    assert ne["oracle"] < ne["item_ctr"] - 0.05 < 1.0
    # history (fatigue, momentum) carries signal that no history-free model can reach
    assert ne["oracle"] < ne["oracle_without_history"] - 0.03 < ne["item_ctr"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"n_users": -5}, "n_users=-5"),
        ({"n_items": 0}, "n_items=0"),
        ({"days": 1.5}, "days=1.5"),
        ({"n_shown": 31}, "n_shown=31 exceeds n_candidates=30"),
        ({"n_candidates": 101}, "n_candidates=101 exceeds pool_size=100"),
        ({"pool_size": 201}, "pool_size=201 exceeds n_items=200"),
        ({"requests_per_user_day": 0.0}, "requests_per_user_day=0.0"),
        ({"new_user_share": 1.0}, "new_user_share=1.0"),
        ({"item_life_days": (0, 3)}, "item_life_days=\\(0, 3\\)"),
        ({"item_life_days": (4, 2)}, "item_life_days=\\(4, 2\\)"),
        ({"item_life_days": (1.5, 2)}, "item_life_days=\\(1.5, 2\\)"),
        ({"start": datetime(2026, 1, 5)}, "start="),
        ({"seed": -1}, "seed=-1"),
        ({"size": 3}, "no field"),
    ],
)
def test_bad_config_names_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TINY.with_overrides(**changes)


def test_existing_world_is_kept_without_overwrite(world: EventLog) -> None:
    before = _files(world.root)
    with pytest.raises(FileExistsError, match="overwrite"):
        generate_world(TINY.with_seed(5), world.root)
    assert _files(world.root) == before


def test_cli_generates_with_size_overrides(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["data", "generate", "--preset", "tiny", "--name", "w", "--users", "120", "--days", "1"]
    assert main([*argv, "--start", "2026-03-01T06:00Z"]) == 0
    log = EventLog(settings.world_dir("w"))
    assert log.meta["counts"]["users"] == 120 and log.meta["hours"] == 24
    assert log.start.isoformat() == "2026-03-01T06:00:00+00:00"
    assert '"impressions"' in capsys.readouterr().out
    assert main([*argv, "--shown", "40", "--overwrite"]) == 2
    assert "n_shown=40 exceeds n_candidates=30" in capsys.readouterr().err


def _pools(n_items: int, n_categories: int, pool_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Daily pools of noise-free queries, the exhaustive ranking, and the items' categories."""
    config = PRESETS["default"].with_overrides(n_items=n_items, n_categories=n_categories, pool_size=pool_size)
    rng = np.random.default_rng(3)
    users = unit_rows(rng.standard_normal((300, config.latent_dim)))
    items = make_items(config, rng)
    weight = config.retrieval_popularity
    pools = retrieval.daily_pools(
        users, items.latent, items.category, items.log_popularity, pool_size, 0.0, weight, rng
    )
    exact = np.argsort(-(users @ items.latent.T + weight * items.log_popularity), axis=1, kind="stable")
    return pools, exact[:, :pool_size], items.category


def test_daily_pools_are_exact_when_every_category_is_probed() -> None:
    pools, exact, _ = _pools(n_items=400, n_categories=3, pool_size=30)
    assert (pools == exact).all()


def test_daily_pools_probe_nearby_categories_with_high_recall() -> None:
    pools, exact, category = _pools(n_items=4000, n_categories=20, pool_size=100)
    n_probe = retrieval.probe_count(np.bincount(category).tolist(), 100)
    assert n_probe < 20
    assert all(len(np.unique(category[row])) <= n_probe and len(np.unique(row)) == 100 for row in pools)
    recall = np.mean([len(np.intersect1d(got, best)) / 100 for got, best in zip(pools, exact)])
    assert recall > 0.8


def test_slot_sources_follow_items_between_pools() -> None:
    rng = np.random.default_rng(4)
    old = np.stack([rng.permutation(60)[:20] for _ in range(30)]).astype(np.int32)
    old[:5] = 60  # never computed: the sentinel matches nothing
    new = np.stack([rng.permutation(60)[:20] for _ in range(30)]).astype(np.int32)
    source = retrieval.slot_sources(old, new)
    for row in range(30):
        where_old = {int(item): slot for slot, item in enumerate(old[row]) if item < 60}
        assert source[row].tolist() == [where_old.get(int(item), -1) for item in new[row]]
    assert (source[:5] == -1).all() and (source[5:] >= 0).any()


def test_sparse_world_with_empty_hours(tmp_path: Path) -> None:
    config = TINY.with_overrides(n_users=40, requests_per_user_day=0.2, new_user_share=0.9)
    log = generate_world(config, tmp_path / "sparse")
    requests = log.requests(log.start, log.end)
    assert 0 < requests.num_rows == log.meta["counts"]["requests"]
    assert len(set(requests["ts"].to_pandas().dt.floor("h"))) < config.hours


def test_failure_mid_generation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hour = simulate.Simulator._hour

    def failing(self: simulate.Simulator, index: int, counts: np.ndarray) -> simulate.HourBatch:
        if index == 30:
            raise OSError("disk full")
        return hour(self, index, counts)

    monkeypatch.setattr(simulate.Simulator, "_hour", failing)
    with pytest.raises(OSError, match="disk full"):
        generate_world(TINY, tmp_path / "world")
    assert list(tmp_path.iterdir()) == []


CHURN = TINY.with_overrides(n_items=600, item_life_days=(1, 2))


def test_churned_items_are_candidates_only_while_they_run(tmp_path: Path) -> None:
    log = generate_world(CHURN, tmp_path / "churn")
    items = log.items().to_pandas().set_index("item_id")
    life_days = (items.end_ts - items.launch_ts) / pd.Timedelta(days=1)
    assert life_days.between(1, 2).all() and set(life_days) == {1, 2}
    requests = log.requests(log.start, log.end).to_pandas()
    candidate = requests.explode("candidates").astype({"candidates": "int64"})
    launch = items.launch_ts.reindex(candidate.candidates).to_numpy()
    end = items.end_ts.reindex(candidate.candidates).to_numpy()
    ts = candidate.ts.to_numpy()
    assert ((launch <= ts) & (ts < end)).all()
    launched_later = items.index[items.launch_ts > pd.Timestamp(log.start)]
    shown = log.impressions(log.start, log.end).to_pandas()
    assert shown.item_id.isin(launched_later).mean() > 0.2  # the churn reaches what is shown


def test_churn_leaves_the_rest_of_the_world_as_drawn(world: EventLog, tmp_path: Path) -> None:
    """Flights come from their own random stream: the items' side features are those of the same seed without churn."""
    churned = generate_world(TINY.with_overrides(n_items=TINY.n_items, item_life_days=(3, 3)), tmp_path / "w")
    features = [name for name in world.items().column_names if name.startswith("i_")]
    assert churned.items().select(features).equals(world.items().select(features))
    items = world.items().to_pandas()
    assert (items.launch_ts == pd.Timestamp(world.start)).all() and (items.end_ts == pd.Timestamp(world.end)).all()


def test_churn_too_thin_for_the_pool_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fewer than pool_size=100; raise n_items or item_life_days"):
        generate_world(TINY.with_overrides(item_life_days=(1, 1)), tmp_path / "thin")
    assert not (tmp_path / "thin").exists()
