"""Every block's role, for one device: the rules in their order, whatever the source.

1. The user's own rules (:mod:`.user_rules`): a frame of the allocation's stack, the
   owner or the metadata matched ``[tool.memtui.roles]``.
2. The capture's own words: ``user_metadata`` naming a role (:data:`METADATA_WORDS`, e.g.
   ``_set_memory_metadata("optimizer state")``), msMemScope's owner tags
   (:mod:`.owners`), and the workspace pool (``PTA_WORKSPACE``: temporary).
3. The source's rules: for captures with call stacks (PyTorch snapshots, msMemScope with
   Python stacks) the stacks' kinds (:mod:`.stack_rules`) make the loop's phases
   (:mod:`.phases`), against which lifetimes decide (:mod:`.lifetimes`); a torch.compile
   region (``compile_context``) with nothing else to go by is a forward pass (or a backward
   one where its name says so).  Operator sources (Ascend profiler folders, msMemScope
   captures with operator launches) take the kind of each allocation from its operator's
   name (:mod:`.operators`).
4. What no rule explains is ``other`` (``left_over``).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.roles.lifetimes import NEVER, BlockFacts, Verdicts, assign_by_lifetime
from memtui.analysis.roles.model import ROLES, BlockRoles, role_frame
from memtui.analysis.roles.owners import owner_roles
from memtui.analysis.roles.phases import Phases, find_phases, resolve_kinds
from memtui.analysis.roles.stack_rules import (
    BACKWARD,
    FORWARD,
    NEUTRAL,
    NO_STACK,
    OPTIMIZER,
    kinds_of,
    stack_kinds,
)
from memtui.analysis.roles.user_rules import (
    RoleRules,
    parse_rules,
    rules_of,
    stack_matches,
    text_roles,
)
from memtui.analysis.timeline.at_time import block_positions
from memtui.analysis.timeline.live import cached
from memtui.model import MemoryTrace, column_where

#: What ``user_metadata`` says, read as rules (the first match wins: optimizer state
#: before parameters, "optimizer_state" naming no parameter).
METADATA_WORDS = parse_rules({
    "optimizer_state": r"(?i)optim(izer)?[ _-]?states?|\bexp_avg",
    "gradient": r"(?i)\bgrad(ient)?s?\b",
    "parameter": r"(?i)\b(param(eter)?s?|weights?)\b",
    "activation": r"(?i)\bactivations?\b",
    "input": r"(?i)\b(inputs?|batch(es)?)\b",
    "cache": r"(?i)kv[ _-]?cache|\bcache\b",
    "temporary": r"(?i)\b(temp(orar(y|ies))?|scratch|workspace)\b",
}, "memtui's metadata words")


#: The pool of operator workspaces (torch_npu's workspace allocator, msMemScope's layer).
WORKSPACE_POOL = "PTA_WORKSPACE"


def device_roles(trace: MemoryTrace, device: str) -> BlockRoles:
    """The role of every block of ``device`` (see the module docstring)."""
    blocks = trace.device_blocks(device)
    n = blocks.height
    verdicts = Verdicts(n)
    if n == 0:
        return BlockRoles(device, role_frame(np.zeros(0), np.zeros(0, dtype=np.int64),
                                             np.zeros(0, dtype=np.int64), np.zeros(0)))
    facts, alloc_stack = block_facts(trace, device, blocks)
    rules = rules_of(trace)
    if rules is not None:
        _apply_user_rules(trace, blocks, alloc_stack, rules, verdicts)
    for column in ("user_metadata",):
        if column in blocks.columns:
            named = text_roles(blocks[column], METADATA_WORDS)
            _give_codes(verdicts, named, "metadata")
    _give_codes(verdicts, owner_roles(blocks), "owner_tag")
    if "pool" in blocks.columns:
        workspace = column_where(  # an expression: a pool of one value stays one value
            blocks, (pl.col("pool") == WORKSPACE_POOL).fill_null(False)).to_numpy()
        verdicts.give(workspace, "temporary", "workspace")
    phases, source = phases_of(trace, device, blocks, facts)
    assign_by_lifetime(facts, phases, verdicts)
    frame = role_frame(facts.block_id, verdicts.role, verdicts.rule, verdicts.inferred)
    made_by_optimizer = (facts.kind == OPTIMIZER) & (facts.pos_alloc >= 0)
    return BlockRoles(device, frame, source, phases,
                      np.sort(facts.pos_alloc[made_by_optimizer]))


def _give_codes(verdicts: Verdicts, codes: np.ndarray, rule: str) -> None:
    for role in np.unique(codes[codes >= 0], return_counts=True)[0].tolist():
        verdicts.give(codes == role, ROLES[role], rule)


def _apply_user_rules(trace: MemoryTrace, blocks: pl.DataFrame, alloc_stack: np.ndarray,
                      rules: RoleRules, verdicts: Verdicts) -> None:
    matches = stack_matches(trace, rules)
    by_stack = kinds_of(alloc_stack, matches.rename({"role": "kind"}), missing=-1)
    _give_codes(verdicts, by_stack, "user")
    for column in ("owner", "user_metadata"):
        if column in blocks.columns:
            _give_codes(verdicts, text_roles(blocks[column], rules), "user")


def block_facts(trace: MemoryTrace, device: str,
                blocks: pl.DataFrame) -> tuple[BlockFacts, np.ndarray]:
    """The facts :mod:`.lifetimes` reads, and each block's allocation stack id (-1: none),
    from the device's blocks, their event positions and the stacks of their events."""
    events = trace.device_events(device)
    aligned = aligned_positions(blocks, positions_of(trace, device))
    ghost = blocks["ghost"].fill_null(False).to_numpy()
    pos_alloc = np.where(ghost, -1, aligned["pos_alloc"].fill_null(-1).to_numpy())
    # the free, or the free's request where it came first (one array, no copies of both)
    frees = [pl.col(c).fill_null(NEVER) for c in ("pos_free", "pos_free_requested")
             if c in aligned.columns]
    release = aligned.select(pl.min_horizontal(frees).cast(pl.Int64)).to_series().to_numpy(
        writable=True)
    stacks = events["stack_id"].fill_null(-1).to_numpy()  # int32: read per block, never widened
    allocs = (events["action"] == "alloc").fill_null(False).to_numpy()
    if allocs.any():
        alloc_stack = _event_stacks(events, pos_alloc, allocs, stacks)
    else:  # blocks without events of their own (profiler rows): their own stack
        alloc_stack = blocks["stack_id"].fill_null(-1).to_numpy().astype(np.int32)
    free_stack = _event_stacks(events, release, None, stacks)
    del stacks  # an event's worth: freed as soon as read (issue 34)
    table = stack_kinds(trace)
    kind = kinds_of(alloc_stack, table)
    context = _context_kinds(blocks)
    kind = np.where(np.isin(kind, (NEUTRAL, NO_STACK)) & (context >= 0), context,
                    kind).astype(np.int8)  # (a kind of nine: a byte a block)
    facts = BlockFacts(
        block_id=blocks["block_id"].to_numpy().astype(np.int64, copy=False),
        size=blocks["requested_size"].fill_null(blocks["size"]).fill_null(0).to_numpy()
        .astype(np.int64, copy=False),
        ghost=ghost, pos_alloc=pos_alloc.astype(np.int64, copy=False), pos_release=release,
        kind=kind,
        zero_grad=kinds_of(free_stack, table, "zero_grad", missing=0).astype(bool),
        accumulate_grad=kinds_of(alloc_stack, table, "accumulate_grad",
                                 missing=0).astype(bool),
        stack=alloc_stack,
    )
    return facts, alloc_stack


