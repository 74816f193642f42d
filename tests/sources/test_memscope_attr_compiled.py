"""DB Attr read by the compiled pass (``_rows.c``) gives the polars reference's columns on
every text: hypothesis-made ones from an alphabet of the characters the rules turn on
(quotes, backslashes, Unicode white space, signs, the keys themselves), hand-picked ones
whose answers are worked out, Arrow arrays sliced, wide and with nulls, and buffers that
lie about their offsets (a ValueError, never a read out of bounds)."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.sources.memscope import attr as attr_module
from memtui.sources.memscope.attr import NUMBERS, TEXTS, decode_json_attr
from memtui.sources.memscope.read import parse_attr
from tests.helpers.run_profile import by_profile

needs_compiled = pytest.mark.skipif(attr_module._rows is None,
                                    reason="the compiled Attr pass is not built "
                                           "(python setup.py build_ext --inplace)")
COLUMNS = (*NUMBERS, *TEXTS)
KEYS = ['"allocation_id":', '"size":', '"total":', '"owner":', '"inefficient_type":',
        '"type":', '"addr":', '"used":']
PIECES = ['"', "\\", ":", ",", "{", "}", " ", "-", "+", "0", "7", "12", "99999999999999999999",
          "9223372036854775807", "9223372036854775808", "-9223372036854775808", "x", "é",
          "\n", "\t", "\x0b", "\x1c", "\u00a0", "\u0085", "\u1680", "\u2003", "\u200b",
          "\u2028", "\u202f", "\u205f", "\u3000", "PTA@ops", "early,late", '\\"', "\\\n"]


def reference(values: list[str | None]) -> pl.DataFrame:
    frame = pl.DataFrame({"attr": values}, schema={"attr": pl.String})
    return parse_attr(frame, attr_json=True).select(COLUMNS)


def compiled(array: pa.Array) -> pl.DataFrame:
    decoded = decode_json_attr(array)
    assert decoded is not None
    return decoded.select(COLUMNS)


def attr_texts() -> st.SearchStrategy[str | None]:
    piece = st.one_of(st.sampled_from(KEYS), st.sampled_from(PIECES),
                      st.text(max_size=4))
    return st.one_of(st.none(), st.lists(piece, max_size=14).map("".join))


@needs_compiled
@settings(max_examples=by_profile(200, 1500), deadline=None)
@given(st.lists(attr_texts(), min_size=1, max_size=12))
def test_compiled_gives_the_reference_columns(values):
    assert compiled(pa.array(values, pa.string())).equals(reference(values))


@needs_compiled
@settings(max_examples=by_profile(50, 400), deadline=None)
@given(st.lists(attr_texts(), min_size=2, max_size=12), st.data())
def test_sliced_and_wide_arrays(values, data):
    start = data.draw(st.integers(0, len(values) - 1))
    stop = data.draw(st.integers(start, len(values)))
    for kind in (pa.string(), pa.large_string()):
        array = pa.array(values, kind).slice(start, stop - start)
        assert compiled(array).equals(reference(values[start:stop]))
    chunked = pa.chunked_array([pa.array(values[:start], pa.string()),
                                pa.array(values[start:], pa.string())])
    assert compiled(chunked).equals(reference(values))


@needs_compiled
@pytest.mark.parametrize(("text", "expected"), [
    # the writer's own MALLOC
    ('{"allocation_id":"25","addr":"0x0020616937938944","size":"1850880","total":"41943040",'
     '"used":"31245824","owner":"PTA@model@weight","inefficient_type":"early_allocation"}',
     (25, 1850880, 41943040, "PTA@model@weight", "early_allocation", None)),
    # a sign, a space and a quote before a number; a quote missing after it
    ('{"size":" +7","total": "-3"}', (None, 7, -3, None, None, None)),
    ('{"size":"7', (None,) * 6),
    # past int64 (by one), the smallest int64
    ('{"allocation_id":"9223372036854775808","size":"-9223372036854775808"}',
     (None, -9223372036854775808, None, None, None, None)),
    # Unicode white space before a text (no-break space, ideographic space) is skipped,
    # a zero-width space is not white space
    ('{"owner":\u00a0\u3000"a","type":\u200b"PTA"}', (None, None, None, "a", None, None)),
    # an escaped quote stays, an escaped newline ends nothing: no text
    ('{"owner":"a\\"b","type":"x\\\ny"}', (None, None, None, 'a\\"b', None, None)),
    # a non-ASCII character before the key counts as one character, not two
    ('é"owner":"x"', (None, None, None, "x", None, None)),
    # empty owner and inefficient type are none; an empty type is a text
    ('{"owner":"","inefficient_type":"","type":""}', (None, None, None, None, None, "")),
])
def test_worked_out_by_hand(text, expected):
    assert compiled(pa.array([text], pa.string())).row(0) == expected
    assert reference([text]).row(0) == expected


@needs_compiled
def test_buffers_that_lie_are_refused():
    array = pa.array(['{"size":"1"}', '{"size":"2"}'], pa.string())
    validity, offsets, data = array.buffers()
    bad_offsets = pa.array([0, 12, 4000], pa.int32()).buffers()[1]
    with pytest.raises(ValueError):
        attr_module._rows.decode(data, bad_offsets, None, 0, 2, False)
    backwards = pa.array([12, 0, 24], pa.int32()).buffers()[1]
    with pytest.raises(ValueError):
        attr_module._rows.decode(data, backwards, None, 0, 2, False)
    with pytest.raises(ValueError):  # more rows than the offsets hold
        attr_module._rows.decode(data, offsets, None, 0, 5, False)
    with pytest.raises(ValueError):
        attr_module._rows.decode(data, offsets, None, -1, 1, False)


def test_pure_python_forced_reads_with_the_reference(monkeypatch):
    monkeypatch.setenv("MEMTUI_PURE_PYTHON", "1")
    assert decode_json_attr(pa.array(['{"size":"1"}'], pa.string())) is None
    assert "polars" in attr_module.attr_in_use()
