"""Hand-made PyTorch snapshots of training loops, with the true role of every byte.

:func:`training_snapshot` writes what ``torch.cuda.memory._dump_snapshot`` would for a loop
of a shape chosen by :class:`Loop` (model sizes, 0-3 optimizer-state tensors per
parameter from ``torch.optim`` or a hand-written optimizer, gradient accumulation,
gradients freed or kept between steps, activation checkpointing, evaluation passes,
history started late, Python or C++ stacks), the way PyTorch allocates in such a loop:

* parameters made by ``Module._apply`` (``model.cuda()``) or by the user's own
  ``__init__`` (``nn.Parameter(torch.empty(..., device="cuda"))``);
* per micro-batch: the batch and its target copied to the device by the user's
  ``get_batch``; a forward through the layers, each saving its input and an output for the
  backward and freeing a scratch tensor (with checkpointing, only each layer's input is
  saved); the loss computed by the user's code from the output;
* the backward on autograd's thread (no Python frames; C++ engine frames with
  ``stacks="all"``), making each layer's gradient of its input (a temporary) and, on the
  first micro-batch of a step (or the first step, gradients kept), the parameters'
  gradients (``AccumulateGrad``); recomputation of checkpointed layers in the backward;
  freeing what the forward saved as it goes;
* the optimizer's step: its state made on the first step (``torch.optim``'s
  ``_init_group``) or in the hand-written optimizer's ``__init__``, a scratch tensor per
  parameter; then ``zero_grad`` frees the gradients (``set_to_none``) or keeps them;
* cuBLAS's workspace, made by the first matrix product in each direction and kept;
* an evaluation forward (no saved tensors) every ``eval_every`` steps.

Where history starts late, a workspace made before it is ``other`` in the truth: alive
before the capture and never freed, nothing tells it from any other such block.
Addresses are reused as the caching allocator reuses them (a freed block's address is
given to the next block of its size).  The truth (:attr:`Snapshot.truth`) is, for every
entry of the device trace, the bytes of each role alive just after it, and of the ghosts
alive before it (history started late).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memtui.analysis.roles.model import ROLES

BASE = 0x7F0000000000
ROUND = 512
F_APPLY = [{"name": "<lambda>", "filename": "/py/torch/nn/modules/module.py", "line": 1097},
           {"name": "_apply", "filename": "/py/torch/nn/modules/module.py", "line": 965},
           {"name": "cuda", "filename": "/py/torch/nn/modules/module.py", "line": 1097},
           {"name": "build", "filename": "/src/train.py", "line": 20}]
F_INIT = [{"name": "__init__", "filename": "/src/model.py", "line": 12},
          {"name": "build", "filename": "/src/train.py", "line": 20}]
F_MAIN = [{"name": "main", "filename": "/src/train.py", "line": 60},
          {"name": "<module>", "filename": "/src/train.py", "line": 80}]


def _frames(*names: tuple[str, str, int]) -> list[dict]:
    return [{"name": n, "filename": f, "line": line} for n, f, line in names] + F_MAIN


def _layer(k: int, line: int) -> list[dict]:
    return _frames(("forward", "/src/model.py", line),
                   ("_call_impl", "/py/torch/nn/modules/module.py", 1790),
                   ("forward", "/py/torch/nn/modules/container.py", 253),
                   ("_call_impl", "/py/torch/nn/modules/module.py", 1790),
                   ("train_step", "/src/train.py", 40 + k % 2))


BATCH = _frames(("get_batch", "/src/train.py", 30), ("train_step", "/src/train.py", 39))
LOSS = _frames(("train_step", "/src/train.py", 41))
BACKWARD_PY = _frames(("_make_grads", "/py/torch/autograd/__init__.py", 231),
                      ("backward", "/py/torch/autograd/__init__.py", 374),
                      ("backward", "/py/torch/_tensor.py", 631),
                      ("train_step", "/src/train.py", 42))
ENGINE = [{"name": "torch::autograd::Engine::evaluate_function(...)", "filename": "",
           "line": 0},
          {"name": "torch::autograd::Engine::thread_main(...)", "filename": "", "line": 0}]
ACCUMULATE = [{"name": "torch::autograd::AccumulateGrad::apply(...)", "filename": "",
               "line": 0}] + ENGINE
RECOMPUTE = _frames(("forward", "/src/model.py", 20),
                    ("_call_impl", "/py/torch/nn/modules/module.py", 1790),
                    ("recompute_fn", "/py/torch/utils/checkpoint.py", 1124),
                    ("unpack_hook", "/py/torch/utils/checkpoint.py", 1130))
TORCH_STATE = _frames(("_init_group", "/py/torch/optim/adam.py", 178),
                      ("step", "/py/torch/optim/adam.py", 238),
                      ("train_step", "/src/train.py", 43))
TORCH_SCRATCH = _frames(("_multi_tensor_adam", "/py/torch/optim/adam.py", 791),
                        ("step", "/py/torch/optim/adam.py", 248),
                        ("train_step", "/src/train.py", 43))
HAND_STATE = _frames(("__init__", "/src/myopt.py", 8), ("main", "/src/train.py", 55))
HAND_SCRATCH = _frames(("step", "/src/myopt.py", 20), ("train_step", "/src/train.py", 43))
ZERO_GRAD = _frames(("zero_grad", "/py/torch/optim/optimizer.py", 1066),
                    ("train_step", "/src/train.py", 44))
EVAL = _frames(("forward", "/src/model.py", 20),
               ("_call_impl", "/py/torch/nn/modules/module.py", 1790),
               ("evaluate", "/src/train.py", 50))
EVAL_BATCH = _frames(("get_batch", "/src/train.py", 30), ("evaluate", "/src/train.py", 49))


@dataclass(frozen=True)
class Loop:
    """The shape of the loop (see the module docstring); sizes in bytes."""

    params: tuple[int, ...] = (1 << 20, 4096)
    activations: tuple[int, ...] = (1 << 18, 1 << 18)  # one per layer
    states: int = 2
    hand_optimizer: bool = False
    user_init: bool = False  # parameters made in the user's __init__
    accumulation: int = 1
    set_to_none: bool = True
    checkpointing: bool = False
    steps: int = 3
    late: int = 0  # history starts before this step's first allocation
    cpp_stacks: bool = False
    eval_every: int = 0
    batch: int = 1 << 16
    workspace: int = 1 << 22


@dataclass
class Snapshot:
    """A written snapshot and the truth of each of its trace's entries."""

    path: Path
    entries: int
    truth: dict[str, np.ndarray]  # role -> bytes alive just after each entry
    before: dict[str, int] = field(default_factory=dict)  # role -> ghost bytes at the start

    def truth_at(self, entry: int) -> dict[str, int]:
        return {role: int(values[entry]) for role, values in self.truth.items()}


