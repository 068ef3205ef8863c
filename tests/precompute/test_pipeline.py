"""The pipeline declaration refuses an order or data flow that cannot run, and each step's staging view
holds it to the tables it declares."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from solaris.precompute.pipeline import CODES, POOL, PRECOMPUTE, SELECTED, USER_VECTORS, Pipeline, Step
from solaris.precompute.staging import Staging, StepStaging


def test_the_declared_pipeline_reads_only_what_an_earlier_step_wrote() -> None:
    assert PRECOMPUTE.names[0] == "coverage" and PRECOMPUTE.step("embed_shard").per_shard
    assert [s.name for s in PRECOMPUTE.steps if s.pool] == ["embed_shard"]
    writers = {t: s.name for s in PRECOMPUTE.steps for t in s.writes}
    assert writers == {POOL: "candidates", SELECTED: "select", CODES: "embed_shard", USER_VECTORS: "user_vectors"}


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ((Step("select", reads=(POOL,)),), r"step 'select' reads \['pool'\], which no step before it writes"),
        ((Step("a"), Step("b", after=("c",))), r"step 'b' runs after \['c'\]"),
        ((Step("a"), Step("a")), "step name 'a' is used twice"),
        ((Step("finish"),), "step name 'finish' is used twice"),
        ((Step("embed", writes=(CODES,)),), "per-shard tables come from per-shard steps"),
        ((Step("a", writes=(POOL,)), Step("b", reads=(POOL,))), r"step 'b' reads \['pool'\]"),  # no order
    ],
)
def test_a_declaration_that_cannot_run_is_refused(steps: tuple[Step, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pipeline(steps)


def test_moving_a_step_before_its_input_breaks_the_declaration() -> None:
    """Break the rule on purpose: select no longer after candidates."""
    steps = tuple(replace(s, after=()) if s.name == "select" else s for s in PRECOMPUTE.steps)
    with pytest.raises(ValueError, match="step 'select' reads"):
        Pipeline(steps)


def test_a_step_reads_and_writes_only_its_declared_tables(tmp_path: Path) -> None:
    staging = Staging(tmp_path, "run-1")
    frame = pd.DataFrame({"user_id": [1], "item_id": [2]})
    StepStaging(staging, PRECOMPUTE.step("candidates")).write(POOL, frame)
    select = StepStaging(staging, PRECOMPUTE.step("select"))
    assert select.read(POOL).num_rows == 1
    with pytest.raises(ValueError, match="step 'select' does not write staged table 'pool'"):
        select.write(POOL, frame)
    with pytest.raises(ValueError, match=r"step 'select' does not read staged table 'user_vectors' \(declared: pool\)"):
        select.read(USER_VECTORS)
    embed = StepStaging(staging, PRECOMPUTE.step("embed_shard"))
    with pytest.raises(ValueError, match="'codes' needs a shard"):
        embed.write(CODES, frame)
    assert embed.write(CODES, frame, 3)["table"] == "codes-3"
