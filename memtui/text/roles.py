"""Roles in words: ``parameters 64.0 MiB, optimizer state 128.1 MiB, ... other 2.0 MiB``.

The same line in ``summary``, ``state``, ``findings``, ``check`` and ``compare``: each role
holding bytes, in the order of ROLES, by its name for people; ``other`` is said as such
("no rule explains it"), never left out where it holds bytes.
"""

from __future__ import annotations

from memtui.analysis.roles.model import ROLE_LABELS, ROLES
from memtui.units import format_bytes, signed_bytes


def roles_text(roles: dict[str, int], outside_rows: int = 0) -> str:
    """The roles holding bytes, ``parameters 64.0 MiB, ...`` ("nothing" where none).

    ``outside_rows``: the part of ``other`` that is a profiler's level beyond its operator
    rows (parameters and optimizer state alive before the profile among it, not told
    apart), said as such rather than as bytes no rule explains."""
    parts = [f"{ROLE_LABELS[r]} {format_bytes(roles[r])}" for r in ROLES if roles.get(r)]
    other = roles.get("other", 0)
    if other:
        outside = min(max(outside_rows, 0), other)
        parts[-1] += _other_words(other, outside)
    return ", ".join(parts) or "nothing"


def _other_words(other: int, outside: int) -> str:
    """What ``other`` is: bytes no rule explains, and the part outside any operator row."""
    rows = ("outside any operator row (parameters, optimizer state and whatever else no "
            "profiled operator allocated, not told apart)")
    if not outside:
        return " that no rule explains"
    if outside == other:
        return f" {rows}"
    return f": {format_bytes(outside)} {rows}, {format_bytes(other - outside)} that no rule " \
        "explains"


def role_deltas_text(deltas: dict[str, int]) -> str:
    """Changes by role, largest first: ``optimizer state +3.2 GiB, activations -1.0 GiB``."""
    moved = sorted((r for r in ROLES if deltas.get(r)), key=lambda r: -abs(deltas[r]))
    return ", ".join(f"{ROLE_LABELS[r]} {signed_bytes(deltas[r])}" for r in moved) \
        or "no role changed"


def role_name(role: str) -> str:
    return ROLE_LABELS.get(role, role)


__all__ = ["role_deltas_text", "role_name", "roles_text"]
