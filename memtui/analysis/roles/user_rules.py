"""The user's own role rules, applied before any of memtui's (``[tool.memtui.roles]``).

In ``pyproject.toml`` (or a TOML file given with ``--roles FILE``, holding the same table
or its keys at the top level)::

    [tool.memtui.roles]
    parameter = ["load_weights", "lora\\.py"]
    cache = "kv_cache"
    input = ["prefetch \\(loader\\.py:\\d+\\)"]

Each key is a role (:data:`~memtui.analysis.roles.model.ROLES`), each value a regular
expression or a list of them (Python's ``re``, searched, case-sensitive).  A block takes
the first role, in the table's order, one of whose expressions matches

* a frame of its allocation's call stack, written ``name (path:line)`` with the file's full
  path (``forward (/src/model.py:12)``; a frame without a file is its name alone),
* its owner (msMemScope's tag ``PTA@weight``, a profiler operator ``aten::mm``), or
* its ``user_metadata`` (torch.cuda.memory._set_memory_metadata).

:func:`parse_rules` reads the table defensively: a table of the wrong type, a key that is
not a role, a value that is not a string or a list of strings, an expression that does not
compile, or more than :data:`MAX_PATTERNS` expressions or one longer than
:data:`MAX_PATTERN` characters is a ``ValueError`` whose text is the one line the command
prints (exit status 2).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.roles.model import ROLES
from memtui.model import MemoryTrace

MAX_PATTERNS = 200
MAX_PATTERN = 1000
#: Where a trace carries the user's rules (``meta.extra``), so that every analysis of it
#: (and of its layer views) applies them: :func:`with_rules`.
RULES_KEY = "role_rules"


@dataclass(frozen=True)
class RoleRules:
    """The user's rules: ``(role, compiled expressions)`` in the order given."""

    rules: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]

    @property
    def key(self) -> str:
        """A digest of the rules (a cache key: different rules, different roles)."""
        text = "\n".join(f"{role}\t{p.pattern}" for role, pats in self.rules for p in pats)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def role_of(self, text: str | None) -> int:
        """The index in :data:`ROLES` of the first role matching ``text``; -1 for none."""
        if not text:
            return -1
        for role, patterns in self.rules:
            if any(p.search(text) for p in patterns):
                return ROLES.index(role)
        return -1

    def to_dict(self) -> dict[str, list[str]]:
        return {role: [p.pattern for p in patterns] for role, patterns in self.rules}


def parse_rules(table: Any, where: str = "[tool.memtui.roles]") -> RoleRules:
    """The rules of ``table`` (see the module docstring); ValueError naming ``where``."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table of role = expression(s), "
                         f"not {type(table).__name__}")
    rules = []
    count = 0
    for role, value in table.items():
        if not isinstance(role, str) or role not in ROLES:
            raise ValueError(f"{where}: {str(role)[:80]!r} is not a role (roles: "
                             f"{', '.join(ROLES)})")
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{where}: {role} must be a regular expression or a list of "
                             f"them, not {type(value).__name__}")
        compiled = []
        for text in texts:
            count += 1
            if count > MAX_PATTERNS:
                raise ValueError(f"{where}: more than {MAX_PATTERNS} expressions")
            if len(text) > MAX_PATTERN:
                raise ValueError(f"{where}: {role}: an expression longer than "
                                 f"{MAX_PATTERN} characters")
            try:
                compiled.append(re.compile(text))
            except (re.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"{where}: {role}: {text[:80]!r} is not a regular "
                                 f"expression ({exc})") from None
        if compiled:
            rules.append((role, tuple(compiled)))
    return RoleRules(tuple(rules))


def with_rules(trace: MemoryTrace, rules: RoleRules | None) -> MemoryTrace:
    """``trace`` carrying ``rules`` (a new trace object sharing the frames: the one the
    loader may be storing in the reopen cache is left as it was)."""
    from dataclasses import replace

    extra = {k: v for k, v in trace.meta.extra.items() if k != RULES_KEY}
    if rules:
        extra[RULES_KEY] = rules
    return replace(trace, meta=replace(trace.meta, extra=extra))


def rules_of(trace: MemoryTrace) -> RoleRules | None:
    rules = trace.meta.extra.get(RULES_KEY)
    return rules if isinstance(rules, RoleRules) and rules else None


def frame_texts(frames: pl.DataFrame) -> pl.DataFrame:
    """``frame_id, text``: each frame as the rules read it, ``name (path:line)``."""
    name = pl.col("name").fill_null("?")
    path = pl.col("filename").fill_null("")
    where = pl.when(pl.col("line").fill_null(0) > 0).then(
        pl.concat_str([path, pl.lit(":"), pl.col("line").cast(pl.String)])).otherwise(path)
    text = pl.when(path != "").then(pl.concat_str([name, pl.lit(" ("), where, pl.lit(")")])) \
        .otherwise(name)
    return frames.select(pl.col("frame_id").cast(pl.Int32), text=text)


def stack_matches(trace: MemoryTrace, rules: RoleRules) -> pl.DataFrame:
    """``stack_id, role`` (index in ROLES) of every stack one of whose frames a rule
    matches; the innermost matching frame decides, and of its matches the first rule."""
    schema = {"stack_id": pl.Int32, "role": pl.Int64}
    if not rules or trace.stacks.is_empty():
        return pl.DataFrame(schema=schema)
    texts = frame_texts(trace.frames)
    roles = np.fromiter((rules.role_of(t) for t in texts["text"].to_list()),
                        dtype=np.int64, count=texts.height)
    matched = texts.select("frame_id").with_columns(role=pl.Series(roles)).filter(
        pl.col("role") >= 0)
    if matched.is_empty():
        return pl.DataFrame(schema=schema)
    return (trace.stacks.select(pl.col("stack_id").cast(pl.Int32), "frame_ids")
            .explode("frame_ids")
            .with_columns(pos=pl.int_range(0, pl.len()).over("stack_id"))
            .join(matched, left_on="frame_ids", right_on="frame_id", how="inner")
            .sort("stack_id", "pos").group_by("stack_id", maintain_order=True)
            .agg(pl.col("role").first()).cast(schema))


def text_roles(values: pl.Series, rules: RoleRules) -> np.ndarray:
    """The role index each of ``values`` (owners, metadata) matches, -1 for none (each
    distinct value tried once)."""
    out = np.full(values.len(), -1, dtype=np.int64)
    if not rules or values.len() == 0 or values.null_count() == values.len():
        return out
    distinct = values.cast(pl.String).drop_nulls().unique()
    table = pl.DataFrame({"value": distinct, "role": pl.Series(
        [rules.role_of(v) for v in distinct.to_list()], dtype=pl.Int64)})
    joined = pl.DataFrame({"value": values.cast(pl.String)}).join(
        table, on="value", how="left", maintain_order="left")
    return joined["role"].fill_null(-1).to_numpy().astype(np.int64)


__all__ = ["MAX_PATTERN", "MAX_PATTERNS", "RULES_KEY", "RoleRules", "frame_texts",
           "parse_rules", "rules_of", "stack_matches", "text_roles", "with_rules"]
