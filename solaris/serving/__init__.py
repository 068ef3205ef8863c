"""Online serving: the in-process :class:`Ranker` and the HTTP service around it."""

from solaris.serving.ranker import NotReady, Ranker, Served

__all__ = ["NotReady", "Ranker", "Served"]
