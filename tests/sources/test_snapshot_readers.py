"""The compiled snapshot reader and the Python one give the same model, warnings and errors.

Every real snapshot in ../shared/data/torch_snapshots, the demos, snapshots hypothesis
makes (entries of every shape the builder reads, values the check drops, shared and
unshared frame lists, one and many devices, protocols 2 to 5) and hand-made hostile
pickles go through both readers; the outcome (every frame of the model with its dtypes,
the metadata with its warnings, or the error's one line) must be equal.  Where the
compiled reader should have read a file itself (a clean snapshot), the test also checks
that it did, so that a reader that always hands over to Python fails here.
"""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.sources.common import safe_pickle
from memtui.sources.torch_snapshot import columnar
from tests.conftest import shared_files
from tests.helpers.both_readers import load_with, no_data_limit_under_asan, outcome, reader  # noqa: F401

pytestmark = pytest.mark.skipif(not columnar.compiled_available(),
                                reason="the compiled reader is not built "
                                       "(python setup.py build_ext --inplace)")

DEMOS = Path(__file__).resolve().parents[2] / "snapshots"
REAL = shared_files("torch_snapshots", "*.p*")


def both(path: Path) -> tuple[tuple, tuple, str | None]:
    """(compiled outcome, Python outcome, why the compiled reader handed over or None)."""
    compiled = outcome(load_with("compiled", path))
    fallback = columnar.last_fallback
    return compiled, outcome(load_with("python", path)), fallback


@pytest.mark.parametrize("path", REAL + sorted(DEMOS.glob("*.pickle")), ids=lambda p: p.name)
def test_real_snapshots_read_alike(path):
    compiled, python, fallback = both(path)
    assert fallback is None, f"the compiled reader handed {path.name} over: {fallback}"
    assert compiled == python


def test_real_snapshots_present():
    if not REAL:
        pytest.skip("../shared/data/torch_snapshots is absent")
    assert len(REAL) >= 9


def test_pure_python_switch(tmp_path):
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    with reader("python"):
        assert columnar.read_columnar(path) is None
        assert "MEMTUI_PURE_PYTHON" in columnar.reader_in_use()
    with reader("compiled"):
        data = columnar.read_columnar(path)
        assert isinstance(data["device_traces"][0], columnar.ColumnTrace)
        assert "compiled" in columnar.reader_in_use()


# -- columns worked out by hand -----------------------------------------------------------------


def test_columns_by_hand(tmp_path):
    frames_a = [{"filename": "a.py", "line": 1, "name": "f"}]
    trace = [
        {"action": "alloc", "addr": 2**64 - 1, "size": 10, "stream": -3, "time_us": 5,
         "frames": frames_a},
        {"action": "free_requested", "addr": 0, "size": 0, "stream": 0, "frames": frames_a,
         "compile_context": "N/A"},
        {"action": "oom", "size": 7, "device_free": 3, "frames": None, "time_us": None},
    ]
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=5))
    with reader("compiled"):
        column_trace = columnar.read_columnar(path)["device_traces"][0]
    assert len(column_trace) == 3
    columns = column_trace.columns()
    assert columns.action is None  # the codes stand for it
    assert columns.actions().to_list() == ["alloc", "free_requested", "oom"]
    assert columns.rows_with_action(("oom", "annotate")) == [2]
    assert columns.action_names_at(np.array([False, True, True])) == ["free_requested", "oom"]
    assert columns.addr.to_list() == [2**64 - 1, 0, None]
    assert columns.size.to_list() == [10, 0, 7]
    assert columns.stream.to_list() == [-3, 0, None]
    assert columns.time_us.to_list() == [5, None, None]
    assert columns.frame_codes.tolist() == [0, 0, -1]  # one list: the memo shares it
    assert columns.frame_lists[0] == frames_a
    assert column_trace[2] == {"action": "oom", "size": 7, "frames": None, "time_us": None,
                               "device_free": 3}
    assert column_trace[1]["compile_context"] == "N/A"
    assert "compile_context" not in column_trace[0]
    assert column_trace.values("compile_context") == [None, "N/A", None]


