"""The model's frames as Parquet files, one per frame, Arrow types kept.

``DIR/events.parquet`` and ``DIR/blocks.parquet`` always (empty frames included, with
their columns), and ``segments``, ``frames``, ``stacks``, ``markers``, ``curves``,
``calls`` where the capture has rows of them; ``DIR/roles.parquet`` each block's role
(``device, block_id, role, rule, inferred``: memory by role) where it has blocks;
``DIR/meta.json`` says where they came from.
The columns are the contract of ``memtui/model.py`` (``t`` int64 ns, ``addr`` uint64,
``stack_id`` int32, ``frame_ids`` a list of int32, ...), read back as they were written by
polars, pyarrow, DuckDB or Spark.  Polars writes row group by row group from the frames
in memory (memory-mapped from the reopen cache on a reopen): no second copy of a frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from memtui.model import MemoryTrace
from memtui.outputs import OutputFolder

ALWAYS = ("events", "blocks")
WHERE_PRESENT = ("segments", "frames", "stacks", "markers", "curves", "calls")
ROW_GROUP = 1_000_000


def is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier export of memtui's (its ``meta.json`` says so):
    such a folder is written again; any other folder with files in it is refused."""
    try:
        with open(folder / "meta.json", encoding="utf-8") as fh:
            meta = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("generator") == "memtui"


def export_parquet(trace: MemoryTrace, folder: Path,
                   inputs: Iterable[str | Path | None] = ()) -> list[Path]:
    """Write the frames into ``folder`` (made where missing, refused where it is a link),
    each file through a temporary of its own (:class:`memtui.outputs.OutputFolder`:
    never through a link, never over one of ``inputs``); the files written."""
    written = []
    with OutputFolder(folder, create=True, inputs=inputs) as out:
        for name in ALWAYS + WHERE_PRESENT:
            frame = trace.frame(name)
            if name not in ALWAYS and frame.is_empty():
                continue
            with out.atomic(f"{name}.parquet", "wb") as fh:
                frame.write_parquet(fh, row_group_size=ROW_GROUP, statistics=True)
            written.append(folder / f"{name}.parquet")
        roles = _roles(trace)
        if roles is not None:
            with out.atomic("roles.parquet", "wb") as fh:
                roles.write_parquet(fh, row_group_size=ROW_GROUP, statistics=True)
            written.append(folder / "roles.parquet")
        meta = {"generator": "memtui", "source": trace.meta.source, "path": trace.meta.path,
                "time_unit": trace.meta.time_unit, "devices": trace.meta.device_names,
                "warnings": list(trace.meta.warnings), "files": [p.name for p in written]}
        with out.atomic("meta.json", "w") as fh:
            fh.write(json.dumps(meta, indent=1) + "\n")
    return written


def _roles(trace: MemoryTrace):
    """``device, block_id, role, rule, inferred`` of every block (memory by role), None
    for a capture without blocks."""
    import polars as pl

    from memtui.analysis.roles import block_roles

    if trace.blocks.is_empty():
        return None
    return pl.concat([block_roles(trace, d).frame.with_columns(device=pl.lit(d))
                      .select("device", "block_id", "role", "rule", "inferred")
                      for d in trace.meta.device_names])


__all__ = ["export_parquet", "is_export"]
