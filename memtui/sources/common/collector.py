"""Keeping Python's cyclic garbage collector out of bulk loads.

Unpickling a snapshot creates millions of dicts; each time the collector's allocation
counter trips it walks the young objects, and every so often all of them: on a 5M-event
snapshot that is more than half of ``pickle.load``'s time.  The loaders build no reference
cycles worth collecting, so :func:`collector_paused` switches the collector off around the
bulk work and restores it afterwards (nested and threaded uses restore it once, when the
last one ends).  Reference counting still frees everything as usual.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic collector disabled; restore its previous state after."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
