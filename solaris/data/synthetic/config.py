"""What a synthetic world is made of: sizes, behaviour knobs and the ground-truth click model, with presets.

A config plus its seed fully determines the generated tables, so the whole config is stored in meta.json and
every field is validated up front: a bad value fails before any file is written, naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

START = datetime(2026, 1, 5, tzinfo=UTC)


@dataclass(frozen=True)
class GroundTruth:
    """Coefficients of the true click and conversion probabilities (logit scale).

    History terms (fatigue, momentum) and the drifting interests are what a sequence-aware model can learn and
    an id-embedding model cannot; the position term is the logging bias every ranker sees.
    """

    # The intercept is solved per world so that history-free clicks on its first day hit this rate (truth.py);
    # fatigue and momentum then move the realised rate a little.
    target_ctr: float = 0.065
    affinity_hinge: float = 5.0  # weight of relu(u.v - hinge_at): only a real match lifts the click rate
    hinge_at: float = 0.15
    affinity_product: float = 10.0  # weight of (u_a.v_a)(u_b.v_b): both halves of the interest must agree
    fatigue: float = 0.8  # logit lost per recent (decayed) exposure to the same item
    fatigue_tau_hours: float = 24.0
    momentum: float = 1.2  # logit gained per log1p(recent decayed clicks in the item's category)
    momentum_tau_hours: float = 12.0
    time_of_day: float = 0.5  # amplitude of each category's hour-of-day cycle
    position: float = 0.4  # logit lost per log2(1 + position)
    user_bias_sd: float = 0.4
    item_bias_sd: float = 0.4
    conversion_logit: float = -1.8
    conversion_price_trait: float = 1.0  # price bucket x the user's spending trait
    conversion_price: float = -0.3


@dataclass(frozen=True)
class WorldConfig:
    """Sizes and behaviour of one synthetic ads world; ``seed`` picks one draw of it."""

    name: str
    n_users: int
    n_items: int
    days: int
    requests_per_user_day: float
    n_advertisers: int
    seed: int = 0
    start: datetime = START
    n_candidates: int = 30
    n_shown: int = 8
    pool_size: int = 100
    latent_dim: int = 16
    drift: float = 0.25  # norm of the daily random step of a user's interests
    diurnal_amplitude: float = 0.6  # hourly traffic is 1 + a * cos(day phase), peaking at 16:00 UTC
    new_user_share: float = 0.3  # users who sign up at a uniform hour of the span instead of at its start
    # Ad churn: each item runs a whole number of days drawn uniformly from [low, high], starting at a uniform
    # day boundary (campaigns already running at the start included); None: every item runs the whole span.
    item_life_days: tuple[int, int] | None = None
    activity_sd: float = 0.8  # sigma of the lognormal per-user request rate
    retrieval_noise: float = 0.7  # norm of the daily noise on the retrieval query
    retrieval_popularity: float = 0.05  # weight of log-popularity in the retrieval score
    candidate_rank_decay: float = 2.0  # how strongly requests favour the top of the daily pool
    policy_noise: float = 0.15  # Gumbel scale of the logging policy's ranking noise
    popularity_exponent: float = 1.0  # Zipf exponent of item popularity
    n_categories: int = 20
    n_price_buckets: int = 5
    n_countries: int = 8
    n_age_buckets: int = 6
    n_devices: int = 3
    truth: GroundTruth = field(default_factory=GroundTruth)
    # Write the traffic as the plain log a team most often exports and import it (solaris.data.plain): string
    # ids mapped to dense ones, one request per user-hour, no side features, no conversions.
    plain: bool = False

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def hours(self) -> int:
        return self.days * 24

    def with_seed(self, seed: int) -> WorldConfig:
        return replace(self, seed=seed)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> WorldConfig:
        """The config meta.json holds (``asdict`` with ``start`` as ISO 8601), validated like any config: what
        continues a world (:mod:`solaris.live.traffic`) must draw exactly what generated it."""
        try:
            truth = GroundTruth(**values["truth"])
            life = values.get("item_life_days")
            return cls(
                **{
                    **values,
                    "start": datetime.fromisoformat(values["start"]),
                    "truth": truth,
                    "item_life_days": None if life is None else tuple(life),
                }
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a world config: {exc}") from None

    def with_overrides(self, **changes: object) -> WorldConfig:
        """A copy with some fields changed (``None`` values are ignored), validated like any config."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ValueError(f"world config has no field(s) {', '.join(unknown)}")
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


