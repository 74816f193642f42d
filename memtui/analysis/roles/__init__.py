"""Memory by role: what kind of memory each block is (issue 32).

Every block of every source gets one role (:data:`ROLES`: parameter, gradient,
optimizer_state, activation, temporary, input, cache, other) with the rule that gave it
(:data:`RULES`, each written down beside its code) and whether it was inferred by
pairing; the bytes by role at any event are then a sum over the blocks alive there, and
add up to allocated (:mod:`.levels`).  The rules and their order are in :mod:`.assign`:
the user's own first (:mod:`.user_rules`, ``[tool.memtui.roles]``), then what the capture
names (``user_metadata``, msMemScope's owner tags: :mod:`.owners`), then the loop's
phases read from call stacks (:mod:`.stack_rules`, :mod:`.phases`) or operator names
(:mod:`.operators`), against which each block's lifetime decides (:mod:`.lifetimes`).

Results are computed once per trace, device and set of user rules (a trace carries the
user's rules: :func:`with_rules`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.roles.assign import device_roles
from memtui.analysis.roles.levels import RoleLevels, role_levels
from memtui.analysis.roles.model import (
    ROLE_DTYPE,
    ROLE_LABELS,
    ROLE_SHORT,
    ROLES,
    RULES,
    BlockRoles,
)
from memtui.analysis.roles.user_rules import (
    RoleRules,
    parse_rules,
    rules_of,
    with_rules,
)
from memtui.analysis.timeline.live import cached
from memtui.model import MemoryTrace


def rules_key(trace: MemoryTrace) -> str | None:
    """What tells the user's role rules apart (a cache key; None: memtui's own)."""
    rules = rules_of(trace)
    return rules.key if rules is not None else None


_rules_key = rules_key


def block_roles(trace: MemoryTrace, device: str) -> BlockRoles:
    """The role of every block of ``device`` (cached)."""
    return cached(trace, ("roles", device, _rules_key(trace)),
                  lambda: device_roles(trace, device))


def levels_by_role(trace: MemoryTrace, device: str) -> RoleLevels:
    """Every role's bytes over the device's events (cached)."""
    return cached(trace, ("role_levels", device, _rules_key(trace)),
                  lambda: role_levels(trace, device, block_roles(trace, device)))


def levels_ready(trace: MemoryTrace, device: str) -> RoleLevels | None:
    """:func:`levels_by_role` where it was already computed, else None (a screen asks
    without waiting, and has a worker compute it)."""
    from memtui.analysis.timeline.live import built

    found = built(trace, ("role_levels", device, _rules_key(trace)))
    return found if isinstance(found, RoleLevels) else None


def by_role_at(trace: MemoryTrace, device: str, event: int) -> dict[str, int]:
    """Bytes by role just after the event at position ``event`` (every role, summing to
    allocated there)."""
    return levels_by_role(trace, device).at_event(event)


def blocks_with_roles(trace: MemoryTrace, device: str | None = None) -> pl.DataFrame:
    """The blocks (of ``device``, else of every device) with their ``role``, ``rule`` and
    ``inferred`` columns."""
    names = [device] if device is not None else trace.meta.device_names
    parts = []
    for name in names:
        blocks = trace.device_blocks(name)
        roles = block_roles(trace, name).frame
        parts.append(blocks.join(roles, on="block_id", how="left", maintain_order="left"))
    if not parts:
        return trace.blocks.with_columns(role=pl.lit(None, ROLE_DTYPE),
                                         rule=pl.lit(None, pl.String),
                                         inferred=pl.lit(None, pl.Boolean))
    return pl.concat(parts, how="diagonal_relaxed")


def role_table_blocks(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """The device's blocks with their ``role`` as text (the Tables' Role column: a text
    filter's words match it)."""
    roles = block_roles(trace, device).frame.select(
        "block_id", role=pl.col("role").cast(pl.String))
    return trace.device_blocks(device).join(roles, on="block_id", how="left",
                                            maintain_order="left")


def role_codes(trace: MemoryTrace, device: str, block_ids: np.ndarray) -> np.ndarray:
    """The role of each of ``block_ids`` of ``device`` as its index in ROLES (-1: none)."""
    frame = block_roles(trace, device).frame
    found = pl.DataFrame({"block_id": np.asarray(block_ids, dtype=np.int64)}).join(
        frame.select("block_id", code=pl.col("role").to_physical().cast(pl.Int64)),
        on="block_id", how="left", maintain_order="left")
    return found["code"].fill_null(-1).to_numpy().astype(np.int64)


def role_of_blocks(trace: MemoryTrace, device: str, block_ids: np.ndarray) -> np.ndarray:
    """The role (a string) of each of ``block_ids`` of ``device`` (None where unknown)."""
    frame = block_roles(trace, device).frame
    found = pl.DataFrame({"block_id": np.asarray(block_ids, dtype=np.int64)}).join(
        frame.select("block_id", "role"), on="block_id", how="left", maintain_order="left")
    return found["role"].cast(pl.String).to_numpy()


def phases_source(trace: MemoryTrace, device: str) -> str | None:
    """What the device's phases were read from (``call stacks``, ``operator names``), or
    None where none were found."""
    return block_roles(trace, device).phases


__all__ = ["ROLES", "ROLE_DTYPE", "ROLE_LABELS", "ROLE_SHORT", "RULES", "BlockRoles",
           "RoleLevels", "RoleRules", "block_roles", "blocks_with_roles", "by_role_at",
           "levels_by_role", "levels_ready", "parse_rules", "phases_source", "role_codes",
           "role_of_blocks", "role_table_blocks", "rules_key", "rules_of", "with_rules"]
