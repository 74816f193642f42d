"""How the ``memtui`` command's own process asks its allocators to give memory back.

Opening a capture builds and drops arrays of millions of values.  Left at their defaults,
polars' allocator (jemalloc) keeps the pages it frees for half a second to a second and a
half before handing them back (polars sets ``dirty_decay_ms:500,muzzy_decay_ms:1000`` when
it loads, and appends whatever ``_RJEM_MALLOC_CONF`` held), and numpy asks for transparent
huge pages (2 MiB), whose partly used pages stay resident.  On a generated 5M-event
snapshot that held the first open's peak at 0.96-1.01 GB where the model and its analyses
need 0.83 GB at most: resident memory on a host that is also training.  The command sets,
before either library is imported:

- ``_RJEM_MALLOC_CONF=dirty_decay_ms:100,muzzy_decay_ms:0``: freed pages go back within a
  tenth of a second (polars' jemalloc reads this at its start, after polars' own);
- ``NUMPY_MADVISE_HUGEPAGE=0``: numpy's arrays in ordinary pages.

Together: 0.87-0.93 GB on that snapshot, in the same time (docs/performance.md, session
17).  A setting the user made is left as it is (polars' own default, which a process that
loaded polars leaves in the environment of what it starts, is not the user's); a program
importing memtui is never touched (only :func:`memtui.cli.entry` calls :func:`apply`), and
a program the command runs (``memtui record``) gets the user's environment without them
(:func:`for_children`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: The environment the command's process starts its allocators with.
SETTINGS = {
    "_RJEM_MALLOC_CONF": "dirty_decay_ms:100,muzzy_decay_ms:0",
    "NUMPY_MADVISE_HUGEPAGE": "0",
}

#: What polars writes into the environment when it loads (polars/__init__.py), where
#: nothing was set: a parent's, not the user's.
_POLARS_OWN = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:500,muzzy_decay_ms:1000"}

#: What :func:`apply` set in this process (not what the user set).
_SET: dict[str, str] = {}


def apply() -> dict[str, str]:
    """Set each of :data:`SETTINGS` the environment lacks, where the library it is for is
    not imported yet (later it would be read by nobody); what was set."""
    libraries = {"_RJEM_MALLOC_CONF": "polars", "NUMPY_MADVISE_HUGEPAGE": "numpy"}
    for name, value in SETTINGS.items():
        users = os.environ.get(name)
        if users is not None and users != _POLARS_OWN.get(name) \
                or libraries[name] in sys.modules:
            continue
        os.environ[name] = value
        _SET[name] = value
    return dict(_SET)


def for_children(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without what :func:`apply` set in this process: a program the command runs
    sees the environment the user gave it."""
    return {name: value for name, value in env.items()
            if not (name in _SET and value == _SET[name])}


__all__ = ["SETTINGS", "apply", "for_children"]
