"""Fuzzing the loaders: mutated seed captures of every format must give a trace or one
clean CaptureError line, within the time and memory bounds of harness.py.

The short profile (default, CI) draws a fixed set of examples per test; for a soak run
``MEMTUI_FUZZ_PROFILE=long python -m pytest tests/fuzz`` (docs/development.md, "Fuzzing").
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import FUZZ, load_bounded
from tests.fuzz.mutators import (
    byte_damage,
    csv_damage,
    pickle_damage,
    reference_bomb,
    sqlite_page_damage,
)
from tests.fuzz.seeds import CSV_SEEDS, DB_SEEDS, PICKLE_SEEDS, seeds

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]


def _load(name: str, data: bytes):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        return load_bounded(path)


@pytest.mark.parametrize("name", sorted(seeds()))
def test_every_seed_loads(name):
    assert not isinstance(_load(name, seeds()[name]), Exception)


@pytest.mark.parametrize("name", sorted(seeds()))
@FUZZ
@given(data=st.data())
def test_byte_damage(name, data):
    _load(name, data.draw(byte_damage(seeds()[name])))


@pytest.mark.parametrize("name", CSV_SEEDS)
@FUZZ
@given(data=st.data())
def test_csv_cells_and_columns(name, data):
    _load(name, data.draw(csv_damage(seeds()[name])))


@pytest.mark.parametrize("name", DB_SEEDS)
@FUZZ
@given(data=st.data())
def test_sqlite_pages(name, data):
    _load(name, data.draw(sqlite_page_damage(seeds()[name])))


@pytest.mark.parametrize("name", PICKLE_SEEDS)
@FUZZ
@given(data=st.data())
def test_hostile_pickle_opcodes(name, data):
    result = _load(name, data.draw(pickle_damage(seeds()[name])))
    assert not Path("/tmp/pwned").exists()
    del result


@FUZZ
@given(bomb=reference_bomb())
def test_reference_bombs(bomb):
    _load("bomb.pickle", bomb)
