"""SOLARIS's own log output for long-running processes (the ranker's server).

Libraries configure the root logger as a side effect: importing ``mlflow.pytorch`` runs
``logging.basicConfig(level=logging.ERROR)``, and from then on every warning that reaches the root logger is
dropped. So the ``solaris`` logger gets a level and a handler of its own and does not propagate: what
SOLARIS logs does not depend on what another package did to the root logger, before or after this call.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LOGGER = "solaris"
FORMAT = "%(asctime)s %(levelname)s %(name)s [pid %(process)d]: %(message)s"


class _SolarisHandler(logging.StreamHandler):
    """Marks the handler this module installed, so a second call replaces it instead of adding another."""


def configure_logging(level: int | str = logging.INFO, stream: TextIO | None = None) -> logging.Logger:
    """Send the ``solaris`` loggers' records at ``level`` and above to ``stream`` (stderr by default).

    Idempotent: calling it again (each server worker does, as does a test) changes the level and stream.
    """
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _SolarisHandler)]:
        logger.removeHandler(handler)
    handler = _SolarisHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # the root logger's level and handlers (basicConfig's, anyone's) play no part
    return logger
