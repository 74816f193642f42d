"""DB Attr (JSON) into columns: the head msMemScope writes is read in one pass, any other
layout key by key, each key's first occurrence deciding (answers worked out by hand)."""

from __future__ import annotations

import polars as pl
import pytest

from memtui.sources.memscope.read import parse_attr

COLUMNS = ("aid", "size", "raw_size", "total", "owner", "ineff", "apool")


@pytest.mark.parametrize(("attr", "expected"), [
    # msMemScope's own head, a MALLOC with everything
    ('{"allocation_id":"25","addr":"0x0020616937938944","size":"1850880","total":"41943040",'
     '"used":"31245824","owner":"PTA@model@weight","inefficient_type":"early_allocation"}',
     (25, 1850880, 1850880, 41943040, "PTA@model@weight", "early_allocation", None)),
    # an ACCESS: the pool is its type
    ('{"allocation_id":"25","addr":"0x1","size":"64","type":"PTA","dtype":"torch.float16",'
     '"shape":"[2, 3]"}', (25, 64, 64, None, None, None, "PTA")),
    # total after another key, not right after the size
    ('{"allocation_id":"7","addr":"0x1","size":"5","used":"3","total":"99"}',
     (7, 5, 5, 99, None, None, None)),
    # the Insight prototype's spaces
    ('{"allocation_id": "7", "addr": "0x1", "size": "5", "total": "9"}',
     (7, 5, 5, 9, None, None, None)),
    # keys in another order; a negative size (2025 frees) is taken by its magnitude
    ('{"addr":"0x1","allocation_id":"8","size":"-5","total":"1"}',
     (8, 5, -5, 1, None, None, None)),
    # an id past int64, a size that is not a number
    ('{"allocation_id":"99999999999999999999","addr":"0x1","size":"5"}',
     (None, 5, 5, None, None, None, None)),
    ('{"allocation_id":"1","addr":"0x1","size":"5x"}',
     (1, None, None, None, None, None, None)),
    # the first total decides, even unreadable
    ('{"allocation_id":"1","addr":"0x1","size":"5","total":"x","total":"7"}',
     (1, 5, 5, None, None, None, None)),
    # an escaped quote in a text stays as written
    ('{"allocation_id":"1","addr":"0x1","size":"5","total":"3","owner":"a\\"b","type":"PTA"}',
     (1, 5, 5, 3, 'a\\"b', None, "PTA")),
    # a number without quotes, no Attr at all
    ('{"size":512}', (None,) * 7),
    (None, (None,) * 7),
])
def test_json_attr(attr, expected):
    parsed = parse_attr(pl.DataFrame({"attr": [attr]}, schema={"attr": pl.String}), True)
    assert parsed.select(COLUMNS).row(0) == expected


def test_rows_of_both_layouts_keep_their_order():
    head = '{"allocation_id":"%d","addr":"0x1","size":"%d","total":"%d"}'
    other = '{"addr":"0x1","size":"%d","allocation_id":"%d","total":"%d"}'
    attrs = [head % (1, 10, 100), other % (20, 2, 200), head % (3, 30, 300),
             other % (40, 4, 400)]
    parsed = parse_attr(pl.DataFrame({"attr": attrs}), True)
    assert parsed["aid"].to_list() == [1, 2, 3, 4]
    assert parsed["size"].to_list() == [10, 20, 30, 40]
    assert parsed["total"].to_list() == [100, 200, 300, 400]
