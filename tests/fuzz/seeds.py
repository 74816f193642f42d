"""Small seed captures of every format, as bytes, for the mutators to start from.

Each seed is a name (the loaders sniff by content, but the name is the one the tool
writes) and the bytes of a capture the loaders read cleanly.
"""

from __future__ import annotations

import csv
import io
import pickle
import tempfile
from functools import cache
from pathlib import Path

from tests.helpers.memscope_files import COLUMNS, SCENARIO, SCENARIO_TRACE, TRACE_COLUMNS, write_db
from tests.sources.test_ascend_profiler import OPERATOR_15, RECORD_7, make_pytorch_db

_FRAMES = [{"filename": "/src/model.py", "line": 10, "name": "forward"},
           {"filename": "/src/train.py", "line": 3, "name": "main"}]


def snapshot_object() -> dict:
    """A two-device snapshot: segments with blocks, a trace with every action kind."""
    trace = [
        {"action": "segment_alloc", "addr": 0x1000, "size": 4096, "stream": 0, "time_us": 1},
        {"action": "alloc", "addr": 0x1000, "size": 1024, "stream": 0, "time_us": 2,
         "frames": _FRAMES},
        {"action": "alloc", "addr": 0x1400, "size": 512, "stream": 0, "time_us": 3,
         "frames": _FRAMES[1:]},
        {"action": "free_requested", "addr": 0x1400, "size": 512, "stream": 0, "time_us": 4},
        {"action": "free_completed", "addr": 0x1400, "size": 512, "stream": 0, "time_us": 5},
        {"action": "annotate", "addr": 0, "size": 0, "stream": 0, "time_us": 6,
         "user_metadata": "step 1"},
        {"action": "oom", "addr": 0, "size": 1 << 30, "stream": 0, "time_us": 7,
         "device_free": 100},
    ]
    segment = {"device": 0, "address": 0x1000, "total_size": 4096, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "blocks": [
                   {"address": 0x1000, "size": 1024, "requested_size": 1024,
                    "state": "active_allocated", "frames": _FRAMES},
                   {"address": 0x1400, "size": 3072, "state": "inactive"}]}
    other = dict(segment, device=1, address=0x9000, blocks=[
        {"address": 0x9000, "size": 4096, "state": "active_pending_free"}])
    return {"segments": [segment, other], "device_traces": [trace, []],
            "external_annotations": [
                {"device": 0, "name": "fwd", "stage": "START", "time_us": 2},
                {"device": 0, "name": "fwd", "stage": "END", "time_us": 5}]}


def _csv(columns, rows) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue().encode()


def _csv_attr(row: tuple) -> tuple:
    """A DB row as the CSV writes it: Attr as ``{k:v,...}``, not JSON."""
    import json

    attrs = json.loads(row[9]) if row[9].startswith("{") else {}
    text = "{" + ",".join(f"{k}:{v}" for k, v in attrs.items()) + "}"
    return (*row[:9], text, *row[10:])


def _file_bytes(build) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        return Path(build(Path(folder))).read_bytes()


@cache
def seeds() -> dict[str, bytes]:
    """File name -> bytes of every seed capture."""
    return {
        "snapshot.pickle": pickle.dumps(snapshot_object(), protocol=4),
        "snapshot_p2.pickle": pickle.dumps(snapshot_object(), protocol=2),
        "memscope_dump_1.db": _file_bytes(
            lambda d: write_db(d / "memscope_dump_1.db", SCENARIO, traces={100: SCENARIO_TRACE})),
        "memscope_dump_1.csv": _csv(COLUMNS, [_csv_attr(r) for r in SCENARIO]),
        "python_trace_1.csv": _csv(TRACE_COLUMNS, SCENARIO_TRACE),
        "memory_record.csv": RECORD_7.encode(),
        "operator_memory.csv": OPERATOR_15.encode(),
        "ascend_pytorch_profiler_0.db": _file_bytes(
            lambda d: make_pytorch_db(d / "ascend_pytorch_profiler_0.db")),
    }


CSV_SEEDS = [name for name in ("memscope_dump_1.csv", "python_trace_1.csv",
                               "memory_record.csv", "operator_memory.csv")]
DB_SEEDS = ["memscope_dump_1.db", "ascend_pytorch_profiler_0.db"]
PICKLE_SEEDS = ["snapshot.pickle", "snapshot_p2.pickle"]
