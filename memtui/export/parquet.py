"""The model's frames as Parquet files, one per frame, Arrow types kept.

``DIR/events.parquet`` and ``DIR/blocks.parquet`` always (empty frames included, with
their columns), and ``segments``, ``frames``, ``stacks``, ``markers``, ``curves``,
``calls`` where the capture has rows of them; ``DIR/meta.json`` says where they came from.
The columns are the contract of ``memtui/model.py`` (``t`` int64 ns, ``addr`` uint64,
``stack_id`` int32, ``frame_ids`` a list of int32, ...), read back as they were written by
polars, pyarrow, DuckDB or Spark.  Polars writes row group by row group from the frames
in memory (memory-mapped from the reopen cache on a reopen): no second copy of a frame.
"""

from __future__ import annotations

import json
from pathlib import Path

from memtui.model import MemoryTrace

ALWAYS = ("events", "blocks")
WHERE_PRESENT = ("segments", "frames", "stacks", "markers", "curves", "calls")
ROW_GROUP = 1_000_000


def export_parquet(trace: MemoryTrace, folder: Path) -> list[Path]:
    """Write the frames into ``folder`` (made where missing); the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ALWAYS + WHERE_PRESENT:
        frame = trace.frame(name)
        if name not in ALWAYS and frame.is_empty():
            continue
        target = folder / f"{name}.parquet"
        temp = folder / f".{name}.parquet.tmp"
        try:
            frame.write_parquet(temp, row_group_size=ROW_GROUP, statistics=True)
            temp.replace(target)
        finally:
            temp.unlink(missing_ok=True)
        written.append(target)
    meta = {"generator": "memtui", "source": trace.meta.source, "path": trace.meta.path,
            "time_unit": trace.meta.time_unit, "devices": trace.meta.device_names,
            "warnings": list(trace.meta.warnings), "files": [p.name for p in written]}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return written


__all__ = ["export_parquet"]
