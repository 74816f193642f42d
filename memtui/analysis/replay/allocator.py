"""PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), replayed in Python.

One :class:`CachingAllocator` is one ``DeviceCachingAllocator``: a small and a large
:class:`BlockPool` of free blocks ordered as ``BlockComparatorSize`` orders them
(stream, size, address), blocks linked to their neighbours in a segment (``prev``/``next``),
and the same steps as the C++ ``malloc``/``free``/``free_block``/``emptyCache``.  Each
rule names the function it follows; tests in ``tests/analysis/test_replay_rules.py`` work
addresses out from the same rules.

This is a sequential simulation: every alloc depends on the pool that every earlier event
left, so it is one Python call per event (the project's "no Python loop over events in a
hot path" rule is about the UI and the analyses a screen waits for; a replay runs in a
command or a worker thread, never on the UI thread).  Free blocks sit in
``sortedcontainers.SortedList`` (a B-tree of lists: O(log n) insert and lower bound, as
the C++ ``std::set``), so a few million events take seconds to tens of seconds.

Private pools (``graph_pools``: CUDA graphs, MemPool) are pools of their own; which
allocs go to one is the caller's to say (the trace does not mark a capture).  Not
modelled: ``trigger_free_memory_callbacks`` (no callbacks in a replay), the release of a
private pool when its graph is destroyed, ``release_lock_on_cudamalloc``, IPC, peer access
and host (pinned) memory.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from memtui.analysis.replay.settings import NO_MAX_SPLIT, Settings

# The constants at the top of CUDACachingAllocator.cpp (namespace Native).
K_MIN_BLOCK_SIZE = 512  # all sizes are rounded to at least 512 bytes
K_SMALL_SIZE = 1 << 20  # largest "small" allocation is 1 MiB
K_SMALL_BUFFER = 2 << 20  # "small" allocations are packed in 2 MiB blocks
K_LARGE_BUFFER = 20 << 20  # "large" allocations may be packed in 20 MiB blocks
K_MIN_LARGE_ALLOC = 10 << 20  # allocations between 1 and 10 MiB may use kLargeBuffer
K_ROUND_LARGE = 2 << 20  # round up large allocations to 2 MiB

#: Where a replayed cudaMalloc that the recording did not make puts its segment: far above
#: any real device address, so an invented address never meets a recorded one.
INVENTED_BASE = 1 << 60


def roundup_power2_divisions_index(size: int) -> int:
    """CUDAAllocatorConfig::roundup_power2_divisions: the interval of ``size``, one per
    power of two from 1 MiB (index 0 also holds everything below) to 32 GiB and above."""
    return min(max(size.bit_length() - 1 - 20, 0), 15)


def roundup_power2_next_division(size: int, divisions: int) -> int:
    """CUDACachingAllocator.cpp roundup_power2_next_division: round ``size`` up to the next
    of ``divisions`` equal steps between the powers of two around it (1200 with 4
    divisions: 1024, 1280, 1536, 1792 -> 1280)."""
    if size <= 4 or divisions <= 1 or size & (size - 1) == 0:
        return size
    power2_floor = 1 << (size.bit_length() - 1)
    step = power2_floor >> (divisions.bit_length() - 1)
    if step == 0:
        return power2_floor << 1
    floor = size & ~(step - 1)
    return size if floor == size else floor + step


def round_size(size: int, settings: Settings) -> int:
    """CUDACachingAllocator.cpp round_size: below kMinBlockSize -> 512; with
    roundup_power2_divisions > 1 for the size's interval and the size above
    kMinBlockSize * divisions -> the next power-of-two division; else a multiple of 512."""
    if size < K_MIN_BLOCK_SIZE:
        return K_MIN_BLOCK_SIZE
    divisions = settings.roundup_power2_divisions[roundup_power2_divisions_index(size)]
    if divisions > 1 and size > K_MIN_BLOCK_SIZE * divisions:
        return roundup_power2_next_division(size, divisions)
    return K_MIN_BLOCK_SIZE * ((size + K_MIN_BLOCK_SIZE - 1) // K_MIN_BLOCK_SIZE)


def get_allocation_size(size: int) -> int:
    """CUDACachingAllocator.cpp get_allocation_size: the cudaMalloc size for a rounded
    request: <= 1 MiB -> a 2 MiB small segment; < 10 MiB -> a 20 MiB large segment; else
    the request rounded up to 2 MiB."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) // K_ROUND_LARGE)


