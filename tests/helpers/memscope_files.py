"""Tiny msMemScope files for tests, written as the tool (and MindStudio Insight) write them.

``SCENARIO`` is one process on NPU 0 whose right answers are worked out by hand in
tests/sources/test_memscope_small.py; ``write_db`` and ``write_dump_csv`` write any rows.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

COLUMNS = ["ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id", "Thread Id",
           "Device Id", "Ptr", "Attr", "Call Stack(Python)", "Call Stack(C)"]
TRACE_COLUMNS = ["FuncInfo", "StartTime(ns)", "EndTime(ns)", "Thread Id", "Process Id"]
PY_STACK = '"/home/u/train.py(10): forward\n/home/u/train.py(20): <module>\n"'
#: Scenario times are offsets in ns from T0 (msMemScope writes ns since 1970).
T0 = 1_764_753_083_000_000_000
C_STACK = ('"/lib/libhook.so(halMemAlloc+0x118) [0xf79b279760c8]\n'
           '/lib/libruntime.so(+0x3e1214) [0xf79abf7d1214]\n"')


def attr(**values) -> str:
    """DB Attr: JSON whose values are all strings (msMemScope's FixJson)."""
    return json.dumps({k: str(v) for k, v in values.items()}, separators=(",", ":"))


def row(id_, event, etype, t, dev="0", ptr="N/A", name="N/A", pid=100, tid=100, attrs=None,
        py="", c=""):
    return (id_, event, etype, name, T0 + t, pid, tid, dev, ptr,
            attr(**attrs) if attrs is not None else "{}", py, c)


def mem(id_, event, etype, t, aid, addr, size=None, dev="0", name="N/A", py="", c="", **more):
    attrs = {"allocation_id": aid, "addr": f"0x{addr:016x}"}
    if size is not None:
        attrs["size"] = size
    attrs.update(more)
    return row(id_, event, etype, t, dev=dev, ptr=f"0x{addr:016x}", name=name, attrs=attrs,
               py=py, c=c)


#: The hand-worked capture (see test_memscope_small.py for the expected figures),
#: in the order msMemScope writes it: memory rows when their block is freed.
SCENARIO = [
    row(1, "SYSTEM", "START_TRACE", 1000, dev="N/A"),
    row(16, "MSTX", "Range_start", 1150, name='"step"'),
    row(18, "OP_LAUNCH", "ATEN_START", 1210, name="torch._ops.aten.add.Tensor"),
    row(20, "KERNEL_LAUNCH", "KERNEL_LAUNCH", 1220, name="k1", attrs={"streamId": 2}),
    row(15, "MSTX", "Mark", 1250, name='"hello"'),
    row(19, "OP_LAUNCH", "ATEN_END", 1290, name="torch._ops.aten.add.Tensor"),
    mem(3, "MALLOC", "PTA", 1200, 2, 0x1000, 1024, py=PY_STACK, total=4096, used=1024,
        owner="PTA@model@weight"),
    mem(4, "ACCESS", "WRITE", 1220, 2, 0x1000, 1024, name="aten.add", type="PTA"),
    mem(6, "ACCESS", "READ", 1580, 2, 0x1000, 1024, name="aten.add", type="PTA"),
    mem(7, "FREE", "PTA", 1600, 2, 0x1000, 1024, total=4096, used=2048),
    row(14, "SYSTEM", "STEP", 1700, dev="N/A", name="1"),
    mem(11, "FREE", "PTA", 2900, 4, 0x2000, 512, total=4096, used=1536),
    row(17, "MSTX", "Range_end", 3050, name='"step"'),
    mem(5, "MALLOC", "PTA", 1400, 3, 0x1400, 2048, py=PY_STACK, total=4096, used=3072,
        owner="PTA@ops@aten", inefficient_type="early_allocation,temporary_idleness"),
    mem(8, "ACCESS", "READ", 2500, 3, 0x1400, 2048, type="PTA"),
    mem(9, "ACCESS", "WRITE", 2600, 3, 0x1400, 2048, type="PTA"),
    mem(10, "ACCESS", "READ", 2700, 3, 0x1400, 2048, type="PTA"),
    mem(13, "FREE", "PTA", 3100, 3, 0x1400, 2048, total=8192, used=256),
    row(22, "SNAPSHOT", "SNAPSHOT", 3150, name="Memory Snapshot",
        attrs={"allocated": 256, "reserved": 8192}),
    row(23, "OOM_DETAIL", "OOM_TRIGGER", 3160, attrs={"func": "malloc", "req_size": 1 << 30}),
    row(21, "SYSTEM", "STOP_TRACE", 3200, dev="N/A"),
    # Never freed: written at the end.
    mem(2, "MALLOC", "HAL", 1100, 1, 0x1000, 4096, c=C_STACK, page_type="huge"),
    mem(12, "MALLOC", "PTA", 3000, 5, 0x3000, 256, total=4096, used=2304, owner="PTA"),
    mem(24, "ACCESS", "READ", 3010, 5, 0x3000, 256, type="PTA"),
]


def _ns(offset: str) -> str:
    return offset if offset == "N/A" else str(T0 + int(offset))


#: python_trace_100 rows: (FuncInfo, start, end, tid, pid), written at return time.
SCENARIO_TRACE = [(func, _ns(start), _ns(end), tid, pid) for func, start, end, tid, pid in [
    ("/m.py(3): c", "1200", "1300", 100, 100),
    ("/m.py(2): b", "1100", "1500", 100, 100),
    ("start: /m.py(9): e", "N/A", "1050", 100, 100),
    ("/m.py(4): d", "1600", "1900", 100, 100),
    ("/m.py(1): a", "1000", "2000", 100, 100),
    ("stop: /m.py(5): f", "2500", "N/A", 100, 100),
    ("/m.py(6): g", "1300", "1400", 200, 100),
    ("/m.py(7): h", "1500", "1400", 200, 100),  # ends before it starts: skipped
]]


def write_db(path: Path, rows, table: str = "memscope_dump", columns=COLUMNS,
             traces: dict[int, list] | None = None, insight: bool = False,
             wal: bool = False) -> Path:
    """An SQLite file as msMemScope writes it (``insight``: as Insight leaves it)."""
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    types = {"ID": "INTEGER", "Timestamp(ns)": "INTEGER", "Process Id": "INTEGER",
             "Thread Id": "INTEGER"}
    decl = ", ".join(f'"{c}" {types.get(c, "TEXT")}' for c in columns)
    if insight:
        decl = decl.replace('"ID" INTEGER', '"ID" INTEGER PRIMARY KEY')
    con.execute(f"CREATE TABLE {table} ({decl})")
    width = len(columns)
    con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * width)})",
                    [tuple(r[:width]) for r in rows])
    for pid, trace_rows in (traces or {}).items():
        trace_decl = ('"FuncInfo" TEXT, "StartTime(ns)" TEXT, "EndTime(ns)" TEXT, '
                      '"Thread Id" INTEGER, "Process Id" INTEGER')
        con.execute(f"CREATE TABLE python_trace_{pid} ({trace_decl})")
        con.executemany(f"INSERT INTO python_trace_{pid} VALUES (?,?,?,?,?)", trace_rows)
        if insight:
            con.execute(f"ALTER TABLE python_trace_{pid} ADD COLUMN Depth INTEGER DEFAULT -1")
    if insight:
        _insight_additions(con, table)
    con.commit()
    con.close()
    return path


