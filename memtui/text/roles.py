"""Roles in words: ``parameters 64.0 MiB, optimizer state 128.1 MiB, ... other 2.0 MiB``.

The same line in ``summary``, ``state``, ``findings``, ``check`` and ``compare``: each role
holding bytes, in the order of ROLES, by its name for people; ``other`` is said as such
("no rule explains it"), never left out where it holds bytes.
"""

from __future__ import annotations

from memtui.analysis.roles.model import ROLE_LABELS, ROLES
from memtui.units import format_bytes, signed_bytes


def roles_text(roles: dict[str, int]) -> str:
    """The roles holding bytes, ``parameters 64.0 MiB, ...`` ("nothing" where none)."""
    parts = [f"{ROLE_LABELS[r]} {format_bytes(roles[r])}" for r in ROLES if roles.get(r)]
    if roles.get("other"):
        parts[-1] += " that no rule explains"
    return ", ".join(parts) or "nothing"


def role_deltas_text(deltas: dict[str, int]) -> str:
    """Changes by role, largest first: ``optimizer state +3.2 GiB, activations -1.0 GiB``."""
    moved = sorted((r for r in ROLES if deltas.get(r)), key=lambda r: -abs(deltas[r]))
    return ", ".join(f"{ROLE_LABELS[r]} {signed_bytes(deltas[r])}" for r in moved) \
        or "no role changed"


def role_name(role: str) -> str:
    return ROLE_LABELS.get(role, role)


__all__ = ["role_deltas_text", "role_name", "roles_text"]