def _first_at_or_after(keys: SortedList, key: tuple) -> tuple | None:
    """``keys``' first item at or after ``key`` (std::set::lower_bound), straight from the
    SortedList's sublists: the hot path of every malloc (bisect_left + __getitem__ would
    walk its positional index too)."""
    maxes = keys._maxes
    pos = bisect_left(maxes, key)
    if pos == len(maxes):
        return None
    sub = keys._lists[pos]
    return sub[bisect_left(sub, key)]


class Block:
    """One ``Block``: a free, allocated or pending-free range of a segment (or, for an
    expandable segment, an unmapped range)."""

    __slots__ = ("addr", "size", "stream", "pool", "prev", "next", "allocated", "pending",
                 "mapped", "segment", "gc_base")

    def __init__(self, addr: int, size: int, stream: int, pool: BlockPool,
                 segment: Segment) -> None:
        self.addr = addr
        self.size = size
        self.stream = stream
        self.pool = pool
        self.prev: Block | None = None
        self.next: Block | None = None
        self.allocated = False
        self.pending = False  # free requested, waiting for its events (event_count > 0)
        self.mapped = True
        self.segment = segment
        self.gc_base = 0

    def key(self) -> tuple[int, int, int]:
        return (self.stream, self.size, self.addr)

    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None


class PendingFrees(dict["Block", None]):
    """The blocks whose frees wait for their stream events, in the order the frees were
    requested (PyTorch's synchronize_and_free_events walks each stream's events in the
    order recorded): a set that keeps its order.  A plain set's order follows where the
    blocks sit in memory, and the order decides which block of two freed neighbours
    survives their merge: a replay would not be the same twice."""

    def add(self, block: Block) -> None:
        self[block] = None

    def discard(self, block: Block) -> None:
        self.pop(block, None)


@dataclass
class Segment:
    """A cudaMalloc'd segment (or one expandable segment's address range)."""

    addr: int
    size: int
    stream: int
    is_small: bool
    expandable: bool = False
    page: int = 0  # an expandable segment's mapping granularity (2 MiB / 20 MiB)
    mapped_pages: set[int] = field(default_factory=set)


class BlockPool:
    """``BlockPool``: the free blocks of one size class, by (stream, size, address), and
    an expandable segment's unmapped ranges (``unmapped``, kept by the same key; PyTorch
    orders them by (stream, address), as :meth:`CachingAllocator._find_expandable_block`
    walks them)."""

    def __init__(self, is_small: bool, private: bool = False) -> None:
        self.is_small = is_small
        self.private = private  # a CUDA graph's / MemPool's (owner_PrivatePool)
        self.blocks: SortedList = SortedList()
        self.unmapped: SortedList = SortedList()
        self.by_key: dict[tuple[int, int, int], Block] = {}
        self.get_free_blocks_call_count = 0

    def insert(self, block: Block) -> None:
        key = block.key()
        (self.blocks if block.mapped else self.unmapped).add(key)
        self.by_key[key] = block

    def erase(self, block: Block) -> None:
        key = block.key()
        (self.blocks if block.mapped else self.unmapped).remove(key)
        del self.by_key[key]


@dataclass
class SegmentEvent:
    """A cudaMalloc / cudaFree the replay made (or, with expandable segments, a page map /
    unmap): ``action`` as the snapshot's trace names it."""

    action: str
    addr: int
    size: int
    stream: int


class OutOfMemory(Exception):  # noqa: N818 - PyTorch's own name for it
    """The replayed malloc failed: cudaMalloc refused even after every cached block went."""


