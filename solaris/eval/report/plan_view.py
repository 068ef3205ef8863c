"""The capacity plan as the terminal, the HTML report and MLflow show it: its arms and its recommendation as
``Section`` rows (one layout for text and page), the curve as ``plan.png``, and ``plan.json``."""

from __future__ import annotations

import json
from pathlib import Path

from matplotlib.figure import Figure

from solaris.eval.plan import Plan
from solaris.eval.report.tables import Section, gain_interval, grid, num, pct


def plan_sections(plan: Plan) -> list[Section]:
    knee = plan.knee.label if plan.knee else None
    arms = sorted(plan.arms, key=lambda a: (a.selector, a.ttl_hours, a.fm_calls_per_hour))
    rows = [
        (
            a.label,
            num(a.fm_budget, ",.0f"),
            num(a.fm_calls_per_hour, ",.0f"),
            num(a.fm_calls_per_day, ",.0f"),
            pct(a.coverage_pair),
            pct(a.hit_rate_ttl),
            num(a.ne),
            num(a.ne_loss, "+.4f"),
            gain_interval(a.ne_loss_ci95),
            ", ".join(mark for mark, is_it in (("full budget", a.full_budget), ("knee", a.label == knee)) if is_it),
        )
        for a in arms
    ]
    header = ("arm", "fm_budget", "FM calls/h", "FM calls/day", "cov pair", "hit while fresh", "NE", "NE loss")
    seeds = ", ".join(map(str, plan.seeds))
    curve = Section(
        f"Capacity plan: NE loss against its selector's full budget by arm (world {plan.world}, seeds {seeds})",
        (*header, "95% CI (every seed)", ""),
        rows,
    )
    rows = [(f"{name}: {value}",) for name, value in _recommendation_rows(plan)]
    return [curve, Section("Capacity plan: what to run at", ("",), rows)]


def _recommendation_rows(plan: Plan) -> list[tuple[str, str]]:
    knee, op = plan.knee, plan.operating_point
    rows = [("verdict", plan.verdict), ("selector", f"{plan.selector.planned}: {plan.selector.reason}")]
    rows.append(("demand model's requested AUC", num(plan.selector.requested_auc, ".3f")))
    under = {None: "", True: ": under demand_auc_floor, production runs the verifier", False: ""}
    valid = num(plan.selector.valid_auc, ".3f") + under[plan.selector.under_floor]
    rows.append(("demand model's validation AUC", valid))
    if knee is None:
        rows.append(("recommendation", "none"))
    else:
        spend = f"fm_budget {knee.fm_budget:,}" if knee.fm_budget is not None else f"top_fraction {knee.top_fraction:g}"
        rows += [
            (
                "recommendation",
                f"selector {knee.selector}, {spend}, ttl_hours {knee.ttl_hours}, min_demand {knee.min_demand:g}",
            ),
            ("it costs", f"{knee.fm_calls_per_day:,.0f} FM calls a day, hit rate while fresh {pct(knee.hit_rate_ttl)}"),
        ]
        if knee.selector == "budget" and knee.ttl_hours != op.ttl_hours:  # a run refuses a model for another TTL
            rows.append(("first", f"train the demand model for it: solaris train demand --ttl-hours {knee.ttl_hours}"))
    rows += [
        ("today", f"selector {op.selector}, fm_budget {op.fm_budget:,}, ttl_hours {op.ttl_hours}: {op.sentence}"),
        ("from", f"world {plan.world}, seeds {', '.join(map(str, plan.seeds))}, commit {', '.join(plan.commits)}"),
        ("target", f"NE loss within {plan.target:g} of the planned selector's full budget ({plan.full_budget})"),
    ]
    return rows


def plan_text(plan: Plan) -> str:
    return "\n\n".join(grid(s) for s in plan_sections(plan)) + "\n"


def draw_plan(fig: Figure, plan: Plan) -> None:
    """NE loss against FM calls an hour, one line per selector and TTL, the target band, the knee, today's budget."""
    ax = fig.subplots()
    for selector, marker in (("verifier", "o"), ("budget", "s")):
        for ttl in sorted({a.ttl_hours for a in plan.arms if a.selector == selector}):
            arms = sorted(
                (a for a in plan.arms if (a.selector, a.ttl_hours) == (selector, ttl)),
                key=lambda a: a.fm_calls_per_hour,
            )
            xs, ys = [a.fm_calls_per_hour for a in arms], [a.ne_loss for a in arms]
            errors = [
                [y - a.ne_loss_ci95[0] for a, y in zip(arms, ys)],
                [a.ne_loss_ci95[1] - y for a, y in zip(arms, ys)],
            ]
            ax.errorbar(xs, ys, yerr=errors, marker=marker, capsize=3, label=f"{selector}, ttl {ttl} h")
    ax.axhspan(0, plan.target, color="#c6f6d5", zorder=0, label=f"within target ({plan.target:g})")
    ax.axhline(0, color="black", linewidth=0.8)
    if (knee := plan.knee) is not None:
        ax.plot(
            [knee.fm_calls_per_hour],
            [knee.ne_loss],
            marker="*",
            markersize=16,
            color="#d69e2e",
            linestyle="",
            label="knee",
        )
    if plan.operating_point.selector == "budget":
        ax.axvline(plan.operating_point.fm_budget, color="#c53030", linestyle="--", label="today's fm_budget")
    ax.set(xscale="log", xlabel="FM calls an hour", ylabel="NE loss against its selector's full budget")
    ax.set_title(plan.verdict, fontsize="small", wrap=True)
    ax.legend(fontsize="small")


PLAN_CAPTION = "Capacity plan: the SOLARIS VM's NE loss against its selector's full budget by FM calls an hour"


def write_plan_png(plan: Plan, path: Path) -> None:
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    draw_plan(fig, plan)
    fig.savefig(path, dpi=100)


def write_plan(plan: Plan, folder: Path) -> Path:
    """``plan.json``, ``plan.png`` and ``plan.txt`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text(json.dumps(plan.as_dict(), indent=2))
    write_plan_png(plan, folder / "plan.png")
    (folder / "plan.txt").write_text(plan_text(plan))
    return folder
