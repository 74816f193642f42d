"""The replayed caching allocator, rule by rule, on sequences worked out by hand from
c10/cuda/CUDACachingAllocator.cpp (each test names the function whose rule it checks).
Segments are placed where a hint says (cudaMalloc's address comes from the driver)."""

from __future__ import annotations

import pytest

from memtui.analysis.replay.allocator import (
    K_LARGE_BUFFER,
    K_SMALL_BUFFER,
    CachingAllocator,
    OutOfMemory,
    get_allocation_size,
    round_size,
    roundup_power2_next_division,
)
from memtui.analysis.replay.settings import (
    MIB,
    SettingError,
    Settings,
    apply_changes,
    from_capture,
    parse_size,
)

A = 0x7F0000000000  # first segment
B = 0x7F0010000000  # second segment
C = 0x7F0020000000  # third


def allocator(settings: Settings | None = None, *hints: tuple[int, int]) -> CachingAllocator:
    alloc = CachingAllocator(settings or Settings())
    alloc.address_hints = list(hints)
    return alloc


def free_keys(alloc: CachingAllocator, small: bool) -> list[tuple[int, int, int]]:
    return list((alloc.small if small else alloc.large).blocks)


def actions(alloc: CachingAllocator) -> list[tuple[str, int, int]]:
    return [(e.action, e.addr, e.size) for e in alloc.segment_events]


# -- sizes -----------------------------------------------------------------------------

def test_round_size_512_byte_blocks():
    # round_size: below kMinBlockSize -> 512; else the next multiple of 512
    assert round_size(1, Settings()) == 512
    assert round_size(512, Settings()) == 512
    assert round_size(513, Settings()) == 1024
    assert round_size(4864, Settings()) == 5120  # select_n's second alloc: 4864 -> 5120


def test_roundup_power2_divisions():
    # roundup_power2_next_division's own example: 1200 with 4 divisions -> 1280
    assert roundup_power2_next_division(1200, 4) == 1280
    assert roundup_power2_next_division(1024, 4) == 1024  # a power of two stays
    # round_size applies it only above kMinBlockSize * divisions (4 * 512 = 2048)
    four = apply_changes(Settings(), ["roundup_power2_divisions:4"])
    assert round_size(1200, four) == 1536  # 1200 <= 2048: plain 512 rounding
    assert round_size(5 * MIB + 1, four) == 6 * MIB  # 4..8 MiB in steps of 1 MiB
    # per interval: [1:1,4:4] leaves 1-2 MiB alone, rounds 4-8 MiB
    mixed = apply_changes(Settings(), ["roundup_power2_divisions:[1:1,4:4]"])
    assert round_size(MIB + 1000, mixed) == MIB + 1024
    assert round_size(5 * MIB + 1, mixed) == 6 * MIB


def test_get_allocation_size():
    # get_allocation_size: <= 1 MiB -> kSmallBuffer, < 10 MiB -> kLargeBuffer, else 2 MiB steps
    assert get_allocation_size(MIB) == K_SMALL_BUFFER
    assert get_allocation_size(MIB + 512) == K_LARGE_BUFFER
    assert get_allocation_size(10 * MIB - 512) == K_LARGE_BUFFER
    assert get_allocation_size(10 * MIB) == 10 * MIB
    assert get_allocation_size(11 * MIB) == 12 * MIB


# -- split -----------------------------------------------------------------------------

def test_large_split_kept_and_reused_best_fit():
    # 3 MiB: a 20 MiB large segment at A; should_split: 17 MiB remain > kSmallSize -> kept
    alloc = allocator(None, (K_LARGE_BUFFER, A))
    first = alloc.malloc(3 * MIB, 0)
    assert (first.addr, first.size) == (A, 3 * MIB)
    assert free_keys(alloc, small=False) == [(0, 17 * MIB, A + 3 * MIB)]
    # alloc_found_block: the request takes the front of the free block
    second = alloc.malloc(2 * MIB, 0)
    assert (second.addr, second.size) == (A + 3 * MIB, 2 * MIB)
    assert free_keys(alloc, small=False) == [(0, 15 * MIB, A + 5 * MIB)]
    assert actions(alloc) == [("segment_alloc", A, K_LARGE_BUFFER)]