class CachingAllocator:
    """One device's caching allocator (DeviceCachingAllocator), fed one call at a time.

    ``malloc(size, stream)`` returns the :class:`Block`; ``free(block)`` is the trace's
    ``free_requested`` (a block whose stream uses are still outstanding stays ``pending``
    until ``free_completed``); ``free_completed(block)`` is ``free_block``;
    ``empty_cache()`` is ``emptyCache``.  Segment events the replay makes are appended to
    ``segment_events``; ``reserved`` is ``total_allocated_memory``.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._plain_rounding = not any(d > 1 for d in settings.roundup_power2_divisions)
        self.small = BlockPool(is_small=True)
        self.large = BlockPool(is_small=False)
        #: private pools (graph_pools) by the snapshot's segment_pool_id, "1,0"
        self.private: dict[str, tuple[BlockPool, BlockPool]] = {}
        self.reserved = 0
        self.segment_events: list[SegmentEvent] = []
        self.segments: dict[int, Segment] = {}
        self.pending = PendingFrees()
        #: addresses a cudaMalloc of a given size should return, oldest first (the proof
        #: hands the recording's segment_alloc addresses over; empty: invent one).
        self.address_hints: list[tuple[int, int]] = []
        #: the recording's segment_map addresses in the current malloc (same purpose)
        self.map_hints: list[int] = []
        self._invented = INVENTED_BASE

    # -- setting up the pool the capture started from ----------------------------------

    def add_segment(self, addr: int, size: int, stream: int, is_small: bool,
                    allocated: list[tuple[int, int]],
                    expandable: bool = False, pool_id: str | None = None) -> list[Block | None]:
        """A segment alive before the first event, with its ``allocated`` (addr, size)
        ranges (sorted, inside it); the rest is free.  Returns the allocated blocks, one per
        range (None for a range overlapping the one before it or leaving the segment).

        ``expandable``: the mapped range of an expandable segment; unmapped address space
        follows it (the dump shows only what is mapped)."""
        if expandable:
            return self.add_expandable_segment([(addr, size, allocated)], stream, is_small,
                                               pool_id)[0]
        small_pool, large_pool = self.pools(pool_id)
        pool = small_pool if is_small else large_pool
        segment = Segment(addr, size, stream, is_small)
        self.segments[addr] = segment
        out, pieces = self._lay(addr, size, allocated, stream, pool, segment)
        self._link_and_pool(pieces, pool)
        self.reserved += size
        return out

    def add_expandable_segment(self, mapped: list[tuple[int, int, list[tuple[int, int]]]],
                               stream: int, is_small: bool, pool_id: str | None = None
                               ) -> list[list[Block | None]]:
        """One expandable segment alive before the first event: its mapped ranges
        (addr, size, allocated ranges inside it), sorted by address and disjoint, in one
        address range from the first (the lowest address known to be mapped stands for
        the segment's base) with the holes between them unmapped and unmapped address
        space after the last, as ``ExpandableSegment`` keeps them.  Returns the allocated
        blocks of each mapped range (see :meth:`add_segment`)."""
        small_pool, large_pool = self.pools(pool_id)
        pool = small_pool if is_small else large_pool
        page = self._page_size(pool)
        base = mapped[0][0]
        last_end = mapped[-1][0] + mapped[-1][1]
        space = max(self._address_space(page), -(-(last_end - base) // page) * page)
        segment = Segment(base, space, stream, is_small, expandable=True, page=page)
        self.segments[base] = segment
        outs, pieces, cursor = [], [], base
        for addr, size, allocated in mapped:
            if addr > cursor:
                pieces.append(self._unmapped(cursor, addr - cursor, stream, pool, segment))
            out, laid = self._lay(addr, size, allocated, stream, pool, segment)
            outs.append(out)
            pieces += laid
            cursor = addr + size
            self.reserved += size
        if cursor < base + space:
            pieces.append(self._unmapped(cursor, base + space - cursor, stream, pool, segment))
        self._link_and_pool(pieces, pool)
        return outs

    @staticmethod
    def _unmapped(addr: int, size: int, stream: int, pool: BlockPool,
                  segment: Segment) -> Block:
        block = Block(addr, size, stream, pool, segment)
        block.mapped = False
        return block

    @staticmethod
    def _lay(addr: int, size: int, allocated: list[tuple[int, int]], stream: int,
             pool: BlockPool, segment: Segment) -> tuple[list[Block | None], list[Block]]:
        """The blocks of the range [addr, addr + size): the allocated ranges and the free
        ones between them (see :meth:`add_segment`)."""
        out: list[Block | None] = []
        pieces: list[Block] = []
        cursor = addr
        for block_addr, block_size in allocated:
            if block_addr < cursor or block_size <= 0 or block_addr + block_size > \
                    addr + size:
                out.append(None)  # overlapping, empty or outside (a broken dump)
                continue
            if block_addr > cursor:
                pieces.append(Block(cursor, block_addr - cursor, stream, pool, segment))
            block = Block(block_addr, block_size, stream, pool, segment)
            block.allocated = True
            pieces.append(block)
            out.append(block)
            cursor = block_addr + block_size
        if cursor < addr + size:
            pieces.append(Block(cursor, addr + size - cursor, stream, pool, segment))
        return out, pieces

    @staticmethod
    def _link_and_pool(pieces: list[Block], pool: BlockPool) -> None:
        for before, after in zip(pieces, pieces[1:], strict=False):
            before.next, after.prev = after, before
        for piece in pieces:
            if not piece.allocated:
                pool.insert(piece)

    # -- malloc ------------------------------------------------------------------------

    def pools(self, pool_id: str | None) -> tuple[BlockPool, BlockPool]:
        """The (small, large) pools of ``pool_id`` (None or "0,0": the device's own)."""
        if pool_id is None or pool_id == "0,0":
            return self.small, self.large
        if pool_id not in self.private:
            self.private[pool_id] = (BlockPool(True, private=True), BlockPool(False, private=True))
        return self.private[pool_id]

    def malloc(self, orig_size: int, stream: int, pool_id: str | None = None) -> Block:
        """DeviceCachingAllocator::malloc (process_events happened before: the caller
        feeds the trace's free_completed events in order).  ``pool_id``: a private pool
        (get_pool gives one to a stream under CUDA graph capture)."""
        settings = self.settings
        if self._plain_rounding:  # round_size without roundup_power2_divisions
            size = K_MIN_BLOCK_SIZE if orig_size < K_MIN_BLOCK_SIZE else \
                (orig_size + K_MIN_BLOCK_SIZE - 1) & -K_MIN_BLOCK_SIZE
        else:
            size = round_size(orig_size, settings)
        small_pool, large_pool = self.pools(pool_id)
        pool = small_pool if size <= K_SMALL_SIZE else large_pool  # get_pool
        alloc_size = get_allocation_size(size)
        block = self._get_free_block(pool, size, stream)
        if block is None:
            if settings.garbage_collection_threshold > 0 and settings.memory_fraction:
                self._garbage_collect_cached_blocks()
            # release_cached_blocks is skipped while a capture is underway (a private pool)
            block = (self._alloc_block(pool, size, alloc_size, stream)
                     or (self._release_available_cached_blocks(pool, size, stream)
                         and self._alloc_block(pool, size, alloc_size, stream))
                     or (not pool.private and self.empty_cache()
                         and self._alloc_block(pool, size, alloc_size, stream)))
            if not block:
                raise OutOfMemory(size)
        return self._alloc_found_block(block, size, stream)

    def _get_free_block(self, pool: BlockPool, size: int, stream: int) -> Block | None:
        """get_free_block: the first free block at or after (stream, size, 0): best fit by
        size, then lowest address, on the same stream only; expandable blocks count the
        unmapped space after them; never an oversize block (>= max_split_size) for a
        request below it, nor one kLargeBuffer or more larger than an oversize request."""
        settings = self.settings
        if settings.garbage_collection_threshold > 0 and settings.memory_fraction:
            pool.get_free_blocks_call_count += 1
        keys = pool.blocks
        first = _first_at_or_after(keys, (stream, size, -1))
        if first is None or first[0] != stream:
            return None
        block = pool.by_key[first]
        if block.segment.expandable:
            i = keys.bisect_left(first)
            if settings.expandable_segments:
                def expandable_size(b: Block) -> int:
                    return b.size + (b.next.size if b.next is not None and not b.next.mapped
                                     else 0)
                j = i + 1
                while (block.segment.expandable and j < len(keys) and keys[j][0] == stream
                       and expandable_size(pool.by_key[keys[j]]) < expandable_size(block)):
                    block = pool.by_key[keys[j]]
                    j += 1
            else:
                j = i + 1
                while j < len(keys) and keys[j][0] == stream and \
                        pool.by_key[keys[j]].segment.expandable:
                    j += 1
                if j == len(keys) or keys[j][0] != stream:
                    return None
                block = pool.by_key[keys[j]]
        max_split = settings.max_split_size
        if size < max_split and block.size >= max_split:
            return None
        if size >= max_split and block.size >= size + K_LARGE_BUFFER:
            return None
        pool.erase(block)
        return block

    def _alloc_block(self, pool: BlockPool, size: int, alloc_size: int,
                     stream: int) -> Block | None:
        """alloc_block: a new segment of ``alloc_size`` (or, with expandable segments,
        pages mapped into the stream's expandable segment); None where the device (the
        replay's capacity) cannot give it."""
        capacity = self.settings.capacity
        if self.settings.memory_fraction and capacity is not None \
                and self.reserved + alloc_size > capacity:
            return None  # set_fraction: checked on alloc_size, before any mapping
        if self.settings.expandable_segments and not pool.private:
            # "our checkpointing logic for private pools doesn't support" expandable ones
            return self._try_allocate_expandable_block(pool, size, stream)
        if capacity is not None and self.reserved + alloc_size > capacity:
            return None
        addr = self._segment_address(alloc_size)
        segment = Segment(addr, alloc_size, stream, pool.is_small)
        self.segments[addr] = segment
        self.reserved += alloc_size
        self.segment_events.append(SegmentEvent("segment_alloc", addr, alloc_size, stream))
        return Block(addr, alloc_size, stream, pool, segment)

    def _segment_address(self, size: int) -> int:
        for i, (hint_size, hint_addr) in enumerate(self.address_hints):
            if hint_size == size and hint_addr not in self.segments:
                del self.address_hints[i]
                return hint_addr
        addr = self._invented
        self._invented += -(-size // K_SMALL_BUFFER) * K_SMALL_BUFFER + K_SMALL_BUFFER
        return addr

    def _should_split(self, block: Block, size: int) -> bool:
        """should_split: a small block splits when 512 B or more remain (also any block
        with expandable segments); a large one when the request is below max_split_size
        and more than kSmallSize (1 MiB) remains."""
        remaining = block.size - size
        if block.pool.is_small or self.settings.expandable_segments:
            return remaining >= K_MIN_BLOCK_SIZE
        return size < self.settings.max_split_size and remaining > K_SMALL_SIZE

    def _alloc_found_block(self, block: Block, size: int, stream: int) -> Block:
        """alloc_found_block: the request takes the front of the block; the remainder, if
        should_split, goes back to the pool as a new free block after it."""
        if self._should_split(block, size):
            remaining = block
            block = Block(remaining.addr, size, stream, remaining.pool, remaining.segment)
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.addr += size
            remaining.size -= size
            remaining.pool.insert(remaining)
        block.allocated = True
        return block

    # -- free --------------------------------------------------------------------------

    def free(self, block: Block, completes: bool = True) -> None:
        """DeviceCachingAllocator::free: the block is no longer allocated; with no stream
        uses it goes straight to free_block, else it waits (``pending``) for its events."""
        block.allocated = False
        if completes:
            self.free_block(block)
        else:
            block.pending = True
            self.pending.add(block)

    def free_block(self, block: Block) -> None:
        """free_block: merge with a free neighbour on each side (try_merge_blocks: not
        allocated, no outstanding events, both mapped or both unmapped), back to the pool."""
        block.allocated = False
        block.pending = False
        self.pending.discard(block)
        pool = block.pool
        for candidate in (block.prev, block.next):
            self._try_merge_blocks(block, candidate, pool)
        block.gc_base = pool.get_free_blocks_call_count
        pool.insert(block)

    def _try_merge_blocks(self, dst: Block, src: Block | None, pool: BlockPool) -> int:
        if src is None or src.allocated or src.pending or dst.mapped != src.mapped:
            return 0
        pool.erase(src)
        if dst.prev is src:  # [src dst]
            dst.addr = src.addr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
        else:  # [dst src]
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size
        return src.size

    # -- giving memory back ------------------------------------------------------------

    def empty_cache(self) -> bool:
        """release_cached_blocks (emptyCache, and malloc's last retry):
        synchronize_and_free_events, then release_blocks on the large pool, then the
        small: every free block that is a whole segment is cudaFree'd, in pool order
        (stream, size, address); expandable segments unmap their free pages.  Private
        pools are left alone (freed only once their graph is destroyed, which a trace
        does not record)."""
        for block in list(self.pending):
            self.free_block(block)
        self._release_blocks(self.large)
        self._release_blocks(self.small)
        return True

    def _release_blocks(self, pool: BlockPool) -> None:
        to_unmap = []
        for key in list(pool.blocks):
            block = pool.by_key[key]
            if block.segment.expandable:
                to_unmap.append(block)
            elif block.prev is None and block.next is None:
                self._release_block(block)
        for block in to_unmap:
            self._unmap_block(block)
            if block.prev is None and block.next is None:
                pool.unmapped.remove(block.key())
                del pool.by_key[block.key()]
                del self.segments[block.segment.addr]

    def _release_block(self, block: Block) -> None:
        """release_block: cudaFree of a whole free segment."""
        self.segment_events.append(SegmentEvent("segment_free", block.addr, block.size,
                                                block.stream))
        self.reserved -= block.size
        block.pool.erase(block)
        del self.segments[block.segment.addr]

    def _release_available_cached_blocks(self, pool: BlockPool, size: int,
                                         stream: int) -> bool:
        """release_available_cached_blocks (only with max_split_size set): free the
        smallest oversize block that covers the request, else the largest oversize
        blocks of the stream, largest first, until enough is freed."""
        max_split = self.settings.max_split_size
        if max_split == NO_MAX_SPLIT:
            return False
        want = max(size, max_split)
        keys = pool.blocks
        i = keys.bisect_left((stream, want, -1))
        if i < len(keys) and keys[i][0] == stream and \
                not pool.by_key[keys[i]].segment.expandable:
            self._release_block(pool.by_key[keys[i]])
            return True
        if i == 0:
            return False
        released = 0
        i -= 1
        while released < want and i >= 0:
            block = pool.by_key[keys[i]]
            if block.size < max_split or block.stream != stream:
                break
            i -= 1
            if not block.segment.expandable and not block.is_split():
                released += block.size
                self._release_block(block)
        return released >= want

    def _garbage_collect_cached_blocks(self) -> None:
        """garbage_collect_cached_blocks (garbage_collection_threshold, active only with a
        memory fraction set, ``set_fraction``): above threshold * capacity, free the
        unsplit large free blocks that waited longer than average since they were last
        freed, until enough is reclaimed."""
        capacity = self.settings.capacity or 0
        threshold = int(self.settings.garbage_collection_threshold * capacity)
        if self.reserved <= threshold:
            return
        target = self.reserved - threshold
        pool = self.large
        count_now = pool.get_free_blocks_call_count

        def freeable() -> list[Block]:
            return [pool.by_key[k] for k in pool.blocks
                    if not pool.by_key[k].is_split() and not pool.by_key[k].segment.expandable]

        blocks = freeable()
        if not blocks:
            return
        for block in list(self.pending):
            self.free_block(block)
        total_age = sum(count_now - b.gc_base for b in blocks)
        count = len(blocks)
        reclaimed = 0
        freed = True
        while reclaimed < target and freed and count > 0:
            age_threshold = total_age / count
            freed = False
            for block in freeable():
                age = count_now - block.gc_base
                if age >= age_threshold:
                    freed = True
                    reclaimed += block.size
                    total_age -= age
                    count -= 1
                    self._release_block(block)

    # -- expandable segments -----------------------------------------------------------

    def _page_size(self, pool: BlockPool) -> int:
        return K_SMALL_BUFFER if pool.is_small else K_LARGE_BUFFER

    def _new_expandable_segment(self, pool: BlockPool, stream: int) -> Block:
        """find_expandable_block's last resort: a new segment of address space (1 1/8 of
        the device's memory), all unmapped."""
        page = self._page_size(pool)
        size = self._address_space(page)
        addr = self._expandable_address(size)
        segment = Segment(addr, size, stream, pool.is_small, expandable=True, page=page)
        self.segments[addr] = segment
        block = Block(addr, size, stream, pool, segment)
        block.mapped = False
        pool.insert(block)
        return block

    def _address_space(self, page: int) -> int:
        """ExpandableSegment's reserved virtual range: 1 1/8 of the device's memory in
        whole pages (the capacity stands for the device; 1 TiB where none is known)."""
        capacity = self.settings.capacity or (1 << 40)
        return -(-(capacity + capacity // 8) // page) * page

    def _expandable_address(self, size: int) -> int:
        """A new expandable segment's base: the recording's first segment_map of this
        malloc (a malloc that makes a new segment maps only in it, from its base), else an
        invented one.  (The replay's address ranges may overlap where the device's size
        is unknown: blocks are found by their links and keys, never by range.)"""
        if self.map_hints and self.map_hints[0] not in self.segments:
            return self.map_hints.pop(0)
        return self._segment_address(size)

    def _find_expandable_block(self, pool: BlockPool, size: int, stream: int) -> Block:
        """find_expandable_block: the lowest unmapped range of the stream's expandable
        segments with enough free and unmapped space from it (or from the free block just
        before it); else a new expandable segment."""
        def allocatable(b: Block | None) -> bool:
            return b is not None and not b.allocated and not b.pending

        def has_room(b: Block | None) -> bool:
            room = 0
            while room < size and allocatable(b):
                room += b.size
                b = b.next
            return room >= size

        keys = pool.unmapped
        lo = keys.bisect_left((stream, 0, -1))
        hi = keys.bisect_left((stream + 1, 0, -1))
        # pool->unmapped is ordered by BlockComparatorAddress (stream, ptr), not by size:
        # the lowest unmapped address of the stream comes first
        for key in sorted(keys[lo:hi], key=lambda k: k[2]):
            candidate = pool.by_key[key]
            if allocatable(candidate.prev):
                candidate = candidate.prev
            if has_room(candidate):
                return candidate
        return self._new_expandable_segment(pool, stream)

    def _map_block(self, block: Block, size: int) -> bool:
        """map_block: map the pages covering [block.addr, block.addr + size) (rounded out
        to whole pages, ExpandableSegment::map); the rest of the range stays unmapped as a
        new block after it; merge with free neighbours."""
        segment, pool = block.segment, block.pool
        page = segment.page
        first = (block.addr - segment.addr) // page
        last = -(-(block.addr + size - segment.addr) // page)
        mapped_size = (last - first) * page
        capacity = self.settings.capacity
        if capacity is not None and self.reserved + mapped_size > capacity:
            return False
        start = block.addr
        pool.erase(block)
        block.mapped = True
        if mapped_size < block.size:
            rest = Block(block.addr + mapped_size, block.size - mapped_size, block.stream,
                         pool, segment)
            rest.mapped = False
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            pool.insert(rest)
            block.size = mapped_size
        self._try_merge_blocks(block, block.prev, pool)
        self._try_merge_blocks(block, block.next, pool)
        pool.insert(block)
        self.reserved += mapped_size
        self.segment_events.append(SegmentEvent("segment_map", start, mapped_size,
                                                block.stream))
        return True

    def _try_allocate_expandable_block(self, pool: BlockPool, size: int,
                                       stream: int) -> Block | None:
        """try_allocate_expandable_block: map pages until a free run of ``size`` exists at
        the candidate."""
        candidate = self._find_expandable_block(pool, size, stream)
        if not candidate.mapped and not self._map_block(candidate, min(candidate.size, size)):
            return None
        while candidate.size < size:
            following = candidate.next
            if following is None or not self._map_block(
                    following, min(size - candidate.size, following.size)):
                return None
            candidate = following
        pool.erase(candidate)
        return candidate

    def _unmap_block(self, block: Block) -> None:
        """unmap_block: unmap the whole pages inside a free block of an expandable segment
        (ExpandableSegment::unmap rounds inwards); the partial pages before and after stay
        mapped and free."""
        segment, pool = block.segment, block.pool
        page = segment.page
        first = -(-(block.addr - segment.addr) // page)
        last = (block.addr + block.size - segment.addr) // page
        if first >= last:
            return
        start, end = segment.addr + first * page, segment.addr + last * page
        pool.erase(block)
        if start > block.addr:
            before = Block(block.addr, start - block.addr, block.stream, pool, segment)
            before.prev, before.next = block.prev, block
            if block.prev is not None:
                block.prev.next = before
            block.prev = before
            pool.insert(before)
        if end < block.addr + block.size:
            after = Block(end, block.addr + block.size - end, block.stream, pool, segment)
            after.prev, after.next = block, block.next
            if block.next is not None:
                block.next.prev = after
            block.next = after
            pool.insert(after)
        block.addr, block.size, block.mapped = start, end - start, False
        self._try_merge_blocks(block, block.prev, pool)
        self._try_merge_blocks(block, block.next, pool)
        pool.insert(block)
        self.reserved -= end - start
        self.segment_events.append(SegmentEvent("segment_unmap", start, end - start,
                                                block.stream))

    # -- measuring ---------------------------------------------------------------------

    def block_at(self, addr: int) -> tuple[str, int, int] | None:
        """What holds ``addr`` in the replay: ("free" / "in use" / "unmapped", start, size)
        of the block covering it, or None where no segment does (a scan: explanations only)."""
        for segment in self.segments.values():
            if segment.addr <= addr < segment.addr + segment.size:
                break
        else:
            return None
        for pool in self._all_pools():
            for key in list(pool.blocks) + list(pool.unmapped):
                block = pool.by_key[key]
                if block.addr <= addr < block.addr + block.size:
                    return ("free" if block.mapped else "unmapped", block.addr, block.size)
        return ("in use", addr, 0)

    def _all_pools(self) -> list[BlockPool]:
        return [self.small, self.large] + [p for pair in self.private.values() for p in pair]

    def free_split(self) -> tuple[int, int, int]:
        """The pool's free bytes as memtui measures them everywhere
        (:class:`memtui.analysis.layout.pool_state.Fragmentation`): (fragmented: free
        blocks inside a segment that also holds a block in use or pending; cached: free
        blocks that are a whole segment, or for an expandable segment a whole mapped
        range; the largest fragmented block)."""
        fragmented = cached = largest = 0
        for pool in self._all_pools():
            for key in pool.blocks:
                block = pool.by_key[key]
                alone = (block.prev is None or not block.prev.mapped) and \
                    (block.next is None or not block.next.mapped)
                if alone:
                    cached += block.size
                else:
                    fragmented += block.size
                    largest = max(largest, block.size)
        return fragmented, cached, largest
