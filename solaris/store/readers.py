"""Long-lived driver connections for the serving read.

At 1 user x 200 candidates a SQLAlchemy pool checkout, its execution layer and the reset on return cost
more than the query; a free list of raw DBAPI connections costs a list pop. A connection is not bound to a
thread: whichever read needs one next takes an idle one, so their number follows the peak number of
concurrent reads, not the number of threads that ever read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class ReaderConnections:
    """Idle driver connections, opened on demand by ``connect`` and kept until :meth:`close`."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._idle: list[Any] = []  # list.pop / list.append are atomic: no lock on the hot path
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """An idle connection (or a new one), returned to the idle list unless the read failed."""
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = self._connect()
        try:
            yield conn
        except BaseException:
            conn.close()  # its state is unknown after an error (a broken socket, a cancelled query)
            raise
        self._idle.append(conn)
        if self._closed:  # close() ran while this read was in flight
            self.close()

    def close(self) -> None:
        """Close the idle connections; one still in use is closed when its read returns it."""
        self._closed = True
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return
            conn.close()
