"""The replay's compiled core: which loop runs a device's events, and the hand-over to it.

``_replay.c`` (built by setup.py where a C compiler was found) is the per-event loop of
:mod:`.run` with the allocator of :mod:`.allocator`, compiled: the same rules step for step,
about a hundred times faster.  The Python modules stay the reference: the start pool is laid
by :func:`.run._start_pool` into a Python :class:`~.allocator.CachingAllocator` whatever the
seeding rules, and :func:`run_compiled` hands that allocator's whole state over as flat
arrays (:func:`export_state`), runs the events and fills the Python loop's results.  It
returns False, and the Python loop runs instead, where the extension is missing,
``MEMTUI_PURE_PYTHON=1`` is set, a figure is beyond what the core takes (addresses from
2**62, sizes from 2**50), or the core met what the reference would treat its own way (a
block freed twice, a key already in a pool: ``last_fallback`` says why).  The two give
identical runs (tests/analysis/test_replay_core.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from memtui.analysis.replay.allocator import Block, BlockPool, CachingAllocator, Segment
from memtui.analysis.replay.compiled import REPLAY_CORE, compiled_replay
from memtui.analysis.replay.settings import NO_MAX_SPLIT
from memtui.model import ACTION_DTYPE

if TYPE_CHECKING:
    from memtui.analysis.replay.run import ReplayLoop

#: What the core takes: addresses below, sizes (and the capacity) of less magnitude.
ADDR_LIMIT = 1 << 62
SIZE_LIMIT = 1 << 50
#: The segment events the core logs, by its codes (run.py's SegmentLog.action).
LOG_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
OOM_KINDS = ("caused", "avoided", "kept")

#: Why the last run went to the Python reference (None: the core ran it).
last_fallback: str | None = None


def run_compiled(loop: ReplayLoop) -> bool:
    """Run ``loop``'s events in the core and fill its results; False (nothing changed)
    where the Python loop must run them (module docstring)."""
    global last_fallback
    core = REPLAY_CORE
    if core is None or not compiled_replay():
        last_fallback = "compiled replay off"
        return False
    try:
        events = event_arrays(loop)
        state = export_state(loop.allocator, loop.blocks,
                             loop.routes.pool_id if loop.routes is not None else [])
    except _Unfit as why:
        last_fallback = str(why)
        return False
    routes = event_routes(loop, events["addr"], state["private_ids"])
    low, id_map = _id_map(events["block_id"], loop.blocks, state["index"])
    if id_map is None:
        last_fallback = "block ids too far apart"
        return False
    try:
        out = core.run(state["blocks"], state["segments"], state["pools"],
                       state["pending"], state["hints"], state["map_hints"],
                       state["scalars"], state["divisions"], state["gc_threshold"],
                       events["action"], events["addr"], events["size"], events["stream"],
                       events["block_id"], routes, _releases(loop, events["action"].size),
                       low, id_map, np.zeros(id_map.size, dtype=np.uint8))
    except (ValueError, MemoryError) as err:
        last_fallback = str(err)
        return False
    reason, replay_addr, reserved, log, ooms, figures = out
    if reason is not None:
        last_fallback = reason
        return False
    last_fallback = None
    _fill(loop, replay_addr, reserved, log, ooms, figures)
    return True


class _Unfit(ValueError):
    """The run holds what the core does not take (the reason is the message)."""


def event_arrays(loop: ReplayLoop) -> dict[str, np.ndarray]:
    """The events' columns as the core reads them (nulls as the Python loop fills them)."""
    events = loop.events
    if events.schema["action"] != ACTION_DTYPE:
        raise _Unfit("actions not of the model's Enum")
    addr = events["addr"].fill_null(0).to_numpy()
    size = events["size"].fill_null(0).cast(pl.Int64).to_numpy()
    if addr.size and (int(addr.max()) >= ADDR_LIMIT or int(np.abs(size).max()) >= SIZE_LIMIT):
        raise _Unfit("addresses or sizes beyond the core's limits")
    return {
        "action": np.ascontiguousarray(events["action"].to_physical().to_numpy(),
                                       dtype=np.uint8),
        "addr": np.ascontiguousarray(addr, dtype=np.int64),
        "size": np.ascontiguousarray(size),
        "stream": np.ascontiguousarray(events["stream"].fill_null(0).to_numpy(),
                                       dtype=np.int64),
        "block_id": np.ascontiguousarray(events["block_id"].fill_null(-1).to_numpy(),
                                         dtype=np.int64),
    }


