"""Capture files whose every string is hostile: control characters, newlines, bidi, ``::``.

Written to disk (not traces in memory) so that every command reads them as a user's file:

* :func:`write_hostile_snapshot`: a PyTorch snapshot of a training loop with a leak and an
  OOM, every frame name and file name, the step annotations and the OOM's frames hostile;
* :func:`write_hostile_memscope`: an msMemScope DB with a leaking block, hostile owners,
  step and mark names, op names and Python call stacks;
* :func:`write_hostile_profiler`: an Ascend profiler folder (``*_ascend_pt``) whose
  operator names are hostile.

:data:`HOSTILE` holds the strings; :func:`scan` says what in an output would reach a
terminal, a CI log or a page raw (an empty list where nothing does).
"""

from __future__ import annotations

import pickle
import unicodedata
from pathlib import Path

from tests.helpers.compare_traces import MiB, loop_snapshot
from tests.helpers.memscope_files import mem, row, write_db
from tests.helpers.profiler_folders import OPERATOR_HEADER, RECORD_HEADER

#: Strings a hostile file may carry: a GitHub workflow command after a newline, an OSC
#: title escape, CR, NUL, BEL, the bidi overrides and isolates of "Trojan Source", U+2028
#: (a line break to JavaScript and some log viewers), a string that begins with ``::``.
HOSTILE = [
    "remember\n::warning title=x::INJECTED\x1b]0;owned\x07",
    "::error file=a.py,line=1::FROM A FRAME",
    "fwd\r::add-mask::secret\x00\x1b[2J",
    "admin\u202e\u2066 ::set-output name=x::y\u2069\u200f",
    "line\u2028::notice::sep\u0085x",
    "  ::group::indented\t\x7f",
    "##vso[task.setvariable variable=X]owned",
    "##[group]azure",
]
BIDI = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)),
        *map(chr, range(0x2066, 0x206A))}


def scan(text: str, *, newlines: bool = True) -> list[str]:
    """What in ``text`` is unsafe: a raw control, format (bidi, zero-width) or separator
    character (``newlines``: LF allowed between lines), or a line a CI runner reads as a
    workflow command (``::`` at its start, after any blanks).  Empty where it is safe."""
    found = []
    for char in sorted(set(text)):
        if char == "\n" and newlines:
            continue
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") or char in BIDI:
            found.append(f"raw {char!r}")
    found += [f"CI command: {line[:60]!r}" for line in text.split("\n")
              if line.lstrip(" \t\r\x0b\x0c").startswith(("::", "##"))]
    return found


def _hostile_frames(frames: list[dict], k: int) -> list[dict]:
    return [{**frame, "name": f"{HOSTILE[(k + i) % len(HOSTILE)]}{frame['name']}",
             "filename": f"/home/u/{HOSTILE[(k + i + 1) % len(HOSTILE)]}.py"}
            for i, frame in enumerate(frames)]


def hostile_snapshot(leak: int = MiB) -> dict:
    """The loop of ``compare_traces`` (8 steps, a leak of ``leak`` per step, two stacks of
    temporaries), every string made hostile, and an OOM with a hostile stack at the end."""
    snapshot = loop_snapshot(steps=8, leak=leak, temporaries=MiB // 2)
    renamed: dict[int, list[dict]] = {}

    def rename(frames: list[dict]) -> list[dict]:
        key = id(frames)
        if key not in renamed:
            renamed[key] = _hostile_frames(frames, len(renamed))
        return renamed[key]

    trace = snapshot["device_traces"][0]
    for entry in trace:
        entry["frames"] = rename(entry["frames"])
    for segment in snapshot["segments"]:
        for block in segment["blocks"]:
            block["frames"] = rename(block["frames"])
    for k, note in enumerate(snapshot["external_annotations"]):
        note["name"] = f"{HOSTILE[k % len(HOSTILE)]}#{k // 2}"
    trace.append({"action": "oom", "addr": 0, "size": 80 * MiB, "stream": 0,
                  "device_free": MiB, "time_us": trace[-1]["time_us"] + 5,
                  "frames": _hostile_frames(trace[0]["frames"], 3)})
    return snapshot


def write_hostile_snapshot(path: Path, leak: int = MiB) -> Path:
    path.write_bytes(pickle.dumps(hostile_snapshot(leak), protocol=4))
    return path


def _py_stack(k: int) -> str:
    name = HOSTILE[k % len(HOSTILE)].replace("\n", " ")  # one frame per line, as written
    return f"/home/u/{HOSTILE[(k + 1) % len(HOSTILE)]}.py({10 + k}): {name}\n" \
           "/home/u/train.py(20): <module>\n"


def write_hostile_memscope(path: Path) -> Path:
    """An msMemScope DB: 8 steps (hostile step names) each allocating a block freed in
    the step and one never freed (a leak, a hostile owner and Python stack), marks and
    op launches named hostile."""
    rows, ident, t = [], 1, 1000
    rows.append(row(ident, "SYSTEM", "START_TRACE", t, dev="N/A"))
    used = 0
    for step in range(8):
        ident += 1
        t += 1000
        names = [HOSTILE[(step + k) % len(HOSTILE)] for k in range(3)]
        rows.append(row(ident, "SYSTEM", "STEP", t, dev="N/A", name=names[0]))
        ident += 1
        rows.append(row(ident, "MSTX", "Mark", t + 10, name=f'"{names[1]}"'))
        ident += 1
        rows.append(row(ident, "OP_LAUNCH", "ATEN_START", t + 20, name=names[2]))
        for keep in (False, True):
            aid = 100 + 2 * step + keep
            addr = 0x10_0000 + aid * 0x1_0000
            used += 4096
            ident += 1
            rows.append(mem(ident, "MALLOC", "PTA", t + 30 + keep, aid, addr, 4096,
                            py=_py_stack(step + keep), total=1 << 20, used=used,
                            owner=f"PTA@{HOSTILE[(step + keep) % len(HOSTILE)]}"))
            if not keep:
                used -= 4096
                ident += 1
                rows.append(mem(ident, "FREE", "PTA", t + 40, aid, addr, 4096,
                                total=1 << 20, used=used))
    rows.append(row(ident + 1, "SYSTEM", "STOP_TRACE", t + 500, dev="N/A"))
    return write_db(path, rows)


def write_hostile_profiler(parent: Path) -> Path:
    """A ``hostile_ascend_pt`` folder: levels rising to a peak, operators named hostile."""
    out = parent / "hostile_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    levels = [10, 30, 60, 40, 70, 20]
    records = [f"PTA+GE,{1000 + i}.000\t,{mib}.0,100.0,{mib}.0,7,NPU:0"
               for i, mib in enumerate(levels)]
    (out / "memory_record.csv").write_text("\n".join([RECORD_HEADER, *records]) + "\n")
    ops = []
    for i, name in enumerate(HOSTILE):
        quoted = '"' + name.replace('"', '""') + '"'
        ops.append(f"{quoted},{(i + 1) * 1024}.0,{1000 + i}.000\t,{1003 + i}.000\t,"
                   f"{1003 + i}.000\t,3.000\t,3.000\t,10.0,100.0,10.0,10.0,100.0,10.0,7,NPU:0")
    (out / "operator_memory.csv").write_text("\n".join([OPERATOR_HEADER, *ops]) + "\n")
    (parent / "hostile_ascend_pt" / "profiler_info_0.json").write_text('{"rank_id": 0}')
    return parent / "hostile_ascend_pt"
