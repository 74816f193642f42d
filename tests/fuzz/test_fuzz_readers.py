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
from tests.fuzz.mutators import (
    CODE_RUNNING,
    PWNED,
    byte_damage,
    pickle_damage,
    reference_bomb,
)
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
    PWNED.unlink(missing_ok=True)
    _both(name, data.draw(pickle_damage(seeds()[name])))
    assert not PWNED.exists(), "a hostile pickle ran code while it was loaded"


@pytest.mark.parametrize("payload", list(CODE_RUNNING.values()), ids=list(CODE_RUNNING))
def test_code_running_pickles_both_readers(payload):
    """Each reader refuses every code-running payload with the same line; nothing runs
    (tests/fuzz/test_fuzz_loaders.py shows the payloads do run under stock pickle)."""
    PWNED.unlink(missing_ok=True)
    data = b"\x80\x04" + payload
    _both("evil.pickle", data)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "evil.pickle"
        path.write_bytes(data)
        with reader("compiled"):
            result = load_bounded(path)
    assert not PWNED.exists(), "a hostile pickle ran code while it was loaded"
    assert isinstance(result, CaptureError) and "unsafe pickle" in str(result)


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
            _handed_over(path)
            return
        try:
            expected = load_pickle(path)
        except CaptureError as exc:
            pytest.fail(f"the compiled reader read what the safe unpickler refuses: {exc}")
        assert _same(_as_lists(read), expected)


def _handed_over(path: Path) -> None:
    """What the loader does with a file the compiled reader hands over: the safe
    unpickler reads it, and may only build it or refuse it in one line."""
    try:
        load_pickle(path)
    except CaptureError as exc:
        assert "\n" not in str(exc)


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
    PWNED.unlink(missing_ok=True)
    _alone(name, data.draw(pickle_damage(seeds()[name])))
    assert not PWNED.exists(), "a hostile pickle ran code while it was loaded"


@pytest.mark.parametrize("payload", list(CODE_RUNNING.values()), ids=list(CODE_RUNNING))
def test_code_running_pickles_compiled_alone(payload):
    """The compiled reader hands every code-running payload over (it builds no global),
    and the safe unpickler behind it runs nothing."""
    PWNED.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "evil.pickle"
        path.write_bytes(b"\x80\x04" + payload)
        _alone("evil.pickle", path.read_bytes())
        with reader("compiled"):
            assert columnar.read_columnar(path) is None
    assert not PWNED.exists(), "a hostile pickle ran code while it was loaded"


@FUZZ
@given(bomb=reference_bomb())
def test_reference_bombs_compiled_alone(bomb):
    _alone("bomb.pickle", bomb)


@pytest.mark.parametrize("name", PICKLE_SEEDS)
def test_seeds_compiled_alone(name):
    _alone(name, seeds()[name])
    assert columnar.last_fallback is None
    assert pickle.loads(seeds()[name])  # the seed is a real pickle
