"""The truth of a roles capture (tests/data/cuda_roles_*.truth.json), matched to its blocks.

The recipe (tests/data/cuda_recipes/roles.py) names the storage (``ptr``, ``bytes``) of
every parameter and optimizer-state tensor (alive to the script's end) and, per step and
in the order it met them, of every input batch, every tensor autograd saved (activations)
and every gradient.  A storage is matched to the block at its address whose size is the
storage's (the allocator rounds to 512 bytes), alive when the recipe met it:

* parameters and state tensors: the block at the address alive at the moment asked that
  is still alive when the last step ends (where the recipe met them);
* inputs: within each step, in order, each batch ``x`` and its target ``y`` (made one
  right after the other by ``get_batch``) a pair of new blocks made within
  :data:`PAIR_GAP` events of each other, after the pair before; an evaluation's batch
  alone, the next new block at its address;
* saved activations: the step's rows split evenly over its training micro-batches (one;
  ``handopt``: two), each row the first block at its address still alive when that
  micro-batch's input was made (one forward's saved tensors are alive together, so the
  allocator never reuses an address among them);
* gradients: the last block at the address made within the step (the recipe met it after
  the backward; freed by ``zero_grad`` or not), else (kept from an earlier step) the one
  alive at the step's end.

A storage named twice takes the first of :data:`PRIORITY` (the batch ``x`` is an input and,
saved by the first layer, an activation; the weights are parameters and saved).  Blocks
the truth does not name (temporaries, cuBLAS's workspace) are left out of the comparison.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from memtui.analysis.timeline.at_time import block_positions
from memtui.model import MemoryTrace

PRIORITY = ("parameter", "optimizer_state", "gradient", "input", "activation")
ROUND = 512
MICRO_BATCHES = {"adamw": 1, "late": 1, "handopt": 2}
PAIR_GAP = 3


def load_truth(capture: Path) -> dict:
    return json.loads(capture.with_name(capture.stem + ".truth.json").read_text())


class _Blocks:
    def __init__(self, trace: MemoryTrace, device: str) -> None:
        blocks = trace.device_blocks(device)
        pos = block_positions(trace, device)
        b = blocks.select("block_id", "addr", "size", "ghost").join(
            pos, on="block_id", maintain_order="left")
        ghost = b["ghost"].fill_null(False).to_numpy()
        self.id = b["block_id"].to_numpy()
        self.addr = b["addr"].to_numpy().astype(np.uint64)
        self.size = b["size"].to_numpy()
        self.start = np.where(ghost, -1, b["pos_alloc"].to_numpy())
        self.end = b["pos_free"].to_numpy()
        self.times = trace.device_events(device)["t"].to_numpy()

    def at(self, row: dict) -> np.ndarray:
        size = -(-row["bytes"] // ROUND) * ROUND
        hit = np.flatnonzero((self.addr == np.uint64(row["ptr"])) & (self.size == size))
        return hit[np.argsort(self.start[hit], kind="stable")]

    def position(self, t: int) -> int:
        return int(np.searchsorted(self.times, t, side="left"))


def truth_blocks(trace: MemoryTrace, device: str, truth: dict) -> dict[int, str]:
    """Block id -> truth role of the per-step storages (see the module docstring)."""
    b = _Blocks(trace, device)
    found: dict[int, str] = {}
    micro = MICRO_BATCHES.get(truth.get("mode"), 1)
    for step in truth["steps"]:
        begin, end = b.position(step["t_begin_ns"]), b.position(step["t_end_ns"])
        rows = {role: [r for r in truth[role] if r.get("step") == step["step"]]
                for role in ("input", "activation", "gradient")}
        inputs, after = [], begin - 1
        pending = list(rows["input"])
        while pending:
            x_row = pending.pop(0)
            ys = b.at(pending[0]) if pending else []
            pair = [(i, j) for i in b.at(x_row) if after < b.start[i] <= end
                    for j in ys if 0 < b.start[j] - b.start[i] <= PAIR_GAP]
            if pair:  # a batch and its target, made one after the other
                pending.pop(0)
                inputs.extend(pair[0])
                after = b.start[pair[0][1]]
                continue
            alone = [i for i in b.at(x_row) if after < b.start[i] <= end]
            if alone:  # an evaluation's batch, alone
                inputs.append(alone[0])
                after = b.start[alone[0]]
        saved = rows["activation"]
        per = len(saved) // micro if micro else 0
        for k in range(micro):
            if 2 * k >= len(inputs):
                break
            made = b.start[inputs[2 * k]]
            for row in saved[k * per:(k + 1) * per]:
                hit = [i for i in b.at(row) if b.end[i] > made and b.start[i] <= end]
                if hit:
                    found.setdefault(int(b.id[hit[0]]), "activation")
        for i in inputs:
            found[int(b.id[i])] = "input"
        for row in rows["gradient"]:
            made = [i for i in b.at(row) if begin <= b.start[i] <= end]
            hit = made[-1:] or [i for i in b.at(row) if b.start[i] <= end < b.end[i]][:1]
            for i in hit:
                found[int(b.id[i])] = "gradient"
    return found


def truth_at(trace: MemoryTrace, device: str, truth: dict, event: int,
             per_step: dict[int, str] | None = None) -> dict[str, int]:
    """Bytes per truth role of the blocks alive just after ``event``."""
    b = _Blocks(trace, device)
    per_step = truth_blocks(trace, device, truth) if per_step is None else per_step
    alive = (b.start <= event) & (b.end > event)
    lasting = {}
    for role in ("optimizer_state", "parameter"):
        for row in truth[role]:
            lasting[(row["ptr"], -(-row["bytes"] // ROUND) * ROUND)] = role
    held = b.end > last_step_end(trace, device, truth)  # the storage the recipe met last
    out: dict[str, int] = {}
    for i in np.flatnonzero(alive).tolist():
        role = (lasting.get((int(b.addr[i]), int(b.size[i]))) if held[i] else None) \
            or per_step.get(int(b.id[i]))
        if role is not None:
            out[role] = out.get(role, 0) + int(b.size[i])
    return out


def last_step_end(trace: MemoryTrace, device: str, truth: dict) -> int:
    """The event position at the end of the recipe's last step (its state before the
    script returned and the recorder's exit freed everything)."""
    times = trace.device_events(device)["t"].to_numpy()
    return int(np.searchsorted(times, truth["steps"][-1]["t_end_ns"], side="right") - 1)


def within(mine: int, want: int, share: float = 0.05) -> bool:
    return abs(mine - want) <= share * want if want else mine == 0


__all__ = ["PRIORITY", "last_step_end", "load_truth", "truth_at", "truth_blocks", "within"]
