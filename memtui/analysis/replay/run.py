"""Feed one device of a capture through :class:`CachingAllocator`, event by event.

The replay starts from the pool memtui reconstructs just before the device's first event
(:func:`memtui.analysis.layout.pool_state.state_at_seq`: the dump walked back; the mapped
ranges of an expandable segment laid into one segment per stream with unmapped holes
between them, as the trace's maps and unmaps leave them), then takes the
trace in order: ``alloc`` -> ``malloc(requested size, stream)``, ``free_requested`` -> the
block waits, ``free`` (free_completed) -> ``free_block``, and each run of recorded
``segment_free``/``segment_unmap`` events -> ``emptyCache`` where the program called it
(``release_cached_blocks``).  The recorded ``segment_alloc`` addresses are handed to the
replay's cudaMalloc of the same size, and a new expandable segment's base is the malloc's
first recorded ``segment_map`` (addresses come from the driver, not from the allocator's
rules).  An alloc whose recorded address lies in a private pool's segment (the dump's
``segment_pool_id``) is served from that pool: the trace does not mark a CUDA graph
capture, the address says where the program's capture put it.

A run of segment frees is the program's ``torch.cuda.empty_cache()`` or malloc's own retry
after a failed cudaMalloc (``release_cached_blocks`` either way).  Under the recorded
settings (the proof) both are replayed where they happened.  Under changed settings only
the program's calls are: a retry is the device running out, which the replay decides
from its capacity.  The call stack says which (``emptyCache`` or ``malloc`` in a frame);
without one, a run followed by a cudaMalloc and its alloc is a retry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from memtui.analysis.layout.pool_state import state_at_seq
from memtui.analysis.replay.allocator import (
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    Block,
    CachingAllocator,
    OutOfMemory,
    round_size,
)
from memtui.analysis.replay.settings import Settings
from memtui.model import ACTION_DTYPE, ACTIONS, MemoryTrace

RELEASES = ("segment_free", "segment_unmap")
SEGMENT_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")


class ReplayError(ValueError):
    """The trace cannot be replayed past an event (a broken or hand-made capture)."""


@dataclass
class SegmentLog:
    """Segment events, each owned by the trace event that caused it (``owner``: the
    alloc whose malloc made a cudaMalloc, or the first event of a release run)."""

    owner: list[int] = field(default_factory=list)
    action: list[str] = field(default_factory=list)
    addr: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)

    def add(self, owner: int, action: str, addr: int, size: int) -> None:
        self.owner.append(owner)
        self.action.append(action)
        self.addr.append(addr)
        self.size.append(size)

    def __len__(self) -> int:
        return len(self.owner)


@dataclass
class ReplayRun:
    """What a replay did on one device: per trace event (in ``events`` order) the address
    it gave an alloc (0 elsewhere) and the reserved bytes after the event; the segment
    events it made; the OOMs it met; where it could not follow the trace."""

    device: str
    settings: Settings
    events: pl.DataFrame  # the device's events (t, seq, action, addr, size, stream, ...)
    replay_addr: np.ndarray  # uint64 per event
    reserved: np.ndarray  # int64 per event: the replay's reserved after it
    #: at the reserved peak (its first time, after the event that reached it): the free
    #: bytes split as memtui measures them (CachingAllocator.free_split)
    fragmented_at_peak: int
    cached_at_peak: int
    largest_gap_at_peak: int
    segments: SegmentLog
    ooms: list[tuple[int, int, str]]  # (event index, bytes asked, "caused"/"avoided"/"kept")
    start_reserved: int
    unknown_frees: int  # frees of blocks the replay never saw
    orphans: int  # blocks alive at the start outside any segment
    release_runs: list[tuple[int, str]]  # (event index, "empty_cache"/"retry")
    #: the replay's allocator just before event ``i`` (a second replay, for explanations)
    pool_before: Callable[[int], CachingAllocator] | None = None

    @property
    def reserved_at_end(self) -> int:
        return int(self.reserved[-1]) if self.reserved.size else self.start_reserved

    def count(self, action: str) -> int:
        return sum(1 for a in self.segments.action if a == action)


def replay_device(trace: MemoryTrace, device: str, settings: Settings,
                  replay_retries: bool = True) -> ReplayRun:
    """Replay ``device``'s events under ``settings``.  ``replay_retries``: also call
    emptyCache where the recording's malloc retried after a failed cudaMalloc (the proof;
    a prediction leaves those to the capacity)."""
    events = trace.device_events(device)
    # the allocator's own order: the source's numbering where it kept one (``row``)
    events = events.sort("row" if "row" in events.columns else "seq")
    allocator = CachingAllocator(settings)
    blocks, orphans = _start_pool(trace, device, events, allocator)
    start_reserved = allocator.reserved
    releases = release_runs(trace, events)
    routes = private_routes(trace, device)
    run = ReplayLoop(allocator, blocks, events, releases, replay_retries, routes)
    run.go()

    def pool_before(index: int) -> CachingAllocator:
        again = CachingAllocator(settings)
        again_blocks, _ = _start_pool(trace, device, events, again)
        ReplayLoop(again, again_blocks, events, releases, replay_retries, routes).go(stop=index)
        return again

    return ReplayRun(
        device=device, settings=settings, events=events, replay_addr=run.replay_addr,
        reserved=run.reserved, fragmented_at_peak=run.at_peak[0],
        cached_at_peak=run.at_peak[1], largest_gap_at_peak=run.at_peak[2],
        segments=run.log, ooms=run.ooms,
        start_reserved=start_reserved, unknown_frees=run.unknown_frees, orphans=orphans,
        release_runs=[(int(i), kind) for i, kind in releases.items()],
        pool_before=pool_before,
    )


def _start_pool(trace: MemoryTrace, device: str, events: pl.DataFrame,
                allocator: CachingAllocator) -> tuple[dict[int, Block], int]:
    """Lay the pool alive before the first event into ``allocator``: each segment with its
    live blocks (allocated, or pending free: either way not reusable yet).

    The mapped ranges of an expandable segment (the pieces the source found mapped before
    the history began, :mod:`memtui.sources.torch_snapshot.mapped`) go into one segment
    per stream, pool and size class, the holes between them unmapped, as PyTorch keeps
    one ``ExpandableSegment`` per stream: the replay then maps into the lowest unmapped
    hole first, as the allocator does."""
    first_seq = int(events["seq"][0]) if events.height else 0
    state = state_at_seq(trace, device, first_seq - 1)
    segments = trace.device_segments(device)
    seg_ids = segments["segment_id"].to_numpy()
    kinds = dict(zip(seg_ids.tolist(), segments["kind"].to_list(), strict=True))
    pool_ids = dict(zip(seg_ids.tolist(), segments["pool_id"].to_list(), strict=True))
    streams = dict(zip(seg_ids.tolist(), segments["stream"].fill_null(0).to_list(),
                       strict=True))
    blocks: dict[int, Block] = {}
    orphans = state.orphans  # live blocks in no segment, and those that cannot be laid
    expandable: dict[tuple, list[tuple[int, int, list, np.ndarray]]] = {}
    for index in range(state.seg_id.size):
        rows = state.blocks_of_segment(index)
        seg_id = int(state.seg_id[index])
        seg_addr, seg_size = int(state.seg_addr[index]), int(state.seg_size[index])
        # a segment known only by its segment_free has no kind: get_allocation_size makes
        # every small segment kSmallBuffer (2 MiB) and every large one 10 MiB or more
        kind = kinds.get(seg_id)
        small = kind == "small" or (kind is None and seg_size == K_SMALL_BUFFER)
        if kind == "expandable":  # small-pool blocks are 1 MiB at most, large ones more
            small = int(state.blk_size[rows[0]]) <= K_SMALL_SIZE if rows.size \
                else seg_size % K_LARGE_BUFFER != 0
        ranges = _allocator_sizes([(int(state.blk_addr[r]), int(state.blk_size[r]))
                                   for r in rows], seg_addr + seg_size, small,
                                  allocator.settings)
        stream, pool_id = int(streams.get(seg_id, 0)), _pool_of_pieces(state, index, pool_ids)
        if kind == "expandable":
            expandable.setdefault((stream, pool_id, small), []).append(
                (seg_addr, seg_size, ranges, rows))
            continue
        made = allocator.add_segment(seg_addr, seg_size, stream, small, ranges,
                                     pool_id=pool_id)
        orphans += _keep_blocks(state, rows, made, blocks, allocator)
    for (stream, pool_id, small), mapped in expandable.items():
        made_all = allocator.add_expandable_segment(
            [(addr, size, ranges) for addr, size, ranges, _ in mapped], stream, small,
            pool_id)
        for (_, _, _, rows), made in zip(mapped, made_all, strict=True):
            orphans += _keep_blocks(state, rows, made, blocks, allocator)
    return blocks, orphans


def _pool_of_pieces(state, index: int, pool_ids: dict) -> str | None:
    """The pool of segment ``index`` of ``state``: the first its pieces name (an
    expandable segment's range unmapped before the dump names none)."""
    pieces = state.piece_id[state.piece_segment == index].tolist()
    for piece in pieces:
        if pool_ids.get(piece) is not None:
            return pool_ids[piece]
    return None


def _keep_blocks(state, rows: np.ndarray, made: list[Block | None],
                 blocks: dict[int, Block], allocator: CachingAllocator) -> int:
    """Keep the blocks the allocator laid for ``rows`` (pending ones marked); how many
    could not be laid."""
    lost = 0
    for r, block in zip(rows, made, strict=True):
        if block is None:
            lost += 1
            continue
        blocks[int(state.blk_id[r])] = block
        if state.blk_pending[r]:
            block.allocated, block.pending = False, True
            allocator.pending.add(block)
    return lost


def _allocator_sizes(ranges: list[tuple[int, int]], segment_end: int, small: bool,
                    settings: Settings) -> list[tuple[int, int]]:
    """The blocks' sizes as the allocator had them.  A block alive before the trace and
    freed in it is known only by its trace events, which carry the requested size; the
    allocator's block was at least ``round_size`` of it, and the gap after it is part of
    it where no free block could be that small (should_split keeps a remainder only of
    512 B or more in a small segment, more than 1 MiB in a large one unless segments are
    expandable)."""
    out = []
    for i, (addr, size) in enumerate(ranges):
        end = ranges[i + 1][0] if i + 1 < len(ranges) else segment_end
        size = min(max(size, round_size(size, settings)), end - addr)
        gap = end - addr - size
        tiny = gap < K_MIN_BLOCK_SIZE if small or settings.expandable_segments \
            else gap <= K_SMALL_SIZE
        if gap > 0 and tiny:
            size += gap
        out.append((addr, size))
    return out


@dataclass(frozen=True)
class PrivateRoutes:
    """Where the recording put allocs into a private pool (a CUDA graph's or a MemPool's):
    the segments the dump names with a segment_pool_id other than (0, 0).  The trace does
    not mark when a capture began, so an alloc goes to the pool of the segment holding
    its recorded address (the program's choice, the same under any setting)."""

    start: np.ndarray
    end: np.ndarray
    pool_id: list[str]

    def pool_of(self, addr: int) -> str | None:
        i = int(np.searchsorted(self.start, addr, side="right")) - 1
        return self.pool_id[i] if i >= 0 and addr < self.end[i] else None


def private_routes(trace: MemoryTrace, device: str) -> PrivateRoutes | None:
    segments = trace.device_segments(device).filter(
        pl.col("pool_id").is_not_null() & ~pl.col("pool_id").is_in(["0,0", ""])).sort("addr")
    if segments.is_empty():
        return None
    start = segments["addr"].to_numpy().astype(np.int64)
    return PrivateRoutes(start, start + segments["size"].to_numpy(),
                         segments["pool_id"].to_list())


def action_codes(events: pl.DataFrame) -> np.ndarray:
    """Each event's action as its code, its place in :data:`memtui.model.ACTIONS` (the
    physical codes of the model's Enum): compared without a string per event."""
    action = events["action"]
    if action.dtype != ACTION_DTYPE:
        action = action.cast(pl.String).cast(ACTION_DTYPE)
    return action.to_physical().to_numpy()


def is_action(codes: np.ndarray, names: tuple[str, ...] | str) -> np.ndarray:
    """Where ``codes`` (:func:`action_codes`) is one of the actions ``names``."""
    table = np.zeros(len(ACTIONS) + 1, dtype=bool)
    table[[ACTIONS.index(name) for name in ((names,) if isinstance(names, str) else names)]] \
        = True
    return table[np.minimum(codes, len(ACTIONS))]


def release_runs(trace: MemoryTrace, events: pl.DataFrame) -> dict[int, str]:
    """Event index of the first segment free of each run -> ``"empty_cache"`` (the
    program's call) or ``"retry"`` (malloc's own release after a failed cudaMalloc)."""
    codes = action_codes(events)
    is_release = is_action(codes, RELEASES)
    starts = np.flatnonzero(is_release & ~np.concatenate([[False], is_release[:-1]]))
    if not starts.size:
        return {}
    by_stack = _release_kind_by_stack(trace, events, starts)
    goes_on = is_release | is_action(codes, "free")
    grows = is_action(codes, ("segment_alloc", "segment_map"))
    out: dict[int, str] = {}
    for start in starts.tolist():
        kind = by_stack.get(start)
        if kind is None:
            end = start
            while end < codes.size and goes_on[end]:
                end += 1
            followed = end < codes.size and bool(grows[end])
            kind = "retry" if followed else "empty_cache"
        out[start] = kind
    return out


def _release_kind_by_stack(trace: MemoryTrace, events: pl.DataFrame,
                           starts: np.ndarray) -> dict[int, str]:
    stack_ids = events["stack_id"].to_numpy()[starts] if "stack_id" in events.columns else []
    if not len(stack_ids) or trace.stacks.is_empty():
        return {}
    frame_names = dict(zip(trace.frames["frame_id"].to_list(),
                           trace.frames["name"].fill_null("").to_list(), strict=True))
    stack_frames = dict(zip(trace.stacks["stack_id"].to_list(),
                            trace.stacks["frame_ids"].to_list(), strict=True))
    out = {}
    for start, stack_id in zip(starts.tolist(), stack_ids.tolist(), strict=True):
        names = [frame_names.get(f, "") for f in stack_frames.get(stack_id) or []]
        if any("emptyCache" in n or n == "empty_cache" for n in names):
            out[start] = "empty_cache"
        elif any("::malloc(" in n for n in names):
            out[start] = "retry"
    return out


class ReplayLoop:
    """The per-event loop (a sequential simulation): the compiled core's
    (:mod:`.core`, where built) or one Python step per event (the reference)."""

    def __init__(self, allocator: CachingAllocator, blocks: dict[int, Block],
                 events: pl.DataFrame, releases: dict[int, str], replay_retries: bool,
                 routes: PrivateRoutes | None = None) -> None:
        self.allocator = allocator
        self.routes = routes
        self.blocks = blocks
        self.releases = releases
        self.replay_retries = replay_retries
        self.events = events
        n = events.height
        self.replay_addr = np.zeros(n, dtype=np.uint64)
        self.reserved = np.zeros(n, dtype=np.int64)
        self.log = SegmentLog()
        self.ooms: list[tuple[int, int, str]] = []
        self.unknown_frees = 0
        self.failed: set[int] = set()
        # the peak over the trace's events (the pool before the first is the recorded one)
        self.peak = -1
        self.at_peak = (0, 0, 0)  # free_split() at the reserved peak

    def go(self, stop: int | None = None) -> None:
        """Replay every event (or those before event ``stop``): in the compiled core where
        it takes the run, else in Python."""
        if stop is None:
            from memtui.analysis.replay.core import run_compiled

            if run_compiled(self):
                return
        self._read_events()
        allocator = self.allocator
        seg_events = allocator.segment_events
        handlers = {"alloc": self._alloc, "free_requested": self._free_requested,
                    "free": self._free, "segment_alloc": self._hint,
                    "segment_map": self._map_hint, "oom": self._oom}
        releases = {i: kind for i, kind in self.releases.items()
                    if self.replay_retries or kind != "retry"}
        reserved = [0] * len(self.actions)
        logged = len(seg_events)
        for i, action in enumerate(self.actions[:stop]):
            handler = handlers.get(action)
            try:
                if handler is not None:
                    handler(i)
                elif i in releases:
                    allocator.empty_cache()
            except (KeyError, ValueError, IndexError, AttributeError) as err:
                # a trace no allocator could have written (overlapping blocks, a block
                # freed twice): said, not raised
                raise ReplayError(f"event {i} ({action}): the trace contradicts the pool "
                                  f"the replay holds ({type(err).__name__})") from None
            if len(seg_events) != logged:
                for event in seg_events[logged:]:
                    self.log.add(i, event.action, event.addr, event.size)
                logged = len(seg_events)
                if allocator.reserved > self.peak:
                    self.peak = allocator.reserved
                    self.at_peak = allocator.free_split()
            elif self.peak < 0:
                self.peak = allocator.reserved
                self.at_peak = allocator.free_split()
            reserved[i] = allocator.reserved
        self.reserved[:] = reserved

    def _read_events(self) -> None:
        events = self.events
        self.actions = events["action"].cast(pl.String).to_list()
        # Python lists: one item read per event, cheaper than numpy scalars
        self.addr = events["addr"].fill_null(0).to_list()
        self.size = events["size"].fill_null(0).to_list()
        self.stream = events["stream"].fill_null(0).to_list()
        self.block_id = events["block_id"].fill_null(-1).to_list()

    def _alloc(self, i: int) -> None:
        pool_id = self.routes.pool_of(self.addr[i]) if self.routes else None
        try:
            block = self.allocator.malloc(self.size[i], self.stream[i], pool_id)
        except OutOfMemory:
            self.ooms.append((i, self.size[i], "caused"))
            self.failed.add(self.block_id[i])
            return
        self.blocks[self.block_id[i]] = block
        self.replay_addr[i] = block.addr
        # the hints belong to this malloc
        self.allocator.address_hints.clear()
        self.allocator.map_hints.clear()

    def _free_requested(self, i: int) -> None:
        block = self.blocks.get(self.block_id[i])
        if block is None:
            self.unknown_frees += self.block_id[i] not in self.failed
            return
        block.allocated, block.pending = False, True
        self.allocator.pending.add(block)

    def _free(self, i: int) -> None:
        block = self.blocks.pop(self.block_id[i], None)
        if block is None:
            self.unknown_frees += self.block_id[i] not in self.failed
            return
        self.allocator.free_block(block)

    def _map_hint(self, i: int) -> None:
        self.allocator.map_hints.append(self.addr[i])

    def _hint(self, i: int) -> None:
        self.allocator.address_hints.append((self.size[i], self.addr[i]))

    def _oom(self, i: int) -> None:
        """A recorded OOM: under a setting with a capacity the request is tried again
        (served: avoided; what the program did after a served request is unknown, so the
        block goes back at once)."""
        if self.allocator.settings.capacity is None:
            self.ooms.append((i, int(self.size[i]), "kept"))
            return
        try:
            block = self.allocator.malloc(int(self.size[i]), int(self.stream[i]))
        except OutOfMemory:
            self.ooms.append((i, int(self.size[i]), "kept"))
            return
        self.ooms.append((i, int(self.size[i]), "avoided"))
        self.allocator.free_block(block)
