"""Hypothesis strategies that damage a seed capture the ways real files get damaged or
forged: truncation, byte flips, moved and repeated chunks, CSV cells and columns of the
wrong kind, corrupted SQLite pages, hostile pickle opcodes and reference bombs."""

from __future__ import annotations

import os
import pickle
import struct
import tempfile
from pathlib import Path

from hypothesis import strategies as st

#: Cells a CSV column should never hold but files do.
HOSTILE_CELLS = ["", "-1", "-4096", "NaN", "nan", "inf", "-inf", "1e300", "-1e300",
                 "18446744073709551616", "9223372036854775808", "abc", "N/A", "0x10",
                 '{"size":"512"}', "{size:-512}", "[/]", "\x1b[31m", "\x00", "é", '"',
                 "1.5", " 7 ", "NPU:-1", "NPU:999999999999"]


@st.composite
def byte_damage(draw, data: bytes) -> bytes:
    """One to three of: truncation, byte flips, a moved chunk, a repeated chunk."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "move", "repeat", "insert"]))
        size = len(data)
        if size < 4:
            break
        if kind == "truncate":
            del data[draw(st.integers(1, size - 1)):]
        elif kind == "flip":
            for _ in range(draw(st.integers(1, 8))):
                at = draw(st.integers(0, size - 1))
                data[at] = draw(st.integers(0, 255))
        elif kind in ("move", "repeat"):
            start = draw(st.integers(0, size - 2))
            length = draw(st.integers(1, min(256, size - start)))
            chunk = bytes(data[start:start + length])
            if kind == "move":
                del data[start:start + length]
            at = draw(st.integers(0, len(data)))
            data[at:at] = chunk * (draw(st.integers(1, 4)) if kind == "repeat" else 1)
        else:
            at = draw(st.integers(0, size))
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@st.composite
def csv_damage(draw, data: bytes) -> bytes:
    """Cells replaced by hostile ones, columns dropped, duplicated or swapped."""
    lines = data.decode("utf-8").split("\n")
    rows = [line.split(",") for line in lines]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cell", "cell", "drop_column", "dup_column", "swap",
                                     "header_cell"]))
        width = max(len(r) for r in rows)
        column = draw(st.integers(0, width - 1))
        if kind == "cell" and len(rows) > 1:
            row = rows[draw(st.integers(1, len(rows) - 1))]
            if column < len(row):
                row[column] = draw(st.sampled_from(HOSTILE_CELLS))
        elif kind == "header_cell":
            rows[0][min(column, len(rows[0]) - 1)] = draw(st.sampled_from(HOSTILE_CELLS))
        elif kind == "drop_column":
            rows = [r[:column] + r[column + 1:] for r in rows]
        elif kind == "dup_column":
            rows = [r[:column + 1] + r[column:] for r in rows]
        else:
            other = draw(st.integers(0, width - 1))
            for r in rows:
                if column < len(r) and other < len(r):
                    r[column], r[other] = r[other], r[column]
    return "\n".join(",".join(r) for r in rows).encode("utf-8", "surrogatepass")


@st.composite
def sqlite_page_damage(draw, data: bytes) -> bytes:
    """Random bytes written into one to three pages (page 1's header kept or not)."""
    data = bytearray(data)
    page_size = struct.unpack(">H", data[16:18])[0] or 65536
    pages = max(1, len(data) // page_size)
    for _ in range(draw(st.integers(1, 3))):
        page = draw(st.integers(0, pages - 1))
        low = 100 if page == 0 and draw(st.booleans()) else 0
        start = page * page_size + low
        for _ in range(draw(st.integers(1, 32))):
            at = draw(st.integers(start, min(len(data), start + page_size - low) - 1))
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


#: The file a code-running payload creates where it runs: one per test process (the
#: fuzz tests assert it never appears; ``test_hostile_payloads_are_live`` that stock
#: ``pickle.loads`` does make it).
PWNED = Path(tempfile.gettempdir()) / f"memtui-fuzz-pwned-{os.getpid()}"


def _short(text: str) -> bytes:
    """``text`` as a SHORT_BINUNICODE operand (protocol 4)."""
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data


#: Pickles that run code where an unpickler resolves globals, each creating :data:`PWNED`
#: by a different way in: GLOBAL + REDUCE of os.system (protocol 0 text), STACK_GLOBAL +
#: REDUCE of builtins.open (no shell), and INST of os.system.
CODE_RUNNING = {
    "global-reduce": f"cos\nsystem\n(S'touch {PWNED}'\ntR.".encode(),
    "stack-global": _short("builtins") + _short("open") + b"\x93" + _short(str(PWNED))
    + _short("w") + b"\x86R.",
    "inst": f"(S'touch {PWNED}'\nios\nsystem\n.".encode(),
}

#: Opcode snippets that would run code, exhaust memory or recurse without the guards.
HOSTILE_OPCODES = [
    *CODE_RUNNING.values(),
    b"N" + b"r" + struct.pack("<I", 2**27),  # LONG_BINPUT far past the memo
    b"p99999999999\n",  # PUT with a text index
    b"\x8d" + struct.pack("<Q", 2**40),  # BINUNICODE8 claiming a terabyte
    b"\x8e" + struct.pack("<Q", 2**40),  # BINBYTES8
    b"\x8a" + b"\x08" + b"\xff" * 8,  # LONG1
    b"\x8b" + struct.pack("<i", 2**30),  # LONG4 claiming a gigabyte
    b"]" * 100_000 + b"a" * 99_999,  # a list nested 100,000 deep
    b"(" * 10_000,  # marks without end
    b"Q",  # BINPERSID
    b"\x97",  # NEXT_BUFFER (out-of-band)
    b"h\xff",  # BINGET of an empty memo slot
]


@st.composite
def pickle_damage(draw, data: bytes) -> bytes:
    """A hostile opcode snippet spliced in, or the whole pickle replaced by one."""
    snippet = draw(st.sampled_from(HOSTILE_OPCODES))
    if draw(st.booleans()):
        return b"\x80\x04" + snippet + (b"." if not snippet.endswith(b".") else b"")
    at = draw(st.integers(2, len(data) - 1))
    return data[:at] + snippet + data[at:]


@st.composite
def reference_bomb(draw) -> bytes:
    """Small pickles whose object graph is huge: shared segments, blocks, traces, labels."""
    from tests.fuzz.seeds import snapshot_object

    snapshot = snapshot_object()
    kind = draw(st.sampled_from(["segments", "blocks", "entries", "label", "frames"]))
    times = draw(st.sampled_from([10, 1000, 100_000]))
    if kind == "segments":
        snapshot["segments"] = snapshot["segments"][:1] * times
    elif kind == "blocks":
        snapshot["segments"][0]["blocks"] = snapshot["segments"][0]["blocks"][:1] * times
    elif kind == "entries":
        snapshot["device_traces"][0] = snapshot["device_traces"][0][:2] * times
    elif kind == "label":
        bomb: list = ["x"]
        for _ in range(draw(st.integers(5, 60))):
            bomb = [bomb, bomb]
        target = draw(st.sampled_from(["user_metadata", "device", "name", "segment_type"]))
        if target == "user_metadata":
            snapshot["device_traces"][0][5]["user_metadata"] = bomb
        elif target == "name":
            snapshot["external_annotations"][0]["name"] = bomb
        else:
            snapshot["segments"][0][target] = bomb
    else:
        frames = [{"filename": "/a.py", "line": 1, "name": "f"}] * times
        for entry in snapshot["device_traces"][0]:
            entry["frames"] = frames
    return pickle.dumps(snapshot, protocol=draw(st.sampled_from([2, 4, 5])))