_POSITIVE_INTS = (
    "n_users",
    "n_items",
    "days",
    "n_advertisers",
    "n_candidates",
    "n_shown",
    "pool_size",
    "latent_dim",
    "n_categories",
    "n_price_buckets",
    "n_countries",
    "n_age_buckets",
    "n_devices",
)
_NON_NEGATIVE = (
    "drift",
    "activity_sd",
    "retrieval_noise",
    "retrieval_popularity",
    "candidate_rank_decay",
    "policy_noise",
    "popularity_exponent",
)


def _validate(c: WorldConfig) -> None:
    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"world config {c.name!r}: {name}={getattr(c, name)!r} {why}")

    for name in _POSITIVE_INTS:
        value = getattr(c, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise bad(name, "must be a positive integer")
    if isinstance(c.seed, bool) or not isinstance(c.seed, int) or c.seed < 0:
        raise bad("seed", "must be a non-negative integer")
    for name in _NON_NEGATIVE:
        if not getattr(c, name) >= 0:
            raise bad(name, "must be >= 0")
    if not c.requests_per_user_day > 0:
        raise bad("requests_per_user_day", "must be > 0")
    if not 0 <= c.diurnal_amplitude <= 1:
        raise bad("diurnal_amplitude", "must be in [0, 1]")
    if not 0 <= c.new_user_share < 1:
        raise bad("new_user_share", "must be in [0, 1)")
    if c.item_life_days is not None:
        life = c.item_life_days
        if (
            len(life) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) for v in life)
            or not 1 <= life[0] <= life[1]
        ):
            raise bad("item_life_days", "must be None or two whole numbers of days, 1 <= low <= high")
    if not isinstance(c.plain, bool):
        raise bad("plain", "must be True or False")
    if c.latent_dim < 2 or c.latent_dim % 2:
        raise bad("latent_dim", "must be even and >= 2 (the click model splits it in halves)")
    for small, big in (("n_shown", "n_candidates"), ("n_candidates", "pool_size"), ("pool_size", "n_items")):
        if getattr(c, small) > getattr(c, big):
            raise bad(small, f"exceeds {big}={getattr(c, big)}")
    if c.start.tzinfo is None or c.start.utcoffset().total_seconds() != 0:
        raise bad("start", "must be a UTC-aware datetime")
    if (c.start.minute, c.start.second, c.start.microsecond) != (0, 0, 0):
        raise bad("start", "must fall on a whole hour")
    if c.truth.fatigue_tau_hours <= 0 or c.truth.momentum_tau_hours <= 0:
        raise ValueError(f"world config {c.name!r}: truth time constants must be > 0")
    if not 0 < c.truth.target_ctr < 1:
        raise ValueError(f"world config {c.name!r}: truth.target_ctr={c.truth.target_ctr!r} must be in (0, 1)")


# the README main job: an FM trains on it within minutes on 2 CPU cores
_DEFAULT = WorldConfig("default", n_users=3500, n_items=1200, days=5, requests_per_user_day=2.5, n_advertisers=120)

PRESETS: dict[str, WorldConfig] = {
    # fast tests and the CI replay: ~70k impressions in about a second; the smallest world on which an FM
    # trained on its first 36 hours still beats a base VM refreshed on the next 22 (2 days / 450 users did not)
    "tiny": WorldConfig("tiny", n_users=600, n_items=200, days=3, requests_per_user_day=6.0, n_advertisers=20),
    "default": _DEFAULT,
    # the default world's traffic over ads that run 2-8 days, most of them launched after the first day: what
    # a model knows of an item must carry over from its side features and its first viewers, not its id row
    "churn": WorldConfig(
        "churn",
        n_users=3500,
        n_items=2400,
        days=5,
        requests_per_user_day=2.5,
        n_advertisers=120,
        item_life_days=(2, 8),
    ),
    # the default world's traffic as a team's first log: user, item, timestamp and label, ids as text
    "plain": replace(_DEFAULT, name="plain", plain=True),
    # scale: >= 10M impressions
    "large": WorldConfig(
        "large", n_users=100_000, n_items=20_000, days=14, requests_per_user_day=1.2, n_advertisers=1500
    ),
}


def preset(name: str) -> WorldConfig:
    """A preset by name; an unknown name is an error listing the known ones."""
    if name not in PRESETS:
        raise ValueError(f"--preset {name!r}: choose one of {', '.join(PRESETS)}")
    return PRESETS[name]
