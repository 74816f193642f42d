"""Fuzzing the loaders: mutated seed captures of every format must give a trace or one
clean CaptureError line, within the time and memory bounds of harness.py.

The short profile (default, CI) draws a fixed set of examples per test; for a soak run
``MEMTUI_FUZZ_PROFILE=long python -m pytest tests/fuzz`` (docs/development.md, "Fuzzing").
"""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtui.errors import CaptureError
from tests.fuzz.harness import FUZZ, load_bounded
from tests.fuzz.mutators import (
    CODE_RUNNING,
    PWNED,
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
    PWNED.unlink(missing_ok=True)
    result = _load(name, data.draw(pickle_damage(seeds()[name])))
    assert not PWNED.exists(), "a hostile pickle ran code while it was loaded"
    del result


@pytest.mark.parametrize("payload", list(CODE_RUNNING.values()), ids=list(CODE_RUNNING))
def test_hostile_payloads_are_live(payload):
    """The control: stock ``pickle.loads`` runs each payload, which creates the marker
    file, so the tests that find no marker after memtui read it can fail."""
    PWNED.unlink(missing_ok=True)
    try:
        pickle.loads(b"\x80\x04" + payload)
        assert PWNED.exists()
    finally:
        PWNED.unlink(missing_ok=True)


@pytest.mark.parametrize("spliced", [False, True], ids=["whole", "spliced"])
@pytest.mark.parametrize("payload", list(CODE_RUNNING.values()), ids=list(CODE_RUNNING))
def test_code_running_pickles_are_refused_and_run_nothing(payload, spliced):
    """Every code-running payload, alone or spliced into a real-shaped snapshot before its
    first dict (where an unpickler reaches it), is refused in one line; nothing runs."""
    PWNED.unlink(missing_ok=True)
    seed = seeds()[PICKLE_SEEDS[0]]
    data = seed[:2] + payload + seed[2:] if spliced else b"\x80\x04" + payload
    result = _load("evil.pickle", data)
    assert not PWNED.exists(), "a hostile pickle ran code while it was loaded"
    assert isinstance(result, CaptureError)
    assert "unsafe pickle" in str(result) and "nothing was run" in str(result)


@FUZZ
@given(bomb=reference_bomb())
def test_reference_bombs(bomb):
    _load("bomb.pickle", bomb)
