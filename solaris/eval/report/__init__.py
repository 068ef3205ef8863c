"""The replay report: a table for the terminal (:mod:`.tables`), an HTML page (:mod:`.page`) with PNG plots
(:mod:`.plots`), the invariants CI asserts (:mod:`.invariants`), and the spread over seeds (:mod:`.seeds`).
"""

from solaris.eval.report.invariants import INVARIANTS, check_invariants, span_means
from solaris.eval.report.page import write_html
from solaris.eval.report.plots import PLOTS
from solaris.eval.report.seeds import seed_spreads, seeds_table
from solaris.eval.report.tables import table

__all__ = [
    "INVARIANTS",
    "PLOTS",
    "check_invariants",
    "seed_spreads",
    "seeds_table",
    "span_means",
    "table",
    "write_html",
]
