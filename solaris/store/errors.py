"""The store's exceptions, apart from the interface so that :mod:`solaris.store.validate` (which the
interface's write methods call) can raise them without importing the interface."""


class StoreError(ValueError):
    """A batch or request the store refuses; nothing of it was written."""


class StoreNotInitialised(StoreError):
    """The store's database has none of its tables yet."""


class StoreReadTimeout(TimeoutError):
    """A read interrupted because it ran past the time it was given."""
