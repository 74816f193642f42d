"""Bytes by call stack as a tree, root first: what the Stacks screen draws as a flame tree.

:class:`StackTree` interns every stack of a trace once into a trie (root = outermost
frame), dropping the frames memory_viz hides (the unwinder, CPython's eval loop, the
dispatcher; see :data:`OMIT_FUNCTIONS`).  Each stack is then a path of trie nodes, kept
as flat ``(stack, node)`` pairs, so the bytes of every node for any set of blocks are one
``bincount``: bytes per stack, spread over the paths.  Blocks without a stack hang under
one "(no stack recorded)" node.  The bytes of a level that no block explains (alive before
the capture, in no operator: :mod:`memtui.analysis.timeline.attribution`) hang under the root as
nodes of their own (``figures(..., rest=...)``), so the root is the level and every share
has it as denominator; ghost blocks (alive before the capture began) are counted there too
when the caller marks them (``BEFORE_STACK``), as the peak finding names them.

Three figures a screen asks for (:func:`block_rows_for`): the blocks live at a time
(the cursor, or the peak of allocated), or the blocks allocated during a window.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.layout.pool_state import block_rows_at_event
from memtui.analysis.stacks import callstack
from memtui.analysis.timeline.attribution import BEFORE_CAPTURE, REMAINDER_LABELS, Remainder
from memtui.analysis.timeline.levels import allocated_level
from memtui.analysis.timeline.live import DeviceIndex, cached
from memtui.arrays import unique_sorted
from memtui.model import MemoryTrace

#: Frames memory_viz leaves out of every stack it prints (MemoryViz.js ``frameFilter``).
OMIT_FUNCTIONS = (
    "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
    "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
)
OMIT_FILENAMES = (
    "core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
    "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
    "cpython/abstract.h",
)

ROOT = 0
NO_STACK_FRAME = -2  # frame id of the "(no stack recorded)" node
REMAINDER_FRAME = -3  # frame ids -3, -4, ...: the remainder rows, in REMAINDER_LABELS' order
#: The stack id :meth:`StackTree.figures` counts under "alive before the capture" (ghosts).
BEFORE_STACK = -2
MODES = ("cursor", "peak", "window")


def frame_keep_mask(frames: pl.DataFrame) -> np.ndarray:
    """Per row of ``frames``: True for the frames memory_viz shows."""
    name = pl.col("name").fill_null("")
    filename = pl.col("filename").fill_null("")
    omit = pl.lit(False)
    for text in OMIT_FUNCTIONS:
        omit = omit | name.str.contains(text, literal=True)
    for text in OMIT_FILENAMES:
        omit = omit | filename.str.contains(text, literal=True)
    return frames.select(keep=~omit)["keep"].to_numpy()


def user_frame_mask(frames: pl.DataFrame) -> np.ndarray:
    """Per row of ``frames``: True for the user's own Python frames (a .py file outside
    torch, installed libraries and the interpreter's machinery; the rule of
    :mod:`memtui.analysis.stacks.callstack`)."""
    return callstack.user_frame_mask(frames)


def frame_label(name: str | None, filename: str | None, line: int | None) -> str:
    """``name  file.py:12`` with the file's base name (either slash)."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    where = f"{base}:{line}" if base and line else base
    return f"{name or '?'}  {where}".rstrip()


def format_stack(trace: MemoryTrace, stack_id: int | None, limit: int = 50) -> list[str]:
    """The frames of ``stack_id``, innermost first, as memory_viz prints them
    (``file:line:name``), hidden frames and the allocator's and unwinder's internals
    (:func:`memtui.analysis.stacks.callstack.internal_frame`) left out and repeats elided.
    Kept per trace (the Slice Detail asks again on every cursor move)."""
    return list(cached(trace, ("format_stack", stack_id, limit),
                       lambda: tuple(_format_stack(trace, stack_id, limit))))


def _format_stack(trace: MemoryTrace, stack_id: int | None, limit: int) -> list[str]:
    if stack_id is None or stack_id < 0:
        return ["(no stack recorded: allocated before recording began, or recorded "
                "without context)"]
    row = trace.stacks.filter(pl.col("stack_id") == stack_id)
    if row.is_empty():
        return ["(unknown stack)"]
    ids = row["frame_ids"][0].to_list()
    frames = trace.frames.filter(pl.col("frame_id").is_in(ids))
    shown = frames.select(keep=~callstack.internal_frame().fill_null(False))["keep"]
    keep = dict(zip(frames["frame_id"].to_list(), shown.to_list(), strict=True))
    text = {
        r["frame_id"]: f"{r['filename']}:{r['line']}:{r['name']}"
        for r in frames.iter_rows(named=True)
    }
    lines: list[str] = []
    for frame_id in ids:
        if not keep.get(frame_id, True):
            continue
        line = text.get(frame_id, "?")
        if lines and lines[-1] == line:
            continue
        lines.append(line)
        if len(lines) >= limit:
            lines.append("...")
            break
    return lines or ["(every frame is hidden: C++ internals only)"]


