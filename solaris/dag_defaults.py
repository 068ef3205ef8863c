"""What every SOLARIS DAG shares, declared once.

A start date before any data: a run works on its logical interval, never on when the DAG was deployed. No
catch-up: a missed hour is not worth computing once later ones have run. One active run: each run reads what
the one before it wrote (staging, the store, the registry).
"""

from __future__ import annotations

import pendulum

DAG_DEFAULTS = {"start_date": pendulum.datetime(2026, 1, 1, tz="UTC"), "catchup": False, "max_active_runs": 1}