def _insight_additions(con: sqlite3.Connection, table: str) -> None:
    """What MindStudio Insight adds to a file it opens (../shared/formats/msmemscope.md 2.4)."""
    con.executescript(f"""
        CREATE TABLE status_info(id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, value TEXT);
        INSERT INTO status_info(key, value) VALUES ('MEM_SCOPE_PARSE_STATUS', 'FINISH');
        CREATE TABLE memory_allocation (id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
            timestamp integer, totalSize integer, optimized integer, deviceId text(255),
            eventType text(255));
        INSERT INTO memory_allocation(timestamp, totalSize, optimized, deviceId, eventType)
            VALUES (1200, 1024, 0, '0', 'PTA');
        CREATE TABLE memory_block (id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
            deviceId text(255), addr TEXT(255), size integer, startTimestamp integer,
            endTimestamp integer, eventType text(255), owner text(255), attr TEXT(255),
            processId integer, threadId integer, firstAccessTimestamp integer,
            lastAccessTimestamp integer, maxAccessInterval integer);
        CREATE INDEX idx_{table}_timestamp ON {table} ("Timestamp(ns)");
        CREATE INDEX idx_{table}_event ON {table} ("Event");
        CREATE INDEX idx_{table}_device ON {table} ("Device Id");
        PRAGMA user_version = 2026060219;
    """)


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path
