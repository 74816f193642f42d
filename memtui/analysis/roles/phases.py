"""The phases of a training (or inference) loop, found from what each allocation's stack says.

Every allocation carries a kind (:mod:`.stack_rules`, or for operator sources
:mod:`.operators`).  The phases are runs of them on the device's event axis:

* **forward** (F): from a forward allocation (a module call) through the allocations that
  follow it up to the backward, the loss's included: the user's code between the last
  module call and ``loss.backward()`` computes the loss from the forward's output, and
  what it keeps is saved for the backward as the modules' are;
* **backward** (B): backward allocations (autograd's frames, or on a capture of Python
  stacks the allocations with none at all: the engine's thread runs no Python);
* **between** (G): everything else: the optimizer (its frames, or the user's ``step``),
  module construction, data loading, and the user's own code that is neither inside a
  forward nor between a forward and its backward (fetching the next batch, logging).

A run of the user's own code (no kind of its own) is forward when a forward run comes
before it and a backward run after it, and between otherwise.  Runs of one phase that
touch are merged.  A phase starts at its first allocation and lasts to the next phase's
first allocation; so a block freed after its phase's last allocation but before the next
phase begins is freed within its phase.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memtui.analysis.roles.stack_rules import (
    BACKWARD,
    DATA,
    FORWARD,
    MODULE,
    NEUTRAL,
    NO_STACK,
    OPTIMIZER,
    STEP,
)

PHASE_F, PHASE_B, PHASE_G = 0, 1, 2
PHASE_NAMES = ("forward", "backward", "between")
_PENDING = 3
#: A capture whose allocations mostly have no stack is not one that records stacks: its
#: stackless allocations are not taken for the autograd engine's.
MAX_NO_STACK_SHARE = 0.8


@dataclass(frozen=True)
class Phases:
    """Phase ``j`` starts at event position ``start[j]`` (rising) and is of ``kind[j]``
    (:data:`PHASE_F`, :data:`PHASE_B`, :data:`PHASE_G`)."""

    start: np.ndarray
    kind: np.ndarray

    @property
    def count(self) -> int:
        return int(self.start.size)

    def has(self, kind: int) -> bool:
        return bool((self.kind == kind).any())

    def index_at(self, positions: np.ndarray) -> np.ndarray:
        """The phase each event position falls in (-1: before the first phase), as int32
        (a block's worth of phase numbers: half the bytes of int64, issue 34)."""
        found = np.searchsorted(self.start, positions, side="right")
        found -= 1
        return found.astype(np.int32)

    def next_of(self, kind: int) -> np.ndarray:
        """``out[j + 1]``: the first phase of ``kind`` after phase ``j`` (j from -1), or
        ``count`` where none follows."""
        n = self.count
        of_kind = np.append(np.flatnonzero(self.kind == kind), n)
        after = np.searchsorted(of_kind, np.arange(-1, n), side="right")
        return of_kind[np.minimum(after, of_kind.size - 1)].astype(np.int32)

    def next_training_forward(self) -> np.ndarray:
        """Like :meth:`next_of` for the forwards a backward follows (training steps'; an
        evaluation's forward is not one): ``out[j + 1]`` the first after phase ``j``.
        Without any (inference), every forward."""
        n = self.count
        forward = np.flatnonzero(self.kind == PHASE_F)
        if forward.size == 0:
            return self.next_of(PHASE_F)
        following = np.append(self.kind[forward[:-1] + 1] if forward.size else [],
                              self.kind[forward[-1] + 1] if forward[-1] + 1 < n else -1)
        training = forward[following == PHASE_B]
        if training.size == 0:
            return self.next_of(PHASE_F)
        of_kind = np.append(training, n)
        after = np.searchsorted(of_kind, np.arange(-1, n), side="right")
        return of_kind[np.minimum(after, of_kind.size - 1)].astype(np.int32)

    def start_or(self, index: np.ndarray, never: int) -> np.ndarray:
        """The start of phase ``index``, ``never`` where the index is past the last."""
        padded = np.append(self.start, never)
        return padded[np.clip(index, 0, self.count)]


def resolve_kinds(kinds: np.ndarray) -> np.ndarray:
    """The allocations' kinds with the two that depend on the capture settled: no stack is
    backward where the capture records stacks and shows forward passes (else the user's
    own); the user's ``step`` is the optimizer only where the capture has backward
    passes."""
    kinds = kinds.copy()
    no_stack = kinds == NO_STACK
    records_stacks = no_stack.mean() < MAX_NO_STACK_SHARE if kinds.size else False
    if (kinds == FORWARD).any() and records_stacks:
        kinds[no_stack] = BACKWARD
    else:
        kinds[no_stack] = NEUTRAL
    has_backward = (kinds == BACKWARD).any()
    kinds[kinds == STEP] = OPTIMIZER if has_backward else NEUTRAL
    return kinds


def find_phases(positions: np.ndarray, kinds: np.ndarray) -> Phases | None:
    """The phases of the allocations at event ``positions`` (rising) of ``kinds``
    (resolved: :func:`resolve_kinds`); None where no forward or backward allocation
    shows the loop's shape."""
    if positions.size == 0 or not np.isin(kinds, (FORWARD, BACKWARD)).any():
        return None
    mapped = np.full(kinds.size, _PENDING, dtype=np.int64)
    mapped[kinds == FORWARD] = PHASE_F
    mapped[kinds == BACKWARD] = PHASE_B
    mapped[np.isin(kinds, (OPTIMIZER, MODULE, DATA))] = PHASE_G
    starts = np.flatnonzero(np.diff(mapped, prepend=-1) != 0)
    run_kind = mapped[starts]
    pending = np.flatnonzero(run_kind == _PENDING)
    if pending.size:
        before = np.where(pending > 0, run_kind[np.maximum(pending - 1, 0)], -1)
        after = np.where(pending + 1 < run_kind.size,
                         run_kind[np.minimum(pending + 1, run_kind.size - 1)], -1)
        run_kind[pending] = np.where((before == PHASE_F) & (after == PHASE_B), PHASE_F,
                                     PHASE_G)
    keep = np.diff(run_kind, prepend=-1) != 0
    return Phases(start=positions[starts[keep]].astype(np.int64),
                  kind=run_kind[keep].astype(np.int64))


__all__ = ["PHASE_B", "PHASE_F", "PHASE_G", "PHASE_NAMES", "Phases", "find_phases",
           "resolve_kinds"]
