"""What each change would save: findings read from the memory by role at the peak.

Each is an upper bound on what the change takes off the allocated peak, names the role
figure it is read from (``detail.role``, ``detail.role_bytes``: that role's bytes at the
peak, :mod:`memtui.analysis.roles`), says what to do, and is never made where its role
holds nothing:

* **activation checkpointing**: the activations alive at the peak; checkpointing keeps
  each checkpointed block's inputs and recomputes the rest in the backward, so it saves
  at most all of them;
* **sharding the optimizer state** over N ranks (ZeRO-1, FSDP): (N-1)/N of it, figures for
  2, 4 and 8 ranks; an 8-bit optimizer keeps Adam's float32 state in a quarter of the
  bytes (3/4 of it, where the state looks float32);
* **bf16**: parameters, gradients and activations that look float32 halved: a block is
  taken for float32 where its size holds whole 4-byte elements, and the finding says how
  sure that is (``likely`` where nothing in the capture's stacks casts to half precision,
  ``possible`` where autocast or a half-precision module is seen, which also leaves the
  activations, or the parameters and gradients, out);
* **smaller micro-batch with gradient accumulation**: activations and inputs scale with
  the micro-batch: half the micro-batch (twice the accumulation steps) saves up to half of
  them;
* **gradients alive into the next forward**: gradients still alive when a forward begins
  after an optimizer step (not freed by ``zero_grad(set_to_none=True)``): the most such
  bytes (``saving_at_peak_bytes``: those alive at the peak too, where it falls after a
  step; with gradient accumulation the peak may be where they are needed anyway).

Severity follows the share of the peak a finding could save: medium from
:data:`MEDIUM_SHARE`, low from :data:`LOW_SHARE`, info below (never made under
:data:`MIN_SHARE`).  bf16's is at most low where the dtype is only ``possible``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.roles import block_roles, by_role_at, levels_by_role
from memtui.analysis.roles.assign import aligned_positions, positions_of
from memtui.analysis.roles.phases import PHASE_F, Phases
from memtui.analysis.timeline.at_time import Timeline
from memtui.model import MemoryTrace
from memtui.units import format_bytes

MEDIUM_SHARE = 0.2
LOW_SHARE = 0.05
MIN_SHARE = 0.01
RANKS = (2, 4, 8)
KIND = "savings"

_HALF_NAMES = ("autocast", "GradScaler", "grad_scaler", "bfloat16", "half", "_to_copy_half")
_HALF_FILES = ("/torch/amp/", "/torch/cuda/amp/", "/torch/npu/amp/", "/torch_npu/npu/amp/")


def find_savings(trace: MemoryTrace, device: str) -> list[Finding]:
    """The savings findings of ``device`` (see the module docstring)."""
    timeline = Timeline.build(trace, device)
    if timeline.peak <= 0:
        return []
    event = -1 if timeline.peak_at_start else timeline.peak_event
    roles = by_role_at(trace, device, event)
    peak = timeline.peak
    at = _Peak(trace, device, event, timeline, roles)
    found = [_checkpointing(at), _sharding(at), _bf16(at), _micro_batch(at),
             _gradients_into_forward(at)]
    return [f for f in found if f is not None and (f.bytes or 0) >= MIN_SHARE * peak]


class _Peak:
    """The peak's figures every finding reads."""

    def __init__(self, trace: MemoryTrace, device: str, event: int, timeline: Timeline,
                 roles: dict[str, int]) -> None:
        self.trace, self.device, self.event, self.roles = trace, device, event, roles
        self.peak = timeline.peak
        self.t = timeline.time_of(max(event, 0))
        seq = trace.device_events(device)["seq"]
        self.seq = int(seq[event]) if 0 <= event < seq.len() else None
        self._alive: pl.DataFrame | None = None

    def severity(self, saving: int) -> str:
        share = saving / self.peak if self.peak else 0.0
        return "medium" if share >= MEDIUM_SHARE else "low" if share >= LOW_SHARE else "info"

    def blocks(self, role: str) -> pl.DataFrame:
        """The blocks of ``role`` alive just after the peak's event: id, size, requested."""
        return self.alive().filter(pl.col("role") == role)

    def alive(self) -> pl.DataFrame:
        """Every block alive just after the peak's event with its role (joined once: the
        findings ask for several roles' blocks)."""
        if self._alive is None:
            blocks = self.trace.device_blocks(self.device).select(
                "block_id", "size", "requested_size", "ghost")
            # (both made from the device's blocks: row for row with them, no join)
            pos = aligned_positions(blocks, positions_of(self.trace, self.device))
            frame = aligned_positions(blocks, block_roles(self.trace, self.device).frame)
            start = pl.when(pl.col("ghost").fill_null(False)).then(-1).otherwise(
                pl.col("pos_alloc"))
            self._alive = blocks.hstack(pos.drop("block_id")).with_columns(
                role=frame["role"]).filter((start <= self.event)
                                           & (pl.col("pos_free") > self.event))
        return self._alive

    def evidence(self, role: str) -> Evidence:
        ids = tuple(int(b) for b in self.blocks(role)["block_id"].to_list())
        return Evidence(t=self.t, seq=self.seq, block_ids=ids)

    def finding(self, title: str, role: str, saving: int, detail: dict[str, Any],
                severity: str | None = None) -> Finding:
        detail = {"role": role, "role_bytes": self.roles.get(role, 0),
                  "peak_allocated_bytes": self.peak, "saving_bytes": saving,
                  "by_role": self.roles, **detail}
        return Finding(kind=KIND, severity=severity or self.severity(saving),
                       title=title, device=self.device, bytes=saving, detail=detail,
                       evidence=self.evidence(role))