def test_equal_frame_lists_share_a_code(tmp_path):
    """Lists of the same frame objects are one stack; a list of other objects is another."""
    frame = {"filename": "a.py", "line": 1, "name": "f"}
    other = {"filename": "a.py", "line": 1, "name": "f"}  # equal content, another object
    trace = [{"action": "alloc", "addr": 1, "size": 1, "frames": [frame]},
             {"action": "alloc", "addr": 2, "size": 1, "frames": [frame]},
             {"action": "alloc", "addr": 3, "size": 1, "frames": [other]}]
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4))
    with reader("compiled"):
        columns = columnar.read_columnar(path)["device_traces"][0].columns()
    assert columns.frame_codes.tolist() == [0, 0, 1]
    compiled, python, fallback = both(path)
    assert fallback is None and compiled == python


def test_equal_texts_in_a_row_are_held_once(tmp_path):
    """A text equal to the one before it in its column (``compile_context``'s "N/A", each
    entry's own object in the file) is held as that one object; other texts keep their
    places, and a later reference to a text the memo held gets the same text back."""
    texts = ["N/A", "N/A", "f.py:3", "N/A", "N/A"]
    fresh = ["".join(list(text)) for text in texts]  # five objects, none shared
    assert len(set(map(id, fresh))) == 5
    trace = [{"action": "alloc", "addr": i, "size": 1, "compile_context": text}
             for i, text in enumerate(fresh)]
    later = [{"filename": fresh[1], "line": 1, "name": fresh[4]}]  # memo references
    trace.append({"action": "alloc", "addr": 9, "size": 1, "frames": later})
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4))
    with reader("compiled"):
        column_trace = columnar.read_columnar(path)["device_traces"][0]
    values = column_trace.values("compile_context")
    assert values == [*texts, None]
    assert values[0] is values[1] and values[3] is values[4]
    assert values[2] is not values[1] and values[3] is not values[0]
    assert column_trace[5]["frames"] == [{"filename": "N/A", "line": 1, "name": "N/A"}]
    compiled, python, fallback = both(path)
    assert fallback is None and compiled == python



def test_equal_tuples_and_numbers_in_a_row_are_held_once(tmp_path):
    """``pool_id``'s ``(0, 0)`` in every entry (torch 2.13+, each entry's own tuple in the
    file) is held as one tuple while it repeats, as are equal large integers; a tuple of
    other values, of another length or holding a list is its own, and the values read are
    the file's."""
    pools = [(0, 0), (0, 0), (1, 7), (1, 7), (0, 0, 0), ("a", 2**40), ("a", 2**40),
             ([1], 0), ([1], 0), 2**40, 2**40]
    fresh = [tuple(list(p)) if isinstance(p, tuple) else p + 0 for p in pools]
    trace = [{"action": "alloc", "addr": i, "size": 1, "pool_id": value}
             for i, value in enumerate(fresh)]
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4))
    with reader("compiled"):
        column_trace = columnar.read_columnar(path)["device_traces"][0]
    values = column_trace.values("pool_id")
    assert values == pools
    assert values[0] is values[1] and values[2] is values[3] and values[5] is values[6]
    assert values[9] is values[10]
    assert values[1] is not values[2] and values[4] is not values[0]
    assert values[7] is not values[8]  # a list inside: not compared, not shared
    compiled, python, fallback = both(path)
    assert fallback is None and compiled == python

# -- generated snapshots --------------------------------------------------------------------------

FRAME_POOL = [{"filename": f"/src/m{i}.py", "line": i, "name": f"f{i}"} for i in range(4)]
ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "annotate", "workspace_snapshot",
           "mystery"]
#: Values the Python check drops an entry for (the compiled reader hands such files over).
BAD_VALUES = [-1, 2**64, 2**40, True, 1.5, "x", [1]]


