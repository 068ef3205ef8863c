"""The pipeline declaration refuses an order or data flow that cannot run, and each step's staging view
holds it to the tables it declares."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from solaris.precompute.pipeline import (
    CODES,
    CUT,
    EXPOSURE_PAIRS,
    EXPOSURE_USERS,
    HISTORY,
    HOUR_COUNTS,
    ITEM_LISTINGS,
    KNN_INDEX,
    NEIGHBOUR_ROWS,
    POOL,
    PRECOMPUTE,
    REQUEST_STATS,
    REQUESTED_LABELS,
    SCORED,
    SELECTED,
    SHADOW,
    SHADOW_CODES,
    SHADOW_KNN_INDEX,
    SHADOW_NEIGHBOUR_ROWS,
    SHADOW_USER_AGGREGATES,
    SHADOW_USER_VECTORS,
    USER_AGGREGATES,
    USER_SHARDS,
    USER_VECTORS,
    Pipeline,
    Step,
)
from solaris.precompute.spec import shard_of
from solaris.precompute.staging import Staging, StepStaging


def test_the_declared_pipeline_reads_only_what_an_earlier_step_wrote() -> None:
    assert PRECOMPUTE.names[0] == "hour_counts" and PRECOMPUTE.step("embed_shard").per_shard
    assert [s.name for s in PRECOMPUTE.steps if s.pool] == ["embed_shard", "shadow_embed_shard"]
    assert [s.name for s in PRECOMPUTE.steps if s.mapped_over == USER_SHARDS] == [
        "hour_counts",
        "candidates",
        "count_exposures",
        "score",
        "select",
        "mean_codes",
        "user_vectors",
        "knn_search",
        "shadow_mean_codes",
        "shadow_user_vectors",
        "shadow_knn_search",
    ]
    writers = {t: s.name for s in PRECOMPUTE.steps for t in s.writes}
    assert writers == {
        HOUR_COUNTS: "hour_counts",
        REQUESTED_LABELS: "hour_counts",
        EXPOSURE_USERS: "count_exposures",
        EXPOSURE_PAIRS: "count_exposures",
        REQUEST_STATS: "count_requests",
        POOL: "candidates",
        ITEM_LISTINGS: "count_requests",
        SCORED: "score",
        CUT: "cut",
        SELECTED: "select",
        HISTORY: "select",
        CODES: "embed_shard",
        USER_VECTORS: "user_vectors",
        USER_AGGREGATES: "mean_codes",
        KNN_INDEX: "knn_index",
        NEIGHBOUR_ROWS: "knn_search",
        SHADOW_CODES: "shadow_embed_shard",
        SHADOW_USER_AGGREGATES: "shadow_mean_codes",
        SHADOW_KNN_INDEX: "shadow_knn_index",
        SHADOW_NEIGHBOUR_ROWS: "shadow_knn_search",
        SHADOW_USER_VECTORS: "shadow_user_vectors",
    }


def test_every_shadow_step_mirrors_a_champion_step_and_writes_after_it() -> None:
    """The shadow chain's steps read the champion's selection and write their own tables, each after every
    champion writer (the store's writers run one at a time) and before ``expire``."""
    shadow_steps = [s for s in PRECOMPUTE.steps if s.name.startswith(SHADOW) and s.name != "shadow_gate"]
    for step in shadow_steps:
        if step.name == "shadow_coverage":
            continue
        mirror = PRECOMPUTE.step(step.name.removeprefix(SHADOW))
        assert step.per_shard == mirror.per_shard
        assert step.writes == tuple(t.shadow() for t in mirror.writes)
        assert set(step.reads) <= {*mirror.reads, *(t.shadow() for t in mirror.reads)}
    order = PRECOMPUTE.names
    assert order.index("shadow_write_pairs") > order.index("item_neighbours")
    assert order.index("expire") > max(order.index(s.name) for s in shadow_steps)
    assert order[-1] == "shadow_gate"


def step(name: str, **declared: object) -> Step:
    return Step(name, "solaris.precompute.nodes:coverage", **declared)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ((step("select", reads=(POOL,)),), r"step 'select' reads \['pool'\], which no step before it writes"),
        ((step("a"), step("b", after=("c",))), r"step 'b' runs after \['c'\]"),
        ((step("a"), step("a")), "step name 'a' is used twice"),
        ((step("finish"),), "step name 'finish' is used twice"),
        ((step("embed", writes=(CODES,)),), "FM-shard tables come from the FM-shard steps"),
        ((step("a", writes=(POOL,), mapped_over="shards"),), "a mapped step writes its own shard's part"),
        ((step("a", mapped_over="items"),), r"step 'a' is mapped over 'items'"),
        ((step("a", writes=(POOL,)), step("b", reads=(POOL,))), r"step 'b' reads \['pool'\]"),  # no order
        ((step("a", figures=True), step("b", figures=True)), r"step 'b' records figures beside \['a'\]"),
        ((Step("a", "coverage"),), r"step 'a': its node 'coverage' is not a 'module:function'"),
        ((step("shadow_a", shadow=True),), r"shadow step 'shadow_a' must be named shadow_ \+ its node's function"),
    ],
)
def test_a_declaration_that_cannot_run_is_refused(steps: tuple[Step, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pipeline(steps)


def test_every_step_holds_its_code() -> None:
    """A step cannot be declared without code to run: each node imports, and a shadow step's code is its
    champion step's, run for the shadow chain (no-op without one; its counts prefixed)."""
    for declared in PRECOMPUTE.steps:
        code = declared.code()
        assert callable(code) and code.__name__ == declared.name, declared
    assert PRECOMPUTE.step("shadow_cohorts").code().__wrapped__ is PRECOMPUTE.step("cohorts").code()
    with pytest.raises(AttributeError, match="no_such_step"):
        Step("a", "solaris.precompute.nodes:no_such_step").code()


def test_the_coverage_steps_cannot_run_side_by_side() -> None:
    """Break it on purpose: side by side in Airflow, whichever wrote the run record's figures last erased the
    other's (the soak saw the shadow gate find no shadow coverage)."""
    steps = tuple(replace(s, after=("hour_counts",)) if s.name == "shadow_coverage" else s for s in PRECOMPUTE.steps)
    with pytest.raises(ValueError, match="step 'shadow_coverage' records figures beside"):
        Pipeline(steps)


def test_moving_a_step_before_its_input_breaks_the_declaration() -> None:
    """Break the rule on purpose: score no longer after candidates."""
    steps = tuple(replace(s, after=()) if s.name == "score" else s for s in PRECOMPUTE.steps)
    with pytest.raises(ValueError, match="step 'score' reads"):
        Pipeline(steps)


PARTS = {"shards": 2, "user_shards": 3}


def test_a_step_reads_and_writes_only_its_declared_tables(tmp_path: Path) -> None:
    staging = Staging(tmp_path, "run-1")
    frame = pd.DataFrame({"user_id": [1], "item_id": [2]})
    candidates = StepStaging(staging, PRECOMPUTE.step("candidates"), PARTS)
    with pytest.raises(ValueError, match="'pool' needs a shard"):
        candidates.write(POOL, frame)
    for shard in range(PARTS["user_shards"]):
        candidates.write(POOL, frame[shard_of(frame["user_id"].to_numpy(), PARTS["user_shards"]) == shard], shard)
    score = StepStaging(staging, PRECOMPUTE.step("score"), PARTS)
    assert score.read(POOL).num_rows == 1
    with pytest.raises(ValueError, match="step 'score' does not write staged table 'pool'"):
        score.write(POOL, frame, 0)
    with pytest.raises(ValueError, match=r"step 'score' does not read staged table 'user_vectors' \(declared: pool"):
        score.read(USER_VECTORS)
    embed = StepStaging(staging, PRECOMPUTE.step("embed_shard"), PARTS)
    with pytest.raises(ValueError, match="'codes' needs a shard"):
        embed.write(CODES, frame)
    assert embed.write(CODES, frame, 3)["table"] == "codes-3"


def test_a_shadow_step_names_the_champion_tables_and_gets_its_own(tmp_path: Path) -> None:
    """The champion's node code runs unchanged for the shadow chain: the same table names, other files."""
    staging = Staging(tmp_path, "run-1")
    frame = pd.DataFrame({"user_id": [1], "item_id": [2]})
    select = StepStaging(staging, PRECOMPUTE.step("select"), PARTS)
    for shard in range(PARTS["user_shards"]):
        select.write(SELECTED, frame[shard_of(frame["user_id"].to_numpy(), 3) == shard].assign(score=0.5), shard)
    embed = StepStaging(staging, PRECOMPUTE.step("shadow_embed_shard"), PARTS, shadow=True)
    assert embed.read(SELECTED).num_rows == 1  # the champion's selection
    assert embed.write(CODES, frame, 0)["table"] == "shadow_codes-0"
    with pytest.raises(FileNotFoundError):
        StepStaging(staging, PRECOMPUTE.step("write_pairs"), PARTS).read(CODES, 0)  # the champion's codes: none
    shadow_write = StepStaging(staging, PRECOMPUTE.step("shadow_write_pairs"), PARTS, shadow=True)
    assert shadow_write.read(CODES, 0).num_rows == 1


def test_a_user_shard_holds_its_own_users_alone(tmp_path: Path) -> None:
    """A part with another shard's user is refused on write and on read (break it on purpose: a part written
    behind the staging's back)."""
    staging = Staging(tmp_path, "run-1")
    users = np.arange(40)
    frame = pd.DataFrame({"user_id": users, "item_id": users + 100})
    candidates = StepStaging(staging, PRECOMPUTE.step("candidates"), PARTS)
    for shard in range(PARTS["user_shards"]):
        candidates.write(POOL, frame[shard_of(users, PARTS["user_shards"]) == shard], shard)
    score = StepStaging(staging, PRECOMPUTE.step("score"), PARTS)
    parts = [score.read(POOL, s)["user_id"].to_numpy() for s in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == users.tolist() and all(len(p) for p in parts)
    for s, part in enumerate(parts):
        assert (shard_of(part, 3) == s).all()
    stranger = int(parts[1][0])
    with pytest.raises(ValueError, match=rf"part 0 holds 1 row\(s\) of other user shards \(user {stranger} "):
        score.write(SCORED, frame[frame["user_id"].isin([*parts[0], stranger])], 0)
    staging.write("pool-0", frame[frame["user_id"].isin([*parts[0], stranger])])
    with pytest.raises(ValueError, match="a user shard's task takes only its own users"):
        score.read(POOL, 0)
    assert score.read(POOL, 2).num_rows == len(parts[2])