def _checkpointing(at: _Peak) -> Finding | None:
    activations = at.roles.get("activation", 0)
    if activations <= 0:
        return None
    return at.finding(
        f"Activations hold {format_bytes(activations)} at the peak: activation "
        f"checkpointing would save up to {format_bytes(activations)}",
        "activation", activations,
        {"advice": "wrap the model's repeated blocks in torch.utils.checkpoint.checkpoint("
                   "block, x, use_reentrant=False) (or the framework's activation "
                   "checkpointing): each keeps its inputs and recomputes the rest in the "
                   "backward, trading compute for these bytes"})


def _sharding(at: _Peak) -> Finding | None:
    state = at.roles.get("optimizer_state", 0)
    if state <= 0:
        return None
    over = {str(n): state * (n - 1) // n for n in RANKS}
    figures = ", ".join(f"{format_bytes(v)} over {n}" for n, v in over.items())
    eight_bit = state * 3 // 4 if _whole_floats(at.blocks("optimizer_state")) else None
    advice = ("shard the optimizer state across the data-parallel ranks "
              "(torch.distributed.optim.ZeroRedundancyOptimizer, FSDP / FSDP2, DeepSpeed "
              "ZeRO-1): each rank keeps 1/N of it")
    if eight_bit:
        advice += (f"; or an 8-bit optimizer (bitsandbytes.optim.AdamW8bit) keeps it in a "
                   f"quarter of the bytes: {format_bytes(eight_bit)} less")
    return at.finding(
        f"Optimizer state holds {format_bytes(state)} at the peak: sharding it over N "
        f"ranks saves (N-1)/N of it ({figures})", "optimizer_state", over[str(RANKS[-1])],
        {"saving_over_ranks": over, "saving_8bit_bytes": eight_bit, "advice": advice})


def _whole_floats(blocks: pl.DataFrame) -> bool:
    sizes = blocks["requested_size"].fill_null(blocks["size"]).to_numpy()
    return bool(sizes.size) and bool(np.all(sizes % 4 == 0))


def half_precision_signs(trace: MemoryTrace) -> dict[str, bool]:
    """What the capture's frames say of half precision: ``autocast`` (autocast or a
    GradScaler), ``module`` (a module cast by ``half()`` / ``bfloat16()``)."""
    frames = trace.frames
    if frames.is_empty():
        return {"autocast": False, "module": False}
    name = frames["name"].fill_null("")
    path = frames["filename"].fill_null("").str.replace_all("\\", "/", literal=True)
    autocast = (name.str.contains("autocast|GradScaler|grad_scaler")
                | pl.Series([False] * frames.height))
    for part in _HALF_FILES:
        autocast = autocast | path.str.contains(part, literal=True)
    module = path.str.ends_with("/torch/nn/modules/module.py") & name.is_in(
        ["half", "bfloat16"])
    return {"autocast": bool(autocast.any()), "module": bool(module.any())}


def _bf16(at: _Peak) -> Finding | None:
    signs = half_precision_signs(at.trace)
    roles = ["parameter", "gradient", "activation"]
    if signs["module"]:
        roles = [r for r in roles if r == "activation"]
    if signs["autocast"]:
        roles = [r for r in roles if r != "activation"]
    floats: dict[str, int] = {}
    for role in roles:
        if not at.roles.get(role):
            continue
        blocks = at.blocks(role)
        sizes = blocks["requested_size"].fill_null(blocks["size"]).to_numpy()
        whole = blocks["size"].to_numpy()[sizes % 4 == 0]
        if whole.size:
            floats[role] = int(whole.sum())
    if not floats:
        return None
    sure = "possible" if signs["autocast"] or signs["module"] else "likely"
    saving = sum(floats.values()) // 2
    named = ", ".join(f"{r}s {format_bytes(b)}" for r, b in floats.items())
    main = max(floats, key=lambda r: floats[r])
    severity = at.severity(saving)
    if sure == "possible" and severity == "medium":
        severity = "low"
    return at.finding(
        f"{named[:1].upper() + named[1:]} look float32 at the peak ({sure}): bf16 would "
        f"halve them, "
        f"up to {format_bytes(saving)}", main, saving,
        {"float32_bytes": floats, "dtype_confidence": sure,
         "dtype_evidence": ("sizes hold whole 4-byte elements; nothing in the stacks casts "
                            "to half precision" if sure == "likely" else
                            "sizes hold whole 4-byte elements; the stacks show autocast or "
                            "a half-precision module, so part may be 16-bit already"),
         "advice": "train in bf16: torch.autocast('cuda', dtype=torch.bfloat16) for the "
                   "activations, bf16 parameters and gradients (model.to(torch.bfloat16)) "
                   "with float32 optimizer state where precision needs it"},
        severity)


def _micro_batch(at: _Peak) -> Finding | None:
    activations = at.roles.get("activation", 0)
    if activations <= 0:
        return None
    scaled = activations + at.roles.get("input", 0)
    saving = scaled // 2
    return at.finding(
        f"Activations and inputs ({format_bytes(scaled)} at the peak) scale with the "
        f"micro-batch: half the micro-batch with twice the gradient accumulation saves up "
        f"to {format_bytes(saving)}", "activation", saving,
        {"scaled_bytes": scaled,
         "advice": "halve the micro-batch and accumulate gradients over twice as many "
                   "micro-batches (loss / k; optimizer.step() every k backward passes): the "
                   "same effective batch, half the activations"})


def _gradients_into_forward(at: _Peak) -> Finding | None:
    roles = block_roles(at.trace, at.device)
    phases = roles.found
    if not isinstance(phases, Phases) or not roles.optimizer_at.size:
        return None
    starts = _forwards_after_steps(phases, roles.optimizer_at)
    if not starts.size:
        return None
    levels = levels_by_role(at.trace, at.device)
    held = levels.at_positions("gradient", starts - 1)  # alive as each forward begins
    worst = int(held.max())
    if worst <= 0:
        return None
    before = starts[starts <= at.event]
    at_peak = 0
    if before.size:  # the peak in a forward after a step, or in its backward
        at_peak = min(int(held[starts <= at.event][-1]), at.roles.get("gradient", 0))
    return at.finding(
        f"Gradients stay alive into the next forward: {format_bytes(worst)} that "
        f"zero_grad(set_to_none=True) would free until the next backward makes them",
        "gradient", worst,
        {"gradient_bytes_into_forward": worst, "saving_at_peak_bytes": at_peak,
         "advice": "call optimizer.zero_grad(set_to_none=True) (the default since PyTorch "
                   "2.0) after optimizer.step(), not zero_grad(set_to_none=False) or "
                   "p.grad.zero_(): the .grad tensors are then freed between the step and "
                   "the next backward"})


def _forwards_after_steps(phases: Phases, optimizer_at: np.ndarray) -> np.ndarray:
    """The start of each forward phase that follows a phase where the optimizer
    allocated (the first forward after each optimizer step)."""
    with_step = np.unique(phases.index_at(optimizer_at), return_counts=True)[0]
    with_step = with_step[with_step >= 0]
    next_f = phases.next_of(PHASE_F)[with_step + 1]
    next_f = next_f[next_f < phases.count]
    return np.unique(phases.start[next_f], return_counts=True)[0]


__all__ = ["KIND", "find_savings", "half_precision_signs"]
