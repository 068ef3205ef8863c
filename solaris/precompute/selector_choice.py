"""Which selector an hour runs: the one asked for, except that the budget selector falls back to the verifier
while its demand model ranks too poorly to beat it (#45).

The budget selector spends the FM's calls on the pairs its demand model predicts will be requested. Where
that model ranks poorly it buys nothing: on a held-back plain log its requested AUC was 0.64-0.66 and the
budget selector covered more than the verifier at equal calls with no NE gain, while on our worlds (0.79-0.87)
it gained. So under ``demand_auc_floor`` (the champion's validation AUC, from its training) the run takes
the verifier, and its record says so and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from solaris.precompute.params import PrecomputeParams

if TYPE_CHECKING:
    from solaris.tracking.registry import DemandChampion


@dataclass(frozen=True)
class SelectorChoice:
    selector: str
    demand_version: str | None  # pinned where the budget selector runs
    reason: str


def choose_selector(params: PrecomputeParams, demand: DemandChampion | None) -> SelectorChoice:
    """The selector ``params`` ask for, or the verifier where the budget selector's demand model is under
    ``params.demand_auc_floor``; ``demand`` is the champion (None where the verifier was asked for)."""
    if params.selector == "verifier" or demand is None:
        return SelectorChoice("verifier", None, "asked for")
    floor, auc = params.demand_auc_floor, demand.valid_auc
    if auc is None:
        return SelectorChoice(
            "budget", demand.version, f"asked for; demand model v{demand.version} has no validation AUC"
        )
    if auc < floor:
        return SelectorChoice(
            "verifier",
            None,
            f"budget asked for, but demand model v{demand.version}'s validation AUC {auc:.3f} is under "
            f"demand_auc_floor {floor:g}",
        )
    return SelectorChoice(
        "budget", demand.version, f"asked for; demand model v{demand.version}'s validation AUC {auc:.3f} >= {floor:g}"
    )