@st.composite
def entries(draw, clean: bool):
    entry = {"action": draw(st.sampled_from(ACTIONS))}
    entry["size"] = draw(st.integers(0, 2**40))
    if draw(st.booleans()):
        entry["addr"] = draw(st.integers(0, 2**64 - 1))
    if draw(st.booleans()):
        entry["stream"] = draw(st.integers(-(2**63), 2**63 - 1))
    if draw(st.booleans()):
        entry["time_us"] = draw(st.one_of(st.none(), st.integers(0, 2**53)))
    frames = draw(st.sampled_from(["none", "absent", "shared", "fresh", "empty"]))
    if frames == "none":
        entry["frames"] = None
    elif frames == "shared":
        entry["frames"] = SHARED_STACKS[draw(st.integers(0, len(SHARED_STACKS) - 1))]
    elif frames == "fresh":
        entry["frames"] = draw(st.lists(st.sampled_from(FRAME_POOL), max_size=4))
    elif frames == "empty":
        entry["frames"] = []
    for key, values in (("compile_context", st.sampled_from(["N/A", "region", ""])),
                        ("user_metadata", st.text(max_size=5)),
                        ("pool_id", st.tuples(st.integers(0, 3), st.integers(0, 3))),
                        ("segment_pool_id", st.tuples(st.integers(0, 3), st.integers(0, 3))),
                        ("device_free", st.integers(0, 2**40)),
                        ("forward_frames", st.lists(st.text(max_size=8), max_size=2))):
        if draw(st.integers(0, 3)) == 0:
            entry[key] = draw(values)
    if not clean and draw(st.integers(0, 5)) == 0:
        key = draw(st.sampled_from(["size", "addr", "stream", "time_us", "action", "frames"]))
        entry[key] = draw(st.sampled_from([*BAD_VALUES, None]))
    return entry


SHARED_STACKS = [FRAME_POOL[:2], FRAME_POOL[1:], []]


@st.composite
def snapshots(draw, clean: bool):
    traces = draw(st.lists(st.lists(entries(clean), max_size=12), min_size=1, max_size=3))
    segments = []
    for i in range(draw(st.integers(0, 2))):
        size = draw(st.sampled_from([512, 2048]))
        blocks = [{"address": 0x1000 * (i + 1), "size": size,
                   "state": draw(st.sampled_from(["active_allocated", "inactive",
                                                  "active_pending_free"])),
                   "requested_size": size, "frames": FRAME_POOL[:1]}]
        segments.append({"device": 0, "address": 0x1000 * (i + 1), "total_size": size,
                         "stream": 0, "segment_type": "small", "blocks": blocks,
                         "segment_pool_id": (0, 0)})
    snapshot = {"segments": segments, "device_traces": traces}
    if draw(st.booleans()):
        snapshot["external_annotations"] = [
            {"stage": "START", "name": "step", "device": 0, "time_us": 1},
            {"stage": "END", "name": "step", "device": 0, "time_us": 9}]
    if draw(st.booleans()):
        snapshot["allocator_settings"] = {"expandable_segments": False, "max_split_size": -1}
    return snapshot


def _write(tmp_path: Path, snapshot: dict, protocol: int) -> Path:
    path = tmp_path / f"gen_{protocol}.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=protocol))
    return path


SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(snapshot=snapshots(clean=True), protocol=st.integers(2, 5))
def test_generated_clean_snapshots(tmp_path, snapshot, protocol):
    compiled, python, fallback = both(_write(tmp_path, snapshot, protocol))
    assert fallback is None, fallback
    assert compiled == python


@SETTINGS
@given(snapshot=snapshots(clean=False), protocol=st.integers(2, 5))
def test_generated_snapshots_with_bad_values(tmp_path, snapshot, protocol):
    compiled, python, _ = both(_write(tmp_path, snapshot, protocol))
    assert compiled == python


# -- hostile and odd pickles ----------------------------------------------------------------------


def _entry(addr: int) -> dict:
    return {"action": "alloc", "addr": addr, "size": 16, "stream": 0}


