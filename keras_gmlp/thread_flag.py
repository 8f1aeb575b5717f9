"""A flag of each thread, set within a `with` scope."""

import contextlib
import threading


class ThreadFlag:
    """A flag of each thread: `False`, but `True` within `scope()`.

    Scopes nest; leaving one restores the value it found.

    Example:

    >>> from keras_gmlp.thread_flag import ThreadFlag
    >>> exporting = ThreadFlag()
    >>> with exporting.scope():
    ...     exporting.is_set()
    True
    >>> exporting.is_set()
    False
    """

    def __init__(self):
        self._local = threading.local()

    def is_set(self):
        """Whether this thread is within `scope()`."""
        return getattr(self._local, "value", False)

    @contextlib.contextmanager
    def scope(self):
        """Sets the flag in this thread until the `with` block ends."""
        previous = self.is_set()
        self._local.value = True
        try:
            yield
        finally:
            self._local.value = previous
