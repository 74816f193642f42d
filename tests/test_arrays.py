"""memtui.arrays.unique_sorted: the same values as ``np.unique``, found by sorting; and no
module calls a bare ``np.unique`` (numpy 2.3+'s hash table, a hundred times slower here)."""

from __future__ import annotations

import ast

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.arrays import unique_sorted
from tests.conftest import REPO


def _sorting_unique(values: np.ndarray) -> np.ndarray:
    """np.unique's own sorting path (asking for the index makes it sort)."""
    return np.unique(values, return_index=True)[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300))
def test_same_values_as_numpy_for_int64(values):
    array = np.array(values, dtype=np.int64)
    got = unique_sorted(array)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, _sorting_unique(array))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=100))
def test_same_values_as_numpy_for_floats_with_nans(values):
    array = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(unique_sorted(array), _sorting_unique(array))


def test_worked_by_hand():
    assert unique_sorted(np.array([5, 1, 5, 3, 1])).tolist() == [1, 3, 5]
    assert unique_sorted(np.array([[2, 2], [0, 9]])).tolist() == [0, 2, 9]  # flattened
    assert unique_sorted(np.array([], dtype=np.int64)).size == 0
    got = unique_sorted(np.array([np.nan, 1.0, np.nan, 0.5]))
    assert got[:2].tolist() == [0.5, 1.0] and np.isnan(got[2]) and got.size == 3


def _bare_unique_calls(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "unique" and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("np", "numpy")
                and not any(k.arg and k.arg.startswith("return_") for k in node.keywords)):
            yield node.lineno


def bare_unique_calls(paths) -> list[str]:
    """``path:line`` of every bare ``np.unique(values)`` in ``paths``."""
    return [f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{line}"
            for path in paths for line in _bare_unique_calls(path)]


def test_no_bare_np_unique():
    """No module of memtui calls np.unique(values) (numpy 2.4's slow hash table): the
    offenders are listed."""
    paths = sorted((REPO / "memtui").rglob("*.py"))
    assert len(paths) > 100
    assert bare_unique_calls(paths) == [], "use memtui.arrays.unique_sorted"


def test_a_bare_np_unique_is_found(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import numpy as np\n"
                     "a = np.unique([3, 1])\n"
                     "b, idx = np.unique([3, 1], return_index=True)\n")
    assert bare_unique_calls([probe]) == [f"{probe}:2"]
