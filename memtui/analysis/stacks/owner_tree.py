"""Bytes by owner layer, as a tree (Insight's memory disassembly at a clicked time).

Each block's path is its memory layer (the ``pool``: PTA, HAL, ATB, CUDA...) then the
parts of its ``owner`` split at ``@`` and ``/`` (msMemScope ``PTA@weight``,
``@optimizer_state``, user labels; the layer's own name leading the owner is not repeated),
or ``(no owner)``.  The paths are interned as the
frames and stacks of a :class:`~memtui.analysis.stacks.stack_tree.StackTree`, so the Stacks
screen draws, opens, searches and filters this tree as it does call stacks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from memtui.analysis.stacks.stack_tree import StackTree
from memtui.model import MemoryTrace

NO_OWNER = "(no owner)"


def owner_paths(blocks: pl.DataFrame) -> pl.Series:
    """Per block: its path from the layer down (a list of names)."""
    pool = pl.col("pool").fill_null("?") if "pool" in blocks.columns else pl.lit("?")
    owner = pl.col("owner").fill_null("") if "owner" in blocks.columns else pl.lit("")
    owner = owner.str.strip_prefix(pool.cast(pl.String) + "@")  # PTA@weight under PTA
    parts = owner.str.replace_all("/", "@").str.split("@").list.eval(
        pl.element().filter(pl.element().str.len_chars() > 0))
    parts = pl.when(parts.list.len() > 0).then(parts).otherwise(pl.lit([NO_OWNER]))
    return blocks.select(path=pl.concat_list(pool.cast(pl.String), parts))["path"]


@dataclasses.dataclass(frozen=True)
class OwnerTree:
    """The tree and, per block row of the frame it was built from, its path's id."""

    tree: StackTree
    codes: np.ndarray

    def block_rows_under(self, node: int, rows: np.ndarray) -> np.ndarray:
        """Those of ``rows`` whose path passes through ``node``."""
        if node == 0:
            return rows
        return rows[np.isin(self.codes[rows], self.tree.stacks_under(node))]


def owner_tree(trace: MemoryTrace, blocks: pl.DataFrame) -> OwnerTree:
    """The owner-layer tree of ``blocks`` (a device's blocks, in the index's order)."""
    paths = owner_paths(blocks)
    keys = paths.list.join("\x1f")
    distinct = keys.unique(maintain_order=True)
    codes = keys.to_frame("k").join(
        distinct.to_frame("k").with_row_index("code"), on="k", how="left",
        maintain_order="left")["code"].to_numpy().astype(np.int64)
    distinct_paths = distinct.str.split("\x1f")
    names = distinct_paths.explode().unique(maintain_order=True)
    frame_of = {name: i for i, name in enumerate(names.to_list())}
    frames = pl.DataFrame({"frame_id": pl.Series(range(len(frame_of)), dtype=pl.Int32),
                           "filename": pl.Series([""] * len(frame_of), dtype=pl.String),
                           "line": pl.Series([0] * len(frame_of), dtype=pl.Int64),
                           "name": names})
    stacks = pl.DataFrame({
        "stack_id": pl.Series(range(distinct.len()), dtype=pl.Int32),
        "frame_ids": pl.Series([[frame_of[n] for n in reversed(path)]
                                for path in distinct_paths.to_list()],
                               dtype=pl.List(pl.Int32)),
    })
    tree = StackTree(dataclasses.replace(trace, frames=frames, stacks=stacks))
    return OwnerTree(tree=tree, codes=codes)


__all__ = ["NO_OWNER", "OwnerTree", "owner_paths", "owner_tree"]