@dataclass(frozen=True)
class TreeFigures:
    """Bytes and block counts per node for one set of blocks; ``self_bytes``: the bytes
    of blocks whose stack ends at the node (total minus the children's)."""

    bytes: np.ndarray
    blocks: np.ndarray
    self_bytes: np.ndarray

    @property
    def total(self) -> int:
        return int(self.bytes[ROOT])


class StackTree:
    """The trie of every stack of a trace (see the module docstring)."""

    def __init__(self, trace: MemoryTrace, user_only: bool = False) -> None:
        """``user_only``: leave out every frame but the user's own Python ones
        (:func:`user_frame_mask`): interpreter, torch-internal, library and C++ frames.
        A stack without one is one node named as every screen names it
        (:func:`memtui.analysis.stacks.callstack.stack_top_frames`: a library's frame, or for
        stacks recorded only in C++ the forward line or the autograd node)."""
        self.trace = trace
        self.user_only = user_only
        #: frame ids past the trace's own that stand for a C++-only stack's name
        self.named: dict[int, str] = {}
        frames = trace.frames
        self.frame_name = dict(zip(frames["frame_id"].to_list(), frames["name"].to_list(),
                                   strict=True))
        self.frame_file = dict(zip(frames["frame_id"].to_list(),
                                   frames["filename"].to_list(), strict=True))
        self.frame_line = dict(zip(frames["frame_id"].to_list(), frames["line"].to_list(),
                                   strict=True))
        self._build(trace.stacks, frames)

    # -- building ---------------------------------------------------------------------------

    def _build(self, stacks: pl.DataFrame, frames: pl.DataFrame) -> None:
        keep = frame_keep_mask(frames)
        steps = _steps(stacks, frames.filter(pl.Series(~keep))["frame_id"].to_list())
        if self.user_only:  # a stack without a user frame: one node, named by the rule
            hidden = frames.filter(pl.Series(~(keep & user_frame_mask(frames))))["frame_id"]
            user = _steps(stacks, hidden.to_list())
            rest = self._named_steps(stacks.filter(
                ~pl.col("stack_id").is_in(user["stack_id"].unique().implode())), frames)
            steps = pl.concat([user, rest.select(user.columns)])
        n_stacks = int(stacks["stack_id"].max()) + 1 if stacks.height else 0
        # node 0: root; node 1: "(no stack recorded)"
        parents, frame_of, depths = [np.array([-1, ROOT])], [np.array([-1, NO_STACK_FRAME])], [
            np.array([0, 1])]
        next_id = 2
        stack_node = np.zeros(n_stacks, dtype=np.int64)  # current node of each stack's walk
        pairs_stack, pairs_node = [], []
        max_depth = int(steps["depth"].max() or 0) if steps.height else 0
        for depth in range(1, max_depth + 1):
            level = steps.filter(pl.col("depth") == depth)
            sid = level["stack_id"].to_numpy().astype(np.int64)
            fid = level["frame_id"].to_numpy().astype(np.int64)
            parent = stack_node[sid]
            key = parent * (1 << 31) + fid
            unique, inverse = np.unique(key, return_inverse=True)
            node = next_id + inverse
            parents.append(unique >> 31)
            frame_of.append(unique & ((1 << 31) - 1))
            depths.append(np.full(unique.size, depth + 0, dtype=np.int64))
            next_id += unique.size
            stack_node[sid] = node
            pairs_stack.append(sid)
            pairs_node.append(node)
        rest = len(REMAINDER_LABELS)  # the remainder nodes, under the root, last
        self.remainder_node = {label: next_id + i for i, label in enumerate(REMAINDER_LABELS)}
        parents.append(np.full(rest, ROOT))
        frame_of.append(REMAINDER_FRAME - np.arange(rest))
        depths.append(np.ones(rest, dtype=np.int64))
        self.parent = np.concatenate(parents).astype(np.int64)
        self.frame = np.concatenate(frame_of).astype(np.int64)
        self.depth = np.concatenate(depths).astype(np.int64)
        self.size = int(self.parent.size)
        # every stack passes through the root; stacks of hidden frames only stop there
        all_stacks = np.arange(n_stacks, dtype=np.int64)
        self.pair_stack = np.concatenate([all_stacks, *pairs_stack]).astype(np.int64)
        self.pair_node = np.concatenate([np.zeros(n_stacks, dtype=np.int64), *pairs_node])
        self.n_stacks = n_stacks
        order = np.argsort(self.parent[1:], kind="stable") + 1
        self.child_order = order
        self.child_start = np.searchsorted(self.parent[order], np.arange(self.size), "left")
        self.child_end = np.searchsorted(self.parent[order], np.arange(self.size), "right")
        self._labels: dict[int, str] = {}

    def _named_steps(self, stacks: pl.DataFrame, frames: pl.DataFrame) -> pl.DataFrame:
        """(stack_id, frame_id, depth 1) of stacks without a user frame: the frame that
        names them, or for names that are no frame (an autograd node, a forward line) a
        frame id past the trace's own, labelled in :attr:`named`."""
        tops = callstack.stack_top_frames(dataclasses.replace(self.trace, stacks=stacks))
        synthetic = ~pl.col("kind").is_in(["user", "library", "python", "frame", "native"])
        labels = tops.filter(synthetic)["top"].unique(maintain_order=True).to_list()
        first = int(frames["frame_id"].max() or 0) + 1 if frames.height else 0
        self.named = {first + k: label for k, label in enumerate(labels)}
        ids = {label: frame for frame, label in self.named.items()}
        return tops.select(
            pl.col("stack_id").cast(pl.Int32),
            frame_id=pl.when(synthetic).then(
                pl.col("top").replace_strict(ids, default=None, return_dtype=pl.Int64))
            .otherwise(pl.col("frame_id").cast(pl.Int64)).cast(pl.Int32),
            depth=pl.lit(1, dtype=pl.Int32),
        ).filter(pl.col("frame_id").is_not_null())

    # -- figures ------------------------------------------------------------------------

    def figures(self, stack_ids: np.ndarray, sizes: np.ndarray,
                rest: list[Remainder] | tuple = ()) -> TreeFigures:
        """Bytes and block counts per node for blocks with these stacks (-1: none;
        ``BEFORE_STACK``: a ghost, counted under "alive before the capture"), and the named
        bytes of the level no block explains (``rest``), each on its own node."""
        stack_ids = np.asarray(stack_ids, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.float64)
        before = stack_ids == BEFORE_STACK
        known = (stack_ids >= 0) & (stack_ids < self.n_stacks)
        per_stack = np.bincount(stack_ids[known], weights=sizes[known], minlength=self.n_stacks)
        count_stack = np.bincount(stack_ids[known], minlength=self.n_stacks).astype(np.float64)
        weights = per_stack[self.pair_stack]
        node_bytes = np.bincount(self.pair_node, weights=weights, minlength=self.size)
        node_blocks = np.bincount(self.pair_node, weights=count_stack[self.pair_stack],
                                  minlength=self.size)
        unknown_bytes = float(sizes[~known & ~before].sum())
        unknown_count = float((~known & ~before).sum())
        if before.any():
            node = self.remainder_node[BEFORE_CAPTURE]
            node_bytes[ROOT] += float(sizes[before].sum())
            node_bytes[node] += float(sizes[before].sum())
            node_blocks[ROOT] += float(before.sum())
            node_blocks[node] += float(before.sum())
        node_bytes[ROOT] += unknown_bytes
        node_bytes[1] += unknown_bytes
        for row in rest:
            node_bytes[self.remainder_node[row.label]] += row.bytes
            node_bytes[ROOT] += row.bytes
        node_blocks[ROOT] += unknown_count
        node_blocks[1] += unknown_count
        node_bytes = np.rint(node_bytes).astype(np.int64)
        below = np.bincount(self.parent[1:], weights=node_bytes[1:], minlength=self.size)
        return TreeFigures(bytes=node_bytes, blocks=np.rint(node_blocks).astype(np.int64),
                           self_bytes=node_bytes - np.rint(below).astype(np.int64))

    def children(self, node: int, figures: TreeFigures | None = None) -> np.ndarray:
        """Children of ``node``; with ``figures``, those holding bytes, largest first."""
        kids = self.child_order[self.child_start[node]:self.child_end[node]]
        if figures is None:
            return kids
        held = figures.bytes[kids]
        kids = kids[(held > 0) | ((held < 0) & (self.frame[kids] <= REMAINDER_FRAME))]
        return kids[np.argsort(-figures.bytes[kids], kind="stable")]

    def label(self, node: int) -> str:
        if node == ROOT:
            return "all"
        cached = self._labels.get(node)
        if cached is None:
            frame = int(self.frame[node])
            if frame == NO_STACK_FRAME:
                cached = "(no stack recorded)"
            elif frame in self.named:
                cached = self.named[frame]
            elif frame <= REMAINDER_FRAME:
                cached = REMAINDER_LABELS[REMAINDER_FRAME - frame]
            else:
                cached = frame_label(self.frame_name.get(frame), self.frame_file.get(frame),
                                     self.frame_line.get(frame))
            self._labels[node] = cached
        return cached

    def ancestors(self, node: int) -> list[int]:
        """Nodes from the root down to ``node``'s parent."""
        path = []
        node = int(self.parent[node])
        while node >= 0:
            path.append(node)
            node = int(self.parent[node])
        return path[::-1]

    def search(self, text: str) -> np.ndarray:
        """Nodes whose frame name or file contains ``text`` (case-insensitive)."""
        text = text.strip().lower()
        if not text:
            return np.zeros(0, dtype=np.int64)
        frames = self.trace.frames
        hit = frames.filter(
            pl.col("name").fill_null("").str.to_lowercase().str.contains(text, literal=True)
            | pl.col("filename").fill_null("").str.to_lowercase().str.contains(text, literal=True)
        )["frame_id"].to_numpy()
        hit = np.concatenate([hit, [frame for frame, label in self.named.items()
                                    if text in label.lower()]]).astype(np.int64)
        nodes = np.flatnonzero(np.isin(self.frame, hit))
        if text in "(no stack recorded)":
            nodes = np.concatenate([[1], nodes])
        return nodes

    def stacks_under(self, node: int) -> np.ndarray:
        """Stack ids whose path passes through ``node`` (every stack for the root)."""
        return unique_sorted(self.pair_stack[self.pair_node == node])

    def block_rows_under(self, node: int, index: DeviceIndex, rows: np.ndarray,
                         ghosts_apart: bool = False) -> np.ndarray:
        """Those of ``rows`` (of ``index``) whose stack passes through ``node``
        (``ghosts_apart``: the ghosts were counted under "alive before the capture")."""
        if node == ROOT:
            return rows
        stack = index.stack_id[rows]
        if node == 1:
            unknown = (stack < 0) | (stack >= self.n_stacks)
            return rows[unknown & ~index.ghost[rows]] if ghosts_apart else rows[unknown]
        if self.frame[node] <= REMAINDER_FRAME:  # ghosts, and bytes of the level in no block
            wanted = ghosts_apart and node == self.remainder_node[BEFORE_CAPTURE]
            return rows[index.ghost[rows]] if wanted else rows[:0]
        return rows[np.isin(stack, self.stacks_under(node))]