def event_routes(loop: ReplayLoop, addr: np.ndarray, private_ids: dict[str, int]) -> np.ndarray:
    """Each event's private pool pair (the pool of the segment holding the recorded
    address, :class:`.run.PrivateRoutes`), -1 for the device's own pools."""
    routes = np.full(addr.size, -1, dtype=np.int32)
    if loop.routes is None or not addr.size:
        return routes
    start, end = loop.routes.start, loop.routes.end
    holder = np.searchsorted(start, addr, side="right") - 1
    inside = (holder >= 0) & (addr < end[np.maximum(holder, 0)])
    pair = np.array([private_ids[pool_id] for pool_id in loop.routes.pool_id],
                    dtype=np.int32)
    routes[inside] = pair[holder[inside]]
    return routes


def _releases(loop: ReplayLoop, n: int) -> np.ndarray:
    """1 at the events where the loop calls emptyCache (the releases it replays)."""
    flags = np.zeros(n, dtype=np.uint8)
    at = [i for i, kind in loop.releases.items()
          if (loop.replay_retries or kind != "retry") and 0 <= i < n]
    flags[np.asarray(at, dtype=np.int64)] = 1
    return flags


def _id_map(block_id: np.ndarray, blocks: dict[int, Block],
            index: dict[int, int]) -> tuple[int, np.ndarray | None]:
    """The trace's block ids (those of the events and of the start pool) as offsets from the
    least: each id's block in the handed state, -1 where none; None where the ids are too
    far apart for a table."""
    keys = np.fromiter(blocks.keys(), dtype=np.int64, count=len(blocks))
    both = np.concatenate([block_id, keys]) if keys.size else block_id
    if not both.size:
        return 0, np.full(1, -1, dtype=np.int32)
    low, high = int(both.min()), int(both.max())
    if high - low + 1 > 4 * block_id.size + (1 << 20):
        return low, None
    table = np.full(high - low + 1, -1, dtype=np.int32)
    for key, block in blocks.items():
        table[key - low] = index[id(block)]
    return low, table


def export_state(allocator: CachingAllocator, by_id: dict[int, Block],
                 route_ids: list[str]) -> dict[str, Any]:
    """The allocator's whole state as the core's arrays (``_replay.c`` says each row's
    layout): every block reachable from a pool, the trace's block ids or the pending set
    (and their neighbours), every segment they lie in, the pools (also the private ones
    ``route_ids`` name, which the Python allocator makes on their first malloc), the
    hints."""
    pools: list[BlockPool] = [allocator.small, allocator.large]
    private_ids: dict[str, int] = {}
    for pool_id, pair in allocator.private.items():
        private_ids[pool_id] = len(private_ids)
        pools.extend(pair)
    pool_index = {id(pool): i for i, pool in enumerate(pools)}
    blocks = _reachable_blocks(pools, by_id, allocator)
    index = {id(block): i for i, block in enumerate(blocks)}
    segments: list[Segment] = list(allocator.segments.values())
    seen = {id(segment) for segment in segments}
    for block in blocks:
        if id(block.segment) not in seen:
            seen.add(id(block.segment))
            segments.append(block.segment)
    segment_index = {id(segment): i for i, segment in enumerate(segments)}
    trees = _tree_membership(pools)
    block_rows = [
        (b.addr, b.size, b.stream, pool_index.get(id(b.pool), -1), segment_index[id(b.segment)],
         index[id(b.prev)] if b.prev is not None else -1,
         index[id(b.next)] if b.next is not None else -1,
         b.allocated, b.pending, b.mapped, trees.get(id(b), -1), b.gc_base)
        for b in blocks]
    segment_rows = [(s.addr, s.size, s.stream, s.page, s.is_small, s.expandable,
                     allocator.segments.get(s.addr) is s) for s in segments]
    pool_rows = [(p.is_small, p.private, p.get_free_blocks_call_count) for p in pools]
    for pool_id in route_ids:  # the pools the routes name, made as malloc would
        if pool_id not in private_ids:
            private_ids[pool_id] = len(private_ids)
            pool_rows += [(True, True, 0), (False, True, 0)]
    settings = allocator.settings
    capacity = settings.capacity
    if capacity is not None and not 0 <= capacity < SIZE_LIMIT:
        raise _Unfit("a capacity beyond the core's limits")
    if settings.max_split_size != NO_MAX_SPLIT and not 0 <= settings.max_split_size < \
            ADDR_LIMIT:
        raise _Unfit("max_split_size beyond the core's limits")
    if not all(0 <= d < (1 << 20) for d in settings.roundup_power2_divisions) or \
            len(settings.roundup_power2_divisions) != 16:
        raise _Unfit("roundup_power2_divisions beyond the core's limits")
    return {
        "blocks": _int64(block_rows, 12), "segments": _int64(segment_rows, 7),
        "pools": _int64(pool_rows, 3),
        "pending": _int64([(index[id(b)],) for b in allocator.pending], 1),
        "hints": _int64(allocator.address_hints, 2),
        "map_hints": _int64([(a,) for a in allocator.map_hints], 1),
        "scalars": _int64([(
            allocator.reserved, allocator._invented, -1 if capacity is None else capacity,
            settings.memory_fraction, settings.expandable_segments,
            -1 if settings.max_split_size == NO_MAX_SPLIT else settings.max_split_size,
            allocator._plain_rounding)], 7).reshape(-1),
        "divisions": _int64([tuple(settings.roundup_power2_divisions)], 16).reshape(-1),
        "gc_threshold": float(settings.garbage_collection_threshold),
        "private_ids": private_ids, "index": index,
    }