def _hostile_cases() -> dict[str, bytes]:
    entry = _entry(0x10)
    shared_trace = [_entry(0x20)]
    cases = {
        # the same entry object twice: the Python reader's business
        "shared entry": pickle.dumps({"segments": [], "device_traces": [[entry, entry]]}, 4),
        "shared trace": pickle.dumps({"segments": [], "device_traces": [shared_trace,
                                                                        shared_trace]}, 4),
        "truncated": pickle.dumps({"segments": [], "device_traces": [[entry]]}, 4)[:-7],
        "empty": b"",
        "header only": b"\x80\x04",
        "global": b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system"
                  b"\x93\x8c\x04true\x85R.",
        "huge memo index": b"\x80\x04}r\xff\xff\xff\x7f.",
        "huge string length": b"\x80\x04X\xff\xff\xff\x7f" + b"a" * 16 + b".",
        "frame past the end": b"\x80\x04\x95" + struct.pack("<Q", 2**40) + b"}.",
        "a list, not a dict": pickle.dumps([1, 2, 3], 4),
        "entry not a dict": pickle.dumps({"segments": [], "device_traces": [[1, 2]]}, 4),
        "stack left at stop": b"\x80\x04}}.",
        "big int in entry": pickle.dumps({"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 2**80, "size": 1}]]}, 4),
        "key twice": _entry_with_repeated_key(),
    }
    return cases


def _entry_with_repeated_key() -> bytes:
    """An entry whose ``size`` is set twice (a dict keeps the last)."""
    out = io.BytesIO()
    out.write(b"\x80\x04}(\x8c\x08segments]\x8c\x0ddevice_traces](](}(")
    out.write(b"\x8c\x06action\x8c\x05alloc\x8c\x04sizeK\x01\x8c\x04sizeK\x02u")
    out.write(b"eeu.")
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(_hostile_cases()))
def test_hostile_pickles_read_alike(tmp_path, name):
    path = tmp_path / "h.pickle"
    path.write_bytes(_hostile_cases()[name])
    compiled, python, fallback = both(path)
    assert compiled == python
    if name in ("shared entry", "shared trace", "global", "huge memo index", "truncated",
                "huge string length", "frame past the end", "entry not a dict",
                "big int in entry", "key twice"):
        assert fallback is not None  # the compiled reader handed it over


def test_repeated_key_is_read(tmp_path):
    """The hand-made pickle above is a valid snapshot (the Python reader keeps size 2)."""
    path = tmp_path / "h.pickle"
    path.write_bytes(_entry_with_repeated_key())
    assert pickle.loads(path.read_bytes())["device_traces"][0][0]["size"] == 2


def test_progress_while_reading(tmp_path, monkeypatch):
    """The compiled reader tells the listener the bytes read, up to the whole file; a
    listener that fails does not stop the read (as with the Python reader)."""
    monkeypatch.setattr(safe_pickle, "REPORT_EVERY", 0.0)
    trace = [_entry(0x10 * i) for i in range(1, 200_000)]
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4))
    size = path.stat().st_size
    seen = []
    with reader("compiled"):
        assert columnar.read_columnar(path, lambda done, total: seen.append((done, total)))
    assert len(seen) > 1 and seen == sorted(seen)
    assert seen[-1] == (size, size) and {total for _, total in seen} == {size}

    def broken(done, total):
        raise RuntimeError("listener broke")

    with reader("compiled"):
        data = columnar.read_columnar(path, broken)
    assert len(data["device_traces"][0]) == len(trace)


def test_unknown_actions_are_named_and_dropped_alike(tmp_path):
    """An action no version of torch writes is left out with one warning naming it, the
    same from the codes of the compiled reader as from the Python reader's texts."""
    trace = [{"action": "alloc", "addr": 16, "size": 8, "stream": 0, "frames": []},
             {"action": "bogus", "addr": 16, "size": 8, "stream": 0, "frames": []},
             {"action": "zz_new", "addr": 32, "size": 8, "stream": 0, "frames": []},
             {"action": "free_completed", "addr": 16, "size": 8, "stream": 0, "frames": []}]
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4))
    compiled, python, fallback = both(path)
    assert fallback is None and compiled == python
    trace_of = load_with("compiled", path)
    assert any("2 trace entries with unknown actions ['bogus', 'zz_new'] ignored" in w
               for w in trace_of.meta.warnings)
    assert trace_of.events["action"].to_list() == ["alloc", "free"]
