"""The users and items of a synthetic world: hidden latents and traits, plus the side features a model sees.

Side features are deliberately only partly informative (correlated with the hidden latents through noise), so
that ids and history still carry signal beyond them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from solaris.data.schema import TS, side_feature_schema
from solaris.data.synthetic.config import WorldConfig

USER_FEATURES = ["u_country", "u_age_bucket", "u_device"]
ITEM_FEATURES = ["i_category", "i_advertiser", "i_price_bucket"]
ITEM_FLIGHT_STREAM = 1  # the random stream the items' flights are drawn from, apart from the world's own


def unit_rows(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@dataclass(frozen=True)
class Users:
    latent: np.ndarray  # (n, d) float32 unit rows: interests on day 0
    activity: np.ndarray  # (n,) expected requests per day once signed up
    signup_hour: np.ndarray  # (n,) hours after the start at which the user can first send requests
    trait: np.ndarray  # (n,) spending trait: sets how price moves conversion
    bias: np.ndarray  # (n,) the user's own click propensity (logit)
    table: pa.Table  # users.parquet: user_id, u_* side features, signup_ts


@dataclass(frozen=True)
class Items:
    latent: np.ndarray  # (n, d) float32 unit rows, clustered by category
    log_popularity: np.ndarray  # (n,) float32, Zipf-like, max 0
    category: np.ndarray  # (n,) int
    price_bucket: np.ndarray  # (n,) int
    bias: np.ndarray  # (n,) creative quality (logit)
    launch_day: np.ndarray  # (n,) int: the first day the item runs (negative: running before the span)
    end_day: np.ndarray  # (n,) int: the day after its last (past the span: still running at its end)
    table: pa.Table  # items.parquet: item_id, i_* side features, launch_ts, end_ts

    def live(self, day: int) -> np.ndarray:
        """Ids of the items running on ``day``, ascending."""
        return np.flatnonzero((self.launch_day <= day) & (day < self.end_day))


def _noisy_argmax(scores: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    return np.argmax(scores + noise * rng.gumbel(size=scores.shape), axis=1)


def _rank_buckets(z: np.ndarray, n_buckets: int) -> np.ndarray:
    """Equal-size buckets by rank, so every bucket is populated whatever the scale of ``z``."""
    ranks = np.empty(len(z), dtype=np.int64)
    ranks[np.argsort(z, kind="stable")] = np.arange(len(z))
    return ranks * n_buckets // len(z)


def make_users(c: WorldConfig, rng: np.random.Generator) -> Users:
    n, d = c.n_users, c.latent_dim
    latent = unit_rows(rng.standard_normal((n, d)))
    sd = c.activity_sd
    activity = c.requests_per_user_day * rng.lognormal(-sd * sd / 2, sd, n)
    is_new = rng.random(n) < c.new_user_share
    signup_hour = np.where(is_new, rng.integers(0, c.hours, n), 0)
    trait = rng.standard_normal(n)
    bias = rng.normal(0.0, c.truth.user_bias_sd, n)
    country = _noisy_argmax(latent @ rng.standard_normal((d, c.n_countries)), 1.0, rng)
    age = _rank_buckets(0.7 * trait + 0.7 * rng.standard_normal(n), c.n_age_buckets)
    device = _noisy_argmax(latent @ rng.standard_normal((d, c.n_devices)), 2.0, rng)
    start_us = int(c.start.timestamp()) * 1_000_000
    signup_us = start_us + signup_hour.astype(np.int64) * 3_600_000_000
    schema = side_feature_schema("user_id", USER_FEATURES).append(pa.field("signup_ts", TS, nullable=False))
    table = pa.table(
        [
            pa.array(np.arange(n, dtype=np.int64)),
            pa.array(country.astype(np.int32)),
            pa.array(age.astype(np.int32)),
            pa.array(device.astype(np.int32)),
            pa.array(signup_us).cast(TS),
        ],
        schema=schema,
    )
    return Users(latent, activity, signup_hour, trait, bias, table)


def make_items(c: WorldConfig, rng: np.random.Generator) -> Items:
    n, d = c.n_items, c.latent_dim
    category = rng.integers(0, c.n_categories, n)
    centroids = unit_rows(rng.standard_normal((c.n_categories, d)))
    latent = unit_rows(centroids[category] + 0.2 * rng.standard_normal((n, d)))
    rank = rng.permutation(n)
    log_popularity = (-c.popularity_exponent * np.log1p(rank)).astype(np.float32)
    category_price = rng.integers(0, c.n_price_buckets, c.n_categories)
    price_bucket = np.clip(category_price[category] + rng.integers(-1, 2, n), 0, c.n_price_buckets - 1)
    per_category = max(1, c.n_advertisers // c.n_categories)
    advertiser = (category * per_category + rng.integers(0, per_category, n)) % c.n_advertisers
    bias = rng.normal(0.0, c.truth.item_bias_sd, n)
    launch_day, end_day = item_flights(c)
    start_us = int(c.start.timestamp()) * 1_000_000
    flight_us = [start_us + day.astype(np.int64) * 24 * 3_600_000_000 for day in (launch_day, end_day)]
    schema = side_feature_schema("item_id", ITEM_FEATURES)
    schema = schema.append(pa.field("launch_ts", TS, nullable=False)).append(pa.field("end_ts", TS, nullable=False))
    table = pa.table(
        [
            pa.array(np.arange(n, dtype=np.int64)),
            pa.array(category.astype(np.int32)),
            pa.array(advertiser.astype(np.int32)),
            pa.array(price_bucket.astype(np.int32)),
            *(pa.array(us).cast(TS) for us in flight_us),
        ],
        schema=schema,
    )
    return Items(latent, log_popularity, category, price_bucket, bias, launch_day, end_day, table)


def item_flights(c: WorldConfig) -> tuple[np.ndarray, np.ndarray]:
    """(launch day, end day) per item. Drawn from a stream of their own, so a world without churn is the same
    draw as before churn existed. Launch days start ``life - 1`` days before the span, so about as many
    campaigns run on its first day as on any other."""
    n = c.n_items
    if c.item_life_days is None:
        return np.zeros(n, np.int64), np.full(n, c.days, np.int64)
    rng = np.random.default_rng((c.seed, ITEM_FLIGHT_STREAM))
    low, high = c.item_life_days
    life = rng.integers(low, high + 1, n)
    launch = np.floor(rng.random(n) * (c.days + life - 1)).astype(np.int64) - (life - 1)
    return launch, launch + life


def drift(latent: np.ndarray, step: float, rng: np.random.Generator) -> np.ndarray:
    """One day of interest drift: a random step of norm about ``step``, renormalised."""
    d = latent.shape[1]
    return unit_rows(latent + (step / np.sqrt(d)) * rng.standard_normal(latent.shape))
