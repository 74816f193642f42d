"""Fuzzing the two snapshot readers against each other.

Every mutated pickle (byte damage, hostile opcodes spliced in, reference bombs) is loaded
with the compiled reader, within harness.py's time and memory bounds, and with the Python
one: the outcomes must be equal (the same model and warnings, or the same one-line error).
The rest of tests/fuzz runs with the default reader, the compiled one where it is built.
CI runs this file once more with the reader built under AddressSanitizer (.ci/run).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtui.sources.torch_snapshot import columnar
from tests.fuzz.harness import FUZZ, load_bounded
from tests.fuzz.mutators import byte_damage, pickle_damage, reference_bomb
from tests.fuzz.seeds import PICKLE_SEEDS, seeds
from tests.helpers.both_readers import outcome, reader

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