def _steps(stacks: pl.DataFrame, hidden: list[int]) -> pl.DataFrame:
    """(stack_id, frame_id, depth) of every shown frame of every stack, root first."""
    return (
        stacks.select("stack_id", "frame_ids")
        .with_columns(pl.col("frame_ids").list.reverse())
        .explode("frame_ids")
        .rename({"frame_ids": "frame_id"})
        .filter(pl.col("frame_id").is_not_null() & ~pl.col("frame_id").is_in(hidden))
        .with_columns(depth=pl.int_range(pl.len()).over("stack_id").cast(pl.Int32) + 1)
    )


def block_rows_for(
    trace: MemoryTrace, index: DeviceIndex, mode: str, t: int,
    window: tuple[int, int] | None = None, event: int | None = None,
) -> tuple[np.ndarray, int | None]:
    """Rows of ``index``'s blocks the tree counts, and the time they are taken at.

    ``cursor``: live just after the event at position ``event`` (exact by event order,
    as the status bar; :func:`~memtui.analysis.layout.pool_state.block_rows_at_event`), or at
    ``t`` without one; ``peak``: live at the peak of allocated(t); ``window``:
    allocated during ``window`` (the whole trace without one; the time is then None).
    """
    if mode == "peak":
        level = allocated_level(trace, index.device)
        _, at = level.peak()
        t = int(level.t[at]) if at >= 0 else t
        if at >= 1 and level.values.size == trace.device_events(index.device).height + 1:
            # one value per event: the peak is just after event ``at - 1`` (exact also
            # where a later event at the same time frees a block)
            return block_rows_at_event(trace, index.device, at - 1, t), t
        return index.blocks_at(t), t
    if mode == "window":
        t0, t1 = window if window is not None else (index.t_start, index.t_end)
        life = index.block_life
        lo = int(np.searchsorted(life.start, t0, side="left"))
        hi = int(np.searchsorted(life.start, t1, side="right"))
        return life.order[lo:hi], None
    if event is not None:
        return block_rows_at_event(trace, index.device, event, t), t
    return index.blocks_at(t), t