def positions_of(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """:func:`~memtui.analysis.timeline.at_time.block_positions`, computed once per trace
    and device for the roles and their levels."""
    return cached(trace, ("roles.block_positions", device),
                  lambda: block_positions(trace, device))


def aligned_positions(blocks: pl.DataFrame, positions: pl.DataFrame) -> pl.DataFrame:
    """``positions`` (:func:`positions_of`, or any frame keyed by ``block_id``: the roles'
    frame) row for row with ``blocks``: the positions themselves where their block ids
    are the blocks' own in the same order (they are made from the device's blocks), else
    joined by block id (no copy of every column of millions of blocks where none is
    needed)."""
    ids = blocks["block_id"]
    if positions.height == blocks.height and ids.null_count() == 0 and \
            positions["block_id"].equals(ids):
        return positions
    return blocks.select("block_id").join(positions, on="block_id", how="left",
                                          maintain_order="left")


def _event_stacks(events: pl.DataFrame, at: np.ndarray, allocs: np.ndarray | None,
                  stacks: np.ndarray) -> np.ndarray:
    """The stack id of the event at each position ``at`` (-1 where none, or, given
    ``allocs``, where that event is not an alloc)."""
    out = np.full(at.size, -1, dtype=stacks.dtype)  # (the events' own width: int32)
    inside = (at >= 0) & (at < stacks.size)
    if inside.any():
        hit = stacks[at[inside]]
        if allocs is not None:
            hit = np.where(allocs[at[inside]], hit, -1)
        out[inside] = hit
    return out


def _context_kinds(blocks: pl.DataFrame) -> np.ndarray:
    """Per block: FORWARD inside a torch.compile region, BACKWARD where the region's name
    says backward, -1 outside any (``compile_context``)."""
    if "compile_context" not in blocks.columns:
        return np.full(blocks.height, -1, dtype=np.int8)
    context = blocks["compile_context"]
    backward = context.str.contains("(?i)backward").fill_null(False).to_numpy()
    inside = context.is_not_null().to_numpy()
    return np.where(inside, np.where(backward, BACKWARD, FORWARD), -1).astype(np.int8)


def phases_of(trace: MemoryTrace, device: str, blocks: pl.DataFrame,
              facts: BlockFacts) -> tuple[Phases | None, str | None]:
    """The device's phases, and what they were found from (None: none found).  The
    allocations' kinds are resolved for the capture (:func:`.phases.resolve_kinds`) and
    written back into ``facts.kind``."""
    from memtui.analysis.roles.operators import operator_kinds

    traced = facts.pos_alloc >= 0
    kinds = facts.kind.copy()
    op_kinds = operator_kinds(trace, device, blocks)
    source = "call stacks"
    if op_kinds is not None and not np.isin(kinds[traced], (FORWARD, BACKWARD)).any():
        kinds = np.where(op_kinds >= 0, op_kinds, kinds)
        source = "operator names"
    kinds[traced] = resolve_kinds(kinds[traced])
    facts.kind = kinds.astype(np.int8, copy=False)
    order = np.argsort(facts.pos_alloc[traced], kind="stable")
    phases = find_phases(facts.pos_alloc[traced][order], kinds[traced][order])
    return phases, (source if phases is not None else None)


__all__ = ["METADATA_WORDS", "block_facts", "device_roles", "phases_of"]
