"""The ``Ptr`` column read as numbers: msMemScope's ``0x`` hex read at once, and any other
notation (blanks around it, ``0X``, decimal, a mix) as before: worked out by hand; the
compiled pass that reads msMemScope's notation in the fetching thread held to it."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.sources.memscope import attr as attr_module
from memtui.sources.memscope.attr import decode_pointers
from memtui.sources.memscope.read import _pointers_read, addresses
from tests.helpers.run_profile import by_profile


@pytest.mark.parametrize(("texts", "numbers"), [
    (["0x10", "0xff", None], [16, 255, None]),
    (["0x10 ", "0x1"], [16, 1]),  # a trailing blank: the general way trims it
    ([" 0x10", "16"], [16, 16]),  # hex and decimal in one column
    (["16", "32"], [16, 32]),
    (["0X1f", "0x2"], [31, 2]),
    (["0xzz", "0x1"], [None, 1]),  # not a number: null, the rest kept
    (["0x"], [None]),
    (["0xffffffffffffffff"], [None]),  # beyond int64, as the reader always took it
    ([], []),
])
def test_pointer_texts_as_numbers(texts, numbers):
    frame = pl.DataFrame({"ptr": texts}, schema={"ptr": pl.String})
    got = addresses(frame)
    assert got.dtype == pl.UInt64
    assert got.to_list() == numbers


# -- the compiled pass (``_rows.pointers``), in the fetching thread ------------------------

needs_compiled = pytest.mark.skipif(attr_module._rows is None,
                                    reason="the compiled Attr pass is not built "
                                           "(python setup.py build_ext --inplace)")
PIECES = ["0x", "0X", "0", "x", "f", "F", "a", "g", "7", " ", "+", "-", "N/A", "é",
          "7fffffffffffffff", "8000000000000000", "ffffffffffffffff", "000000000000000001"]


def compiled(array: pa.Array | pa.ChunkedArray) -> list:
    got = decode_pointers(array)
    assert got is not None and got.dtype == pl.UInt64
    return got.to_list()


def reference(texts: list[str | None]) -> list:
    """What the compiled pass must give: the reference's number where the text is
    msMemScope's notation (``0x`` then hex digits only), null elsewhere."""
    numbers = addresses(pl.DataFrame({"ptr": texts}, schema={"ptr": pl.String})).to_list()
    return [number if text is not None and text.startswith("0x")
            and all(c in "0123456789abcdefABCDEF" for c in text[2:]) else None
            for text, number in zip(texts, numbers, strict=True)]


@needs_compiled
@pytest.mark.parametrize(("text", "number"), [
    ("0x10", 16), ("0xFf", 255), ("0x000012c04140e000", 0x12C04140E000),
    ("0x7fffffffffffffff", 2**63 - 1),
    ("0x8000000000000000", None),  # beyond int64: the reference's null
    ("0x00000000000000001", 1),  # 17 digits, leading zeros: as the reference reads it
    ("0x0000000000000000000000000000000000008000000000000000", None),
    ("0x", None), ("0x1g", None), ("0X10", None), (" 0x10", None), ("0x10 ", None),
    ("0x+1", None), ("16", None), ("N/A", None), ("", None), (None, None),
])
def test_pointers_worked_out_by_hand(text, number):
    """Only msMemScope's own notation is read here; every other text is null, and the
    reader takes such a chunk the general way (:func:`addresses`)."""
    assert compiled(pa.array([text], pa.string())) == [number]


@needs_compiled
@settings(max_examples=by_profile(200, 1500), deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(PIECES),
                                                        st.text(max_size=3)),
                                              max_size=5).map("".join)),
                min_size=1, max_size=12), st.data())
def test_pointers_give_the_references_numbers(texts, data):
    """Sliced, wide and chunked arrays: the reference's number wherever the text is
    ``0x`` and hex digits, null elsewhere."""
    expected = reference(texts)
    assert compiled(pa.array(texts, pa.string())) == expected
    start = data.draw(st.integers(0, len(texts) - 1))
    for kind in (pa.string(), pa.large_string()):
        assert compiled(pa.array(texts, kind).slice(start)) == expected[start:]
    chunked = pa.chunked_array([pa.array(texts[:start], pa.string()),
                                pa.array(texts[start:], pa.string())])
    assert compiled(chunked) == expected


@needs_compiled
def test_pointer_buffers_that_lie_are_refused():
    array = pa.array(["0x10", "0x20"], pa.string())
    _, offsets, data = array.buffers()
    pointers = attr_module._rows.pointers
    with pytest.raises(ValueError):
        pointers(data, pa.array([0, 4, 4000], pa.int32()).buffers()[1], None, 0, 2, False)
    with pytest.raises(ValueError):
        pointers(data, pa.array([4, 0, 8], pa.int32()).buffers()[1], None, 0, 2, False)
    with pytest.raises(ValueError):  # more rows than the offsets hold
        pointers(data, offsets, None, 0, 5, False)
    with pytest.raises(ValueError):
        pointers(data, offsets, None, -1, 1, False)


def test_pure_python_forced_reads_pointers_the_general_way(monkeypatch):
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1")
    assert decode_pointers(pa.array(["0x10"], pa.string())) is None


@pytest.mark.parametrize(("texts", "read", "numbers"), [
    (["0x10", None], [16, None], [16, None]),  # every Ptr read by the pass: its numbers
    (["0x10", " 0x20"], [16, None], [16, 32]),  # one it did not read: the general way
    (["0x10", "0x20"], [99, 98], [99, 98]),  # (what the pass read is what is kept)
])
def test_a_chunk_takes_the_pass_numbers_only_where_it_read_every_pointer(texts, read, numbers):
    frame = pl.DataFrame({"ptr": texts, "_addr": read},
                         schema={"ptr": pl.String, "_addr": pl.UInt64})
    assert _pointers_read(frame).to_list() == numbers