def test_large_split_not_kept():
    # 19.5 MiB: >= kMinLargeAlloc, so a 20 MiB segment; 0.5 MiB would remain, not more
    # than kSmallSize: should_split says no, the block is the whole segment
    alloc = allocator(None, (20 * MIB, A))
    block = alloc.malloc(19 * MIB + MIB // 2, 0)
    assert (block.addr, block.size) == (A, 20 * MIB)
    assert free_keys(alloc, small=False) == []


def test_small_pool_segment_fills_up():
    # 512 KiB requests: small pool, 2 MiB segments; the fourth takes the last 512 KiB
    # whole (0 remain < kMinBlockSize), the fifth needs a second segment
    alloc = allocator(None, (K_SMALL_BUFFER, A), (K_SMALL_BUFFER, B))
    got = [alloc.malloc(512 * 1024, 0).addr for _ in range(5)]
    assert got == [A, A + 512 * 1024, A + MIB, A + 1536 * 1024, B]
    assert actions(alloc) == [("segment_alloc", A, K_SMALL_BUFFER),
                              ("segment_alloc", B, K_SMALL_BUFFER)]
    assert free_keys(alloc, small=True) == [(0, 1536 * 1024, B + 512 * 1024)]


def test_small_split_keeps_512_byte_remainder():
    # small pool: should_split keeps any remainder of 512 B or more
    alloc = allocator(None, (K_SMALL_BUFFER, A))
    assert alloc.malloc(1000, 0).addr == A  # 1024 B
    assert alloc.malloc(16, 0).addr == A + 1024  # 512 B
    assert alloc.malloc(600, 0).addr == A + 1536  # 1024 B
    assert free_keys(alloc, small=True) == [(0, K_SMALL_BUFFER - 2560, A + 2560)]


# -- merge -----------------------------------------------------------------------------

def test_free_merges_on_both_sides_then_empty_cache_releases_the_segment():
    alloc = allocator(None, (K_SMALL_BUFFER, A))
    a, b, c = (alloc.malloc(512, 0) for _ in range(3))
    assert (a.addr, b.addr, c.addr) == (A, A + 512, A + 1024)
    alloc.free_block(a)  # next (b) is allocated: no merge
    alloc.free_block(c)  # try_merge_blocks with the free tail after it
    assert free_keys(alloc, small=True) == [(0, 512, A), (0, K_SMALL_BUFFER - 1024, A + 1024)]
    alloc.free_block(b)  # merges with a before it and the tail after it: the whole segment
    assert free_keys(alloc, small=True) == [(0, K_SMALL_BUFFER, A)]
    # release_cached_blocks: a free block with no prev and no next is a whole segment
    alloc.empty_cache()
    assert actions(alloc)[-1] == ("segment_free", A, K_SMALL_BUFFER)
    assert alloc.reserved == 0


def test_empty_cache_keeps_a_segment_with_a_live_block():
    alloc = allocator(None, (K_SMALL_BUFFER, A), (K_LARGE_BUFFER, B))
    alloc.malloc(512, 0)
    big = alloc.malloc(2 * MIB, 0)
    alloc.free_block(big)
    alloc.empty_cache()
    assert actions(alloc)[-1] == ("segment_free", B, K_LARGE_BUFFER)
    assert alloc.reserved == K_SMALL_BUFFER


# -- streams and frees that complete later ----------------------------------------------

def test_pending_free_is_not_reused_until_completed():
    # free(): a block with stream uses waits for its events (event_count > 0); neither
    # get_free_block nor try_merge_blocks may touch it until free_block runs
    alloc = allocator(None, (K_SMALL_BUFFER, A))
    a = alloc.malloc(4096, 0)
    alloc.free(a, completes=False)
    b = alloc.malloc(4096, 0)
    assert b.addr == A + 4096
    alloc.free_block(b)  # its neighbour a is pending: b merges only with the tail
    assert free_keys(alloc, small=True) == [(0, K_SMALL_BUFFER - 4096, A + 4096)]
    alloc.free_block(a)  # completed: merges into one free segment
    assert free_keys(alloc, small=True) == [(0, K_SMALL_BUFFER, A)]
    assert alloc.malloc(4096, 0).addr == A


def test_free_blocks_serve_only_their_stream():
    # BlockComparatorSize orders by stream first; get_free_block gives up at another stream
    alloc = allocator(None, (K_SMALL_BUFFER, A), (K_SMALL_BUFFER, B))
    a = alloc.malloc(4096, 0)
    alloc.free_block(a)
    other = alloc.malloc(4096, 7)
    assert other.addr == B
    assert actions(alloc)[-1] == ("segment_alloc", B, K_SMALL_BUFFER)


# -- max_split_size_mb ------------------------------------------------------------------

def max_split(mb: int) -> Settings:
    return apply_changes(Settings(), [f"max_split_size_mb:{mb}"])


def test_max_split_size_refuses_to_split_an_oversize_request():
    # should_split: a large block splits only for a request below max_split_size
    for settings, size in ((Settings(), 90 * MIB), (max_split(64), 100 * MIB)):
        alloc = allocator(settings, (100 * MIB, A))
        alloc.free_block(alloc.malloc(100 * MIB, 0))
        block = alloc.malloc(90 * MIB, 0)
        assert (block.addr, block.size) == (A, size)


def test_max_split_size_keeps_small_requests_off_oversize_blocks():
    # get_free_block: a request below max_split_size never gets a block of max_split_size
    # or more: a new segment instead (without the setting it splits the 100 MiB block)
    alloc = allocator(max_split(64), (100 * MIB, A), (30 * MIB, B))
    alloc.free_block(alloc.malloc(100 * MIB, 0))
    assert alloc.malloc(30 * MIB, 0).addr == B
    plain = allocator(None, (100 * MIB, A))
    plain.free_block(plain.malloc(100 * MIB, 0))
    assert plain.malloc(30 * MIB, 0).addr == A


def test_max_split_size_large_buffer_rule():
    # get_free_block: an oversize request takes an oversize block only if it wastes less
    # than kLargeBuffer (20 MiB): 70 MiB refuses 100 MiB, 85 MiB takes it
    alloc = allocator(max_split(64), (100 * MIB, A), (70 * MIB, B))
    alloc.free_block(alloc.malloc(100 * MIB, 0))
    assert alloc.malloc(70 * MIB, 0).addr == B
    assert alloc.malloc(85 * MIB, 0).addr == A


def test_release_available_cached_blocks_frees_an_oversize_block_before_giving_up():
    # with a capacity: the 30 MiB cudaMalloc fails, release_available_cached_blocks frees
    # the oversize 100 MiB block, the retry succeeds
    settings = apply_changes(Settings(), ["max_split_size_mb:64"])
    from dataclasses import replace

    alloc = allocator(replace(settings, capacity=110 * MIB), (100 * MIB, A), (30 * MIB, B))
    alloc.free_block(alloc.malloc(100 * MIB, 0))
    assert alloc.malloc(30 * MIB, 0).addr == B
    assert actions(alloc)[1:] == [("segment_free", A, 100 * MIB),
                                  ("segment_alloc", B, 30 * MIB)]


# -- capacity, OOM ------------------------------------------------------------------------

def test_failed_cudamalloc_releases_cached_blocks_then_ooms():
    from dataclasses import replace

    alloc = allocator(replace(Settings(), capacity=40 * MIB),
                      (K_LARGE_BUFFER, A), (30 * MIB, B))
    alloc.free_block(alloc.malloc(5 * MIB, 0))  # a 20 MiB segment, cached
    # 30 MiB does not fit beside it: release_cached_blocks frees it, the retry succeeds
    assert alloc.malloc(30 * MIB, 0).addr == B
    assert actions(alloc)[1:] == [("segment_free", A, K_LARGE_BUFFER),
                                  ("segment_alloc", B, 30 * MIB)]
    with pytest.raises(OutOfMemory):
        alloc.malloc(20 * MIB, 0)


# -- expandable segments ------------------------------------------------------------------

def test_expandable_segment_grows_and_is_unmapped():
    from dataclasses import replace

    settings = replace(apply_changes(Settings(), ["expandable_segments:True"]),
                       capacity=8 << 30)
    alloc = allocator(settings)
    # find_expandable_block: no segment yet, a new one (1 1/8 of the device); map_block
    # maps whole 20 MiB pages: 30 MiB -> 40 MiB mapped; should_split (expandable: >= 512 B)
    a = alloc.malloc(30 * MIB, 0)
    base = a.addr
    assert a.size == 30 * MIB
    assert actions(alloc) == [("segment_map", base, 40 * MIB)]
    # the next 30 MiB: the free 10 MiB block plus the unmapped space after it; one more
    # page is mapped at base + 40 MiB and merged with the free block before it
    b = alloc.malloc(30 * MIB, 0)
    assert (b.addr, b.size) == (base + 30 * MIB, 30 * MIB)
    assert actions(alloc)[-1] == ("segment_map", base + 40 * MIB, 20 * MIB)
    assert alloc.reserved == 60 * MIB
    # free both: one free mapped block of 60 MiB; emptyCache unmaps its whole pages and the
    # segment, all unmapped again, is released
    alloc.free_block(a)
    alloc.free_block(b)
    alloc.empty_cache()
    assert actions(alloc)[-1] == ("segment_unmap", base, 60 * MIB)
    assert alloc.reserved == 0
    assert alloc.segments == {}


def test_expandable_unmap_keeps_partial_pages():
    from dataclasses import replace

    settings = replace(apply_changes(Settings(), ["expandable_segments:True"]),
                       capacity=8 << 30)
    alloc = allocator(settings)
    a = alloc.malloc(30 * MIB, 0)  # pages 0-1 mapped: [a 30 MiB][free 10 MiB]
    base = a.addr
    b = alloc.malloc(5 * MIB, 0)  # best fit: the free 10 MiB block -> base + 30 MiB
    assert b.addr == base + 30 * MIB
    alloc.free_block(a)  # free [base, base + 30 MiB): page 0 whole, page 1 partly
    alloc.empty_cache()
    # ExpandableSegment::unmap rounds inwards: only page 0 goes
    assert actions(alloc)[-1] == ("segment_unmap", base, 20 * MIB)
    assert alloc.reserved == 20 * MIB


# -- settings ------------------------------------------------------------------------------

def test_settings_from_a_capture_and_changes():
    recorded = from_capture({"max_split_size": -1, "expandable_segments": False,
                             "garbage_collection_threshold": 0.0,
                             "roundup_power2_divisions": {"1": 0, "2": 4}})
    assert recorded.describe() == "roundup_power2_divisions:[1:0,2:4,4:0,8:0,16:0,32:0,64:0," \
        "128:0,256:0,512:0,1024:0,2048:0,4096:0,8192:0,16384:0,32768:0]"
    changed = apply_changes(recorded, ["expandable_segments:True,max_split_size_mb:512"])
    assert changed.expandable_segments and changed.max_split_size == 512 * MIB
    assert parse_size("80GiB") == 80 << 30 and parse_size("1.5G") == 3 << 29
    for bad in (["max_split_size_mb:10"], ["nonsense:1"], ["expandable_segments:yes"],
                ["roundup_power2_divisions:3"], ["garbage_collection_threshold:2"]):
        with pytest.raises(SettingError):
            apply_changes(recorded, bad)


def test_garbage_collection_frees_the_oldest_cached_blocks_under_a_fraction():
    from dataclasses import replace

    # garbage_collect_cached_blocks: with a memory fraction (400 MiB) and threshold 0.25,
    # a malloc that finds no free block first frees unsplit large free blocks whose age
    # (get_free_block calls on the pool since they were freed) is at least the average,
    # until reserved - 100 MiB is reclaimed
    gc = replace(apply_changes(Settings(), ["garbage_collection_threshold:0.25"]),
                 capacity=400 * MIB, memory_fraction=True)
    hints = ((30 * MIB, A), (40 * MIB, B), (50 * MIB, C), (60 * MIB, C + (1 << 30)))
    alloc = allocator(gc, *hints)
    a = alloc.malloc(30 * MIB, 0)  # get_free_block call 1
    b = alloc.malloc(40 * MIB, 0)  # call 2
    alloc.free_block(a)  # freed at call count 2
    alloc.malloc(50 * MIB, 0)  # call 3: 120 MiB reserved after it, nothing collected at 70
    assert [e[0] for e in actions(alloc)] == ["segment_alloc"] * 3
    alloc.free_block(b)  # freed at call count 3
    alloc.malloc(60 * MIB, 0)  # call 4: ages a 2, b 1, average 1.5: a goes, b stays
    assert actions(alloc)[3:] == [("segment_free", A, 30 * MIB),
                                  ("segment_alloc", C + (1 << 30), 60 * MIB)]
    assert alloc.reserved == 150 * MIB
    # without a memory fraction the threshold does nothing (malloc's set_fraction &&)
    inert = allocator(replace(gc, memory_fraction=False), *hints)
    a = inert.malloc(30 * MIB, 0)
    b = inert.malloc(40 * MIB, 0)
    inert.free_block(a)
    inert.malloc(50 * MIB, 0)
    inert.free_block(b)
    inert.malloc(60 * MIB, 0)
    assert "segment_free" not in [e[0] for e in actions(inert)]
    assert inert.reserved == 180 * MIB
