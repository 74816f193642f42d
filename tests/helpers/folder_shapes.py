"""Folders of captures in the shapes runs leave them, for the tests of what a folder means.

Each builder writes one capture whose figures are known by hand:

* :func:`snapshot`: a PyTorch snapshot of ``rank`` on ``cuda:{rank}`` peaking at
  ``peak`` bytes (``tests/helpers/rank_folders.rank_snapshot``);
* :func:`memscope_dump`: an msMemScope DB of :data:`~tests.helpers.memscope_files.SCENARIO`
  (one device, ``npu:0``);
* :func:`profiler_rank`: a ``*_ascend_pt`` folder of rank ``rank`` whose level peaks at
  ``mib`` MiB, with one 1 MiB operator block;
* :func:`loose_group`: the same files laid flat in a folder with a name prefix
  (``<prefix>memory_record.csv``, ``<prefix>operator_memory.csv``,
  ``<prefix>profiler_info_0.json`` naming ``rank``), as copies of several runs are kept.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from tests.helpers.memscope_files import SCENARIO, write_db
from tests.helpers.profiler_folders import OPERATOR_HEADER, RECORD_HEADER
from tests.helpers.rank_folders import rank_snapshot

MiB = 1 << 20
TAB = "\t"


def snapshot(path: Path, rank: int = 0, peak: int = 16 * MiB) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(rank_snapshot(rank, peak=peak), protocol=4))
    return path


def memscope_dump(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_db(path, SCENARIO)


def _record(device: int, mib: int) -> str:
    rows = [f"PTA+GE,{1000 + i}.000{TAB},{level}.0,{mib + 8}.0,{level}.0,7,NPU:{device}"
            for i, level in enumerate((1, mib, 2))]
    return "\n".join([RECORD_HEADER, *rows]) + "\n"


def _operators(device: int) -> str:
    row = (f"aten::empty,1024.0,1000.500{TAB},1001.500{TAB},1001.500{TAB},1.000{TAB},"
           f"1.000{TAB},1.0,8.0,1.0,1.0,8.0,1.0,7,NPU:{device}")
    return f"{OPERATOR_HEADER}\n{row}\n"


def profiler_rank(parent: Path, name: str, rank: int, device: int = 0, mib: int = 10) -> Path:
    root = parent / name
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory_record.csv").write_text(_record(device, mib))
    (out / "operator_memory.csv").write_text(_operators(device))
    (root / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    return root


def loose_group(folder: Path, prefix: str, rank: int, device: int = 0,
                mib: int = 10) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{prefix}memory_record.csv").write_text(_record(device, mib))
    (folder / f"{prefix}operator_memory.csv").write_text(_operators(device))
    (folder / f"{prefix}profiler_info_0.json").write_text(json.dumps({"rank_id": rank}))
    return folder / f"{prefix}memory_record.csv"
