"""Address parsing and lookup (analysis.addresses) on the hand trace and a real file."""

from __future__ import annotations

import pytest

from memtui.analysis.layout.addresses import AddressBook, AddressQuery, parse_address
from memtui.analysis.timeline.live import device_index
from memtui.sources import open_capture
from memtui.sources.common.safe_pickle import load_pickle
from tests.helpers.hand_snapshot import SNAPSHOTS, us, write_hand_snapshot


@pytest.mark.parametrize("text, want", [
    ("0x7f064c000000", [AddressQuery(0x7F064C000000)]),
    ("0X7F064C000000", [AddressQuery(0x7F064C000000)]),
    ("7f064c000000", [AddressQuery(0x7F064C000000)]),
    ("b7f064c000000_0", [AddressQuery(0x7F064C000000, "b", 0)]),
    ("s7f064c000000_12", [AddressQuery(0x7F064C000000, "s", 12)]),
    ("b7f064c000000", [AddressQuery(0x7F064C000000, "b", None)]),
    (" 5120 ", [AddressQuery(5120), AddressQuery(0x5120)]),
    ("139,665,369,792,512", [AddressQuery(139665369792512), AddressQuery(0x139665369792512)]),
    ("hello", []),
    ("", []),
    ("0x", []),
])
def test_parse_address(text, want):
    assert parse_address(text) == want


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    trace = open_capture(write_hand_snapshot(tmp_path_factory.mktemp("addr") / "h.pickle"))
    index = device_index(trace, "cuda:0")
    return index, AddressBook(index)


def _addr_of(index, hit):
    return int(index.addr[index.row_of_block(hit.block_id)])


def test_versions_count_lifetimes_at_an_address(book):
    index, names = book
    got = {names.block_name(r) for r in range(index.block_id.size)}
    # 0x1400: b2 then b4; 0x10000: the ghost g1 freed in the trace
    assert got == {"b1000_0", "b10000_0", "b10200_0", "b1400_0", "b1400_1", "b1800_0"}
    assert {names.segment_name(r) for r in range(index.seg_id.size)} == {
        "s1000_0", "s10000_0"}


def test_versioned_name_finds_that_lifetime(book):
    index, names = book
    hit = names.find_text("b1400_1", us(3))  # b4, not alive at the cursor: go to it
    row = index.row_of_block(hit.block_id)
    assert index.size[row] == 512 and hit.t == us(9)
    assert names.segment_name(index.row_of_segment(hit.segment_id)) == "s1000_0"
    hit = names.find_text("b1400_0", us(3))
    assert index.size[index.row_of_block(hit.block_id)] == 1024 and hit.t == us(3)


def test_plain_address_prefers_what_is_alive(book):
    index, names = book
    assert _addr_of(index, names.find_text("0x1500", us(3))) == 0x1400  # inside b2
    assert names.find_text("0x1400", us(9)).block_id == names.find_text("b1400_1", 0).block_id
    # nothing at 0x1400 at 7: b2 ended at 6, nearer than b4 starting at 9
    hit = names.find_text("0x1400", us(7))
    assert hit.block_id == names.find_text("b1400_0", 0).block_id and hit.t == us(3)
    assert _addr_of(index, names.find_text("5120", us(3))) == 0x1400  # decimal


def test_segments_and_misses(book):
    index, names = book
    hit = names.find_text("s10000_0", us(9))
    assert hit.block_id is None and hit.t == us(9)
    assert index.seg_addr[index.row_of_segment(hit.segment_id)] == 0x10000
    hit = names.find_text("0x1F00", us(9))  # free space of segment A
    assert hit.block_id is None
    assert index.seg_addr[index.row_of_segment(hit.segment_id)] == 0x1000
    assert names.find_text("0x999999", us(9)) is None
    assert names.find_text("junk", us(9)) is None


def test_every_final_block_of_a_real_file_is_found_by_its_name():
    path = SNAPSHOTS / "t26_cs336_kk_ctx512_fullstep.pickle"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = open_capture(path)
    index = device_index(trace, "cuda:0")
    names = AddressBook(index)
    raw = load_pickle(path)
    active = [b for s in raw["segments"] for b in s["blocks"] if b["state"] != "inactive"]
    for block in active[:: max(len(active) // 40, 1)]:
        hit = names.find_text(hex(block["address"]), index.t_end)
        row = index.row_of_block(hit.block_id)
        assert int(index.addr[row]) == block["address"] and hit.t == index.t_end
        assert names.find_text(names.block_name(row), 0).block_id == hit.block_id
