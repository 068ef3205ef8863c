"""Online serving: the in-process :class:`Ranker` and the HTTP service around it.

The names load lazily, so a process that needs only :mod:`solaris.serving.servedlog` (the served log's
writer process) does not import torch.
"""

from typing import Any

__all__ = ["NotReady", "Ranker", "Served"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from solaris.serving import ranker

        return getattr(ranker, name)
    raise AttributeError(f"module 'solaris.serving' has no attribute {name!r}")
