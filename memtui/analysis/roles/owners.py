"""Roles msMemScope names itself: the owner tags of its decompose analysis.

msMemScope writes an ``owner`` on each allocation, labels joined by ``@``
(../shared/formats/msmemscope.md section 5): ``PTA@weight`` / ``PTA@model@weight``
(parameters, from its optimizer hook), ``PTA@gradient``, ``PTA@optimizer_state``,
``vllm@...@kv_cache`` (a KV cache), FSDP's ``activation``, ``sharded_weight``,
``all_gather_output`` (the unsharded parameters gathered for compute) and ``gradient``,
and the workspace pool ``PTA_WORKSPACE``.  A label names the role when it equals one of
:data:`OWNER_TAGS` (case aside); the weak ``ops`` label (an operator touched the block),
the framework (``PTA``, ``CANN@HCCL``) and user labels name none.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.roles.model import ROLES
from memtui.model import column_where, distinct_values, null_count

#: An owner label (one part between ``@``, lower case) and the role it names.
OWNER_TAGS = {
    "weight": "parameter", "weights": "parameter", "sharded_weight": "parameter",
    "all_gather_output": "parameter",
    "gradient": "gradient", "gradients": "gradient",
    "optimizer_state": "optimizer_state",
    "activation": "activation",
    "kv_cache": "cache",
    "pta_workspace": "temporary",
}


def owner_roles(blocks: pl.DataFrame) -> np.ndarray:
    """Per block: the index in ROLES its owner's tags name (the last tag that names one:
    the innermost label), -1 where none does."""
    out = np.full(blocks.height, -1, dtype=np.int64)
    if "owner" not in blocks.columns or null_count(blocks, "owner") == blocks.height:
        return out
    table = {owner: _tag_role(owner) for owner in distinct_values(blocks, "owner")}
    named = {k: v for k, v in table.items() if v >= 0}
    if not named:
        return out
    mapped = column_where(blocks, pl.col("owner").replace_strict(
        named, default=-1, return_dtype=pl.Int64).fill_null(-1))
    return mapped.to_numpy().astype(np.int64)


def _tag_role(owner: str) -> int:
    role = -1
    for tag in owner.lower().split("@"):
        if tag.strip() in OWNER_TAGS:
            role = ROLES.index(OWNER_TAGS[tag.strip()])
    return role


__all__ = ["OWNER_TAGS", "owner_roles"]
