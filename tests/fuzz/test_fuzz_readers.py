"""Fuzzing the two snapshot readers against each other.

Every mutated pickle (byte damage, hostile opcodes spliced in, reference bombs) is loaded
with the compiled reader, within harness.py's time and memory bounds, and with the Python
one: the outcomes must be equal (the same model and warnings, or the same one-line error).
The rest of tests/fuzz runs with the default reader, the compiled one where it is built.

The ``alone`` tests run the compiled reader by itself on the same inputs (no Python reader
behind it): it must return a snapshot equal to what the safe unpickler builds, or hand the
file over, never crash, within harness.py's memory bound.  CI runs them once more with the
reader built under AddressSanitizer (.ci/run: ``-k alone``).
"""

from __future__ import annotations

import pickle
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtui.errors import CaptureError
from memtui.sources.common.safe_pickle import load_pickle
from memtui.sources.torch_snapshot import columnar
from tests.fuzz.harness import FUZZ, MEMORY_FLOOR, MEMORY_PER_BYTE, load_bounded
from tests.fuzz.mutators import byte_damage, pickle_damage, reference_bomb
from tests.fuzz.seeds import PICKLE_SEEDS, seeds
from tests.helpers.both_readers import no_data_limit_under_asan, outcome, reader  # noqa: F401

pytestmark = [
    pytest.mark.fuzz, pytest.mark.slow,
    pytest.mark.skipif(not columnar.compiled_available(),
                       reason="the compiled reader is not built"),
]


def _both(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        with reader("compiled"):
            compiled = outcome(load_bounded(path))
        with reader("python"):
            assert compiled == outcome(load_bounded(path))


@pytest.mark.parametrize("name", PICKLE_SEEDS)
def test_seeds_read_by_the_compiled_reader(name):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(seeds()[name])
        with reader("compiled"):
            assert not isinstance(load_bounded(path), Exception)
        assert columnar.last_fallback is None


@pytest.mark.parametrize("name", PICKLE_SEEDS)
@FUZZ
@given(data=st.data())
def test_byte_damage_both_readers(name, data):
    _both(name, data.draw(byte_damage(seeds()[name])))


@pytest.mark.parametrize("name", PICKLE_SEEDS)
@FUZZ
@given(data=st.data())
def test_hostile_opcodes_both_readers(name, data):
    _both(name, data.draw(pickle_damage(seeds()[name])))
    assert not Path("/tmp/pwned").exists()


@FUZZ
@given(bomb=reference_bomb())
def test_reference_bombs_both_readers(bomb):
    _both("bomb.pickle", bomb)


def _as_lists(data):
    """The compiled reader's snapshot with each ColumnTrace back as a list of dicts."""
    if isinstance(data, dict) and isinstance(data.get("device_traces"), list):
        data = {**data, "device_traces": [
            list(t) if isinstance(t, columnar.ColumnTrace) else t
            for t in data["device_traces"]]}
    return data


def _alone(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        tracemalloc.start()
        try:
            with reader("compiled"):
                read = columnar.read_columnar(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak <= MEMORY_PER_BYTE * len(data) + MEMORY_FLOOR, (peak, len(data))
        if read is None:
            assert columnar.last_fallback
            return
        try:
            expected = load_pickle(path)
        except CaptureError as exc:
            pytest.fail(f"the compiled reader read what the safe unpickler refuses: {exc}")
        assert _same(_as_lists(read), expected)


def _same(left, right) -> bool:
    """``left == right`` for object graphs: iterative (a list nested 100,000 deep), each
    pair of shared objects compared once (a reference bomb is 2**60 leaves as a tree),
    NaN equal to NaN, types exact."""
    pending, seen = [(left, right)], set()
    while pending:
        a, b = pending.pop()
        if (id(a), id(b)) in seen:
            continue
        seen.add((id(a), id(b)))
        if type(a) is not type(b):
            return False
        if isinstance(a, list | tuple):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            pending.extend((a[key], b[key]) for key in a)
        elif isinstance(a, float):
            if not (a == b or (a != a and b != b)):
                return False
        elif a != b:
            return False
    return True


@pytest.mark.parametrize("name", PICKLE_SEEDS)
@FUZZ
@given(data=st.data())
def test_byte_damage_compiled_alone(name, data):
    _alone(name, data.draw(byte_damage(seeds()[name])))


@pytest.mark.parametrize("name", PICKLE_SEEDS)
@FUZZ
@given(data=st.data())
def test_hostile_opcodes_compiled_alone(name, data):
    _alone(name, data.draw(pickle_damage(seeds()[name])))
    assert not Path("/tmp/pwned").exists()


@FUZZ
@given(bomb=reference_bomb())
def test_reference_bombs_compiled_alone(bomb):
    _alone("bomb.pickle", bomb)


@pytest.mark.parametrize("name", PICKLE_SEEDS)
def test_seeds_compiled_alone(name):
    _alone(name, seeds()[name])
    assert columnar.last_fallback is None
    assert pickle.loads(seeds()[name])  # the seed is a real pickle
