"""The ``Ptr`` column read as numbers: msMemScope's ``0x`` hex read at once, and any other
notation (blanks around it, ``0X``, decimal, a mix) as before: worked out by hand."""

from __future__ import annotations

import polars as pl
import pytest

from memtui.sources.memscope.read import addresses


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
