"""The replay's start pool laid from the dump (memtui/analysis/replay/allocator.py,
``CachingAllocator._lay``): a segment's allocated blocks in address order with the free
ranges between them; a block the dump breaks (overlapping the one before, empty, or
running past its segment's end) is left out (None), never laid.  Worked by hand on a
4 KiB segment at 0x10000."""

from __future__ import annotations

from memtui.analysis.replay.allocator import BlockPool, CachingAllocator, Segment

BASE, SIZE = 0x10000, 0x1000


def _laid(allocated):
    segment = Segment(BASE, SIZE, 0, False)
    return CachingAllocator._lay(BASE, SIZE, allocated, 0, BlockPool(is_small=False), segment)


def _shape(pieces):
    return [(b.addr, b.size, b.allocated) for b in pieces]


def test_a_block_past_the_segment_end_is_left_out_and_one_ending_at_it_is_laid():
    out, pieces = _laid([(BASE, 0x400), (BASE + 0x800, 0x900), (BASE + 0x800, 0x800)])
    assert [None if b is None else (b.addr, b.size) for b in out] == [
        (BASE, 0x400), None, (BASE + 0x800, 0x800)]
    assert _shape(pieces) == [(BASE, 0x400, True), (BASE + 0x400, 0x400, False),
                              (BASE + 0x800, 0x800, True)]


def test_overlapping_and_empty_blocks_are_left_out_the_rest_free():
    out, pieces = _laid([(BASE + 0x100, 0x200), (BASE + 0x200, 0x100), (BASE + 0x300, 0)])
    assert [b is None for b in out] == [False, True, True]
    assert _shape(pieces) == [(BASE, 0x100, False), (BASE + 0x100, 0x200, True),
                              (BASE + 0x300, SIZE - 0x300, False)]
