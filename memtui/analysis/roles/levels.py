"""Bytes by role at every event: sums over the blocks alive, summing to allocated.

A block counts from its alloc to its free (the allocator's ``free_completed``, as the
allocated level counts it; a ghost from before the first event), so on captures whose
level is built from its blocks (snapshots, msMemScope) the roles add up to allocated at
every event exactly.  Where the level is the source's own figure (an Ascend profiler
folder's ``memory_record``) the bytes no operator row explains are ``other``
(``before_profile``: parameters and optimizer state alive before the profile, not told
apart, and whatever no row shows); where the rows count more than the level (their times
lead the level's by microseconds) every role is scaled down to it, so no role is ever
negative.

:class:`RoleLevels` keeps, per role, the event positions where its bytes change and the
bytes after each (two points per block at most, not one value per event and role): a
role's bytes after any event are one binary search away, and each role is a
:class:`~memtui.analysis.timeline.levels.Level` for the Trend, the report and Perfetto.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis.roles.assign import aligned_positions, positions_of
from memtui.analysis.roles.model import OTHER, ROLES, BlockRoles
from memtui.analysis.timeline.at_time import Timeline
from memtui.analysis.timeline.attribution import level_is_reported, unexplained
from memtui.analysis.timeline.levels import Level
from memtui.model import MemoryTrace

_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class RoleSteps:
    """One role's bytes: ``values[i]`` just after event position ``pos[i]`` (rising; -1
    is before the first event) until the next change."""

    pos: np.ndarray
    values: np.ndarray

    def at(self, event: int | np.ndarray) -> np.ndarray:
        index = np.searchsorted(self.pos, event, side="right") - 1
        return np.where(index >= 0, self.values[np.clip(index, 0, None)], 0)


@dataclass
class RoleLevels:
    """Every role's bytes over one device's events (see the module docstring)."""

    device: str
    steps: dict[str, RoleSteps]
    level: np.ndarray | None  # the source's own level per position, where it is reported
    blocks: np.ndarray | None  # the blocks' bytes per position, beside it
    positions: int

    def at_event(self, event: int) -> dict[str, int]:
        """Bytes by role just after the event at position ``event``: every role, in the
        order of ROLES, summing to the allocated level there."""
        event = int(min(max(event, -1), max(self.positions - 1, -1)))
        out = {role: int(self.steps[role].at(event)) if role in self.steps else 0
               for role in ROLES}
        if self.level is not None and self.positions and event >= 0:
            _fit_to_level(out, int(self.level[event]), int(self.blocks[event]))
        return out

    def outside_rows(self, event: int) -> int:
        """The part of ``other`` just after ``event`` that is the source's own level beyond
        its blocks (``before_profile``: memory_record outside any operator row); 0 where the
        level is built from the blocks."""
        if self.level is None or not self.positions or event < 0:
            return 0
        event = int(min(event, self.positions - 1))
        return max(int(self.level[event]) - int(self.blocks[event]), 0)

    def present(self) -> list[str]:
        """The roles holding bytes somewhere, in the order of ROLES."""
        shown = [r for r in ROLES if r in self.steps and int(self.steps[r].values.max(
            initial=0)) > 0]
        if self.level is not None and "other" not in shown and np.any(self.level > self.blocks):
            shown.append("other")
        return [r for r in ROLES if r in shown]

    def series(self, timeline: Timeline) -> dict[str, Level]:
        """Each present role as a Level on the time axis (its first value at the device's
        start: the ghosts' bytes)."""
        times = timeline.times
        out: dict[str, Level] = {}
        for role in self.present():
            if self.level is not None:
                values = self.at_positions(role, np.arange(self.positions))
                out[role] = Level(times[:self.positions].astype(np.int64), values)
                continue
            steps = self.steps[role]
            t = np.where(steps.pos < 0, times[0], times[np.clip(steps.pos, 0, times.size - 1)])
            out[role] = Level(t.astype(np.int64), steps.values.astype(np.int64))
        return out

    def at_positions(self, role: str, positions: np.ndarray) -> np.ndarray:
        """One role's bytes just after each of ``positions`` (vectorised at_event)."""
        base = (self.steps[role].at(positions) if role in self.steps
                else np.zeros(positions.size, dtype=np.int64)).astype(np.int64)
        if self.level is None:
            return base
        level = self.level[positions]
        blocks = self.blocks[positions]
        rest = level - blocks
        scaled = np.where(rest < 0, base * level // np.maximum(blocks, 1), base)
        if role == "other":
            scaled = scaled + np.maximum(rest, 0)
        return scaled


def _fit_to_level(out: dict[str, int], level: int, blocks: int) -> None:
    """Make ``out`` (the blocks' bytes by role) sum to ``level``: the rest is ``other``;
    an excess scales every role down (the largest takes the rounding)."""
    rest = level - blocks
    if rest >= 0:
        out["other"] += rest
        return
    if blocks <= 0:
        return
    for role in out:
        out[role] = out[role] * max(level, 0) // blocks
    largest = max(out, key=lambda r: out[r])
    out[largest] += max(level, 0) - sum(out.values())


def role_levels(trace: MemoryTrace, device: str, roles: BlockRoles,
                timeline: Timeline | None = None) -> RoleLevels:
    """:class:`RoleLevels` of ``device`` from its blocks' roles."""
    tl = timeline if timeline is not None else Timeline.build(trace, device)
    blocks = trace.device_blocks(device)
    aligned = aligned_positions(blocks, positions_of(trace, device))  # row for row
    size = blocks["size"].fill_null(0).to_numpy().astype(np.int64, copy=False)
    ghost = blocks["ghost"].fill_null(False).to_numpy()
    start = np.where(ghost, -1, aligned["pos_alloc"].fill_null(_NEVER).to_numpy())
    end = aligned["pos_free"].fill_null(_NEVER).to_numpy().astype(np.int64, copy=False)
    codes = roles.codes if roles.frame.height == blocks.height else np.full(
        blocks.height, OTHER, dtype=np.int64)
    steps: dict[str, RoleSteps] = {}
    live = start < end
    for code, role in enumerate(ROLES):
        mine = live & (codes == code) & (start != _NEVER)
        if not mine.any():
            continue
        steps[role] = _steps(start[mine], end[mine], size[mine])
    level = blocks_bytes = None
    if level_is_reported(trace):
        gap = unexplained(trace, device, tl)
        level, blocks_bytes = gap.level, gap.blocks
    return RoleLevels(device, steps, level, blocks_bytes, tl.positions)


def _steps(start: np.ndarray, end: np.ndarray, size: np.ndarray) -> RoleSteps:
    """The running sum of +size at ``start`` and -size at ``end`` (end NEVER: never),
    one point per distinct position (the value after every change there): by a sum per
    position where the positions span fewer than about a block's worth of values each
    (an array over the span, no sort), else by sorting the changes."""
    freed = end != _NEVER
    span = max(int(start.max(initial=-1)), int(end[freed].max(initial=-1))) + 2
    # bytes at once: the sum's 9 a position, against the sort's ~56 a change (the changes'
    # positions and sizes, the order, and both reordered)
    if start.size and int(start.min()) >= -1 and span * 9 < 56 * (start.size + int(freed.sum())):
        return _steps_by_position(start, end, size, freed, span)
    return _steps_by_sort(start, end, size, freed)


def _steps_by_position(start: np.ndarray, end: np.ndarray, size: np.ndarray,
                       freed: np.ndarray, span: int) -> RoleSteps:
    """:func:`_steps` by summing each position's changes into an array over the
    positions (-1 in slot 0), then the running sum, kept where a change was."""
    level = np.zeros(span, dtype=np.int64)
    np.add.at(level, start + 1, size)
    changed = np.zeros(span, dtype=bool)
    changed[start + 1] = True
    ends = end[freed] + 1
    np.add.at(level, ends, -size[freed])
    changed[ends] = True
    del ends
    np.cumsum(level, out=level)
    at = np.flatnonzero(changed)
    del changed
    return RoleSteps(at - 1, level[at])


def _steps_by_sort(start: np.ndarray, end: np.ndarray, size: np.ndarray,
                   freed: np.ndarray) -> RoleSteps:
    """:func:`_steps` by sorting the changes by position."""
    # positions as int32 where they fit (every one but NEVER counts events): the sort's
    # keys and their reordered copy a block's worth of 4 bytes each, not 8 (issue 34)
    kept = int(freed.sum())
    wide = start.size and max(int(start.max()), int(end[freed].max(initial=0))) >= 2**31 - 1
    pos = np.empty(start.size + kept, dtype=np.int64 if wide else np.int32)
    pos[:start.size] = start
    pos[start.size:] = end[freed]
    delta = np.concatenate([size, -size[freed]])
    del freed
    order = np.argsort(pos, kind="stable")
    pos = pos[order]  # one array reordered at a time, the sum taken in place: two
    delta = delta[order]  # changes a block's worth fewer arrays at once (issue 34)
    del order
    np.cumsum(delta, out=delta)
    last = np.append(pos[1:] != pos[:-1], True)
    return RoleSteps(pos[last].astype(np.int64, copy=False),
                     delta[last].astype(np.int64, copy=False))


__all__ = ["RoleLevels", "RoleSteps", "role_levels"]