class _Allocator:
    """Addresses as the caching allocator gives them (a freed size's address first) and
    the trace, the roles alive and the blocks alive at the dump."""

    def __init__(self) -> None:
        self.next = BASE
        self.free: dict[int, list[int]] = {}
        self.live: dict[int, tuple[int, str, list]] = {}  # addr -> (size, role, frames)
        self.trace: list[dict] = []
        self.recording = True
        self.time = 1
        self.level = {role: 0 for role in ROLES}
        self.rows: list[dict[str, int]] = []
        self.before = {role: 0 for role in ROLES}

    def _entry(self, entry: dict) -> None:
        self.time += 1
        if self.recording:
            self.trace.append({**entry, "stream": 0, "time_us": self.time})
            self.rows.append(dict(self.level))

    def alloc(self, size: int, role: str, frames: list) -> int:
        size = max(ROUND, -(-size // ROUND) * ROUND)
        reuse = self.free.get(size)
        addr = reuse.pop() if reuse else self.next
        if not reuse and addr == self.next:
            self.next += size
        self.live[addr] = (size, role, frames)
        self.level[role] += size
        self._entry({"action": "alloc", "addr": addr, "size": size, "frames": frames})
        return addr

    def release(self, addr: int, frames: list | None = None) -> None:
        size, role, _ = self.live.pop(addr)
        self._entry({"action": "free_requested", "addr": addr, "size": size,
                     "frames": frames or []})
        self.level[role] -= size
        self._entry({"action": "free_completed", "addr": addr, "size": size, "frames": []})
        self.free.setdefault(size, []).append(addr)

    def start_history(self) -> None:
        """Start recording.  A workspace kept from before (cuBLAS's) is, for all the trace
        can tell, any block alive before it and never freed: its truth is ``other``."""
        for addr, (size, role, frames) in list(self.live.items()):
            if role == "cache":
                self.live[addr] = (size, "other", frames)
                self.level["cache"] -= size
                self.level["other"] += size
        self.before = dict(self.level)
        self.recording = True

    def snapshot(self) -> dict:
        end = max(self.next, BASE + ROUND)
        blocks, cursor = [], BASE
        for addr in sorted(self.live):
            size, _, frames = self.live[addr]
            if addr > cursor:
                blocks.append({"address": cursor, "size": addr - cursor,
                               "requested_size": addr - cursor, "state": "inactive",
                               "frames": []})
            blocks.append({"address": addr, "size": size, "requested_size": size,
                           "state": "active_allocated", "frames": frames})
            cursor = addr + size
        if cursor < end:
            blocks.append({"address": cursor, "size": end - cursor,
                           "requested_size": end - cursor, "state": "inactive",
                           "frames": []})
        segment = {"device": 0, "address": BASE, "total_size": end - BASE, "stream": 0,
                   "segment_type": "large", "allocated_size": sum(
                       s for s, _, _ in self.live.values()),
                   "active_size": sum(s for s, _, _ in self.live.values()),
                   "blocks": blocks}
        return {"segments": [segment], "device_traces": [self.trace]}


def _backward_frames(loop: Loop, frames: list) -> list:
    return frames if loop.cpp_stacks else []


def run_loop(loop: Loop) -> _Allocator:
    """Simulate ``loop`` (see the module docstring)."""
    a = _Allocator()
    a.recording = loop.late == 0
    a._entry({"action": "segment_alloc", "addr": BASE, "size": 1 << 40})
    params = [a.alloc(s, "parameter", F_INIT if loop.user_init else F_APPLY)
              for s in loop.params]
    if loop.hand_optimizer:  # the state, made in the optimizer's __init__
        for _ in range(loop.states):
            for size in loop.params:
                a.alloc(size, "optimizer_state", HAND_STATE)
    grads: dict[int, int] = {}
    workspace = {"forward": False, "backward": False}
    for step in range(loop.steps):
        if step == loop.late and loop.late:
            a.start_history()
        for micro in range(loop.accumulation):
            _micro_batch(a, loop, workspace, grads, params, first=(micro == 0))
        scratch_frames = HAND_SCRATCH if loop.hand_optimizer else TORCH_SCRATCH
        if not loop.hand_optimizer and step == 0:  # torch.optim: on the first step
            for _ in range(loop.states):
                for size in loop.params:
                    a.alloc(size, "optimizer_state", TORCH_STATE)
        if loop.states:
            scratch = [a.alloc(s, "temporary", scratch_frames) for s in loop.params]
            for addr in scratch:
                a.release(addr, scratch_frames)
        if loop.set_to_none:
            for index in sorted(grads):
                a.release(grads.pop(index), ZERO_GRAD)
        if loop.eval_every and step % loop.eval_every == loop.eval_every - 1:
            _evaluate(a, loop)
    return a


def _micro_batch(a: _Allocator, loop: Loop, workspace: dict, grads: dict[int, int],
                 params: list[int], first: bool) -> None:
    x = a.alloc(loop.batch, "input", BATCH)
    y = a.alloc(loop.batch, "input", BATCH)
    saved: list[int] = []
    for k, size in enumerate(loop.activations):
        if not workspace["forward"]:
            a.alloc(loop.workspace, "cache", _layer(k, 9))
            workspace["forward"] = True
        out = a.alloc(size, "activation" if not loop.checkpointing or k == 0 else "temporary",
                      _layer(k, 10))
        scratch = a.alloc(size // 2 + ROUND, "temporary", _layer(k, 11))
        a.release(scratch)
        if loop.checkpointing and k > 0:
            a.release(out)
        else:
            saved.append(out)
    output = a.alloc(loop.batch, "activation", _layer(len(loop.activations), 12))
    loss = a.alloc(loop.batch, "temporary", LOSS)  # (output - y), freed before backward
    a.release(loss)
    saved.append(output)
    seed = a.alloc(ROUND, "temporary", BACKWARD_PY)
    engine = _backward_frames(loop, ENGINE)
    for k in reversed(range(len(loop.activations))):
        if not workspace["backward"]:
            a.alloc(loop.workspace, "cache", engine)
            workspace["backward"] = True
        if loop.checkpointing and k > 0:
            again = a.alloc(loop.activations[k], "temporary", RECOMPUTE)
            a.release(again)
        grad_in = a.alloc(loop.activations[k], "temporary", engine)
        a.release(grad_in)
    for index, size in enumerate(loop.params):
        if index in grads:
            fresh = a.alloc(size, "temporary", engine)  # the new grad, added in place
            a.release(fresh)
        else:
            grads[index] = a.alloc(size, "gradient", _backward_frames(loop, ACCUMULATE))
    a.release(seed)
    for addr in saved:
        a.release(addr)
    a.release(x)
    a.release(y)


def _evaluate(a: _Allocator, loop: Loop) -> None:
    x = a.alloc(loop.batch, "input", EVAL_BATCH)
    for size in loop.activations:
        out = a.alloc(size, "temporary", EVAL)
        a.release(out)
    a.release(x)


def training_snapshot(loop: Loop, path: Path) -> Snapshot:
    """Write the snapshot of ``loop`` to ``path``; its truth per trace entry."""
    a = run_loop(loop)
    path.write_bytes(pickle.dumps(a.snapshot(), protocol=4))
    truth = {role: np.array([row[role] for row in a.rows], dtype=np.int64) for role in ROLES}
    return Snapshot(path=path, entries=len(a.trace), truth=truth, before=a.before)


__all__ = ["Loop", "Snapshot", "run_loop", "training_snapshot"]