def _reachable_blocks(pools: list[BlockPool], by_id: dict[int, Block],
                      allocator: CachingAllocator) -> list[Block]:
    """Every block of the state: the pools' free and unmapped ones, the trace's, the
    pending ones, and every block linked to those (a segment's whole chain)."""
    found: dict[int, Block] = {}
    todo = [b for pool in pools for b in pool.by_key.values()]
    todo += list(by_id.values()) + list(allocator.pending)
    while todo:
        block = todo.pop()
        if id(block) in found:
            continue
        found[id(block)] = block
        todo.extend(b for b in (block.prev, block.next) if b is not None)
    return sorted(found.values(), key=lambda b: (b.segment.addr, b.addr, b.size))


def _tree_membership(pools: list[BlockPool]) -> dict[int, int]:
    """id(block) -> 0 (its pool's free tree) or 1 (the unmapped one), checked: a pool
    whose sorted keys and key map disagree is the reference's to run."""
    member: dict[int, int] = {}
    for pool in pools:
        if len(pool.blocks) + len(pool.unmapped) != len(pool.by_key):
            raise _Unfit("a pool holding a key twice")
        for key, block in pool.by_key.items():
            if key != block.key() or id(block) in member:
                raise _Unfit("a pool's key map out of step with its blocks")
            member[id(block)] = 0 if block.mapped else 1
        if any(not pool.by_key[key].mapped for key in pool.blocks) or \
                any(pool.by_key[key].mapped for key in pool.unmapped):
            raise _Unfit("a block in the tree of the other mapping")
    return member


def _int64(rows: Any, width: int) -> np.ndarray:
    """Rows of Python ints (or bools) as a C-contiguous int64 array; _Unfit where one
    does not fit in 64 bits."""
    try:
        array = np.array(rows, dtype=np.int64).reshape(-1, width)
    except OverflowError:
        raise _Unfit("a figure beyond 64 bits") from None
    return np.ascontiguousarray(array)


def _fill(loop: ReplayLoop, replay_addr: bytes, reserved: bytes, log: tuple, ooms: tuple,
          figures: tuple) -> None:
    """The core's results where the Python loop keeps its own."""
    loop.replay_addr[:] = np.frombuffer(replay_addr, dtype=np.int64).view(np.uint64)
    loop.reserved[:] = np.frombuffer(reserved, dtype=np.int64)
    owners, actions, addrs, sizes = log
    names = np.frombuffer(actions, dtype=np.int8).tolist()
    for owner, code, addr, size in zip(np.frombuffer(owners, dtype=np.int64).tolist(), names,
                                       np.frombuffer(addrs, dtype=np.int64).tolist(),
                                       np.frombuffer(sizes, dtype=np.int64).tolist(),
                                       strict=True):
        loop.log.add(owner, LOG_ACTIONS[code], addr, size)
    events, sizes, kinds = ooms
    loop.ooms.extend(
        (i, size, OOM_KINDS[kind]) for i, size, kind in zip(
            np.frombuffer(events, dtype=np.int64).tolist(),
            np.frombuffer(sizes, dtype=np.int64).tolist(),
            np.frombuffer(kinds, dtype=np.int8).tolist(), strict=True))
    loop.unknown_frees, fragmented, cached, largest = figures
    loop.at_peak = (fragmented, cached, largest)
