"""Training loops whose memory roles are known, recorded on a real GPU (see ../README.md).

A model of known size (four ``Linear(2048, 2048)`` layers with biases: 16,785,408 float32
parameters, 67,141,632 bytes) trained with an optimizer, and beside the capture a truth file
(``OUT.truth.json``, the path given as the second argument) naming which storage held
which role, written by the script itself from the tensors it owns:

* ``parameter``: every parameter's storage (``data_ptr``, bytes), alive to the end;
* ``optimizer_state``: every state tensor on the device (AdamW's ``exp_avg`` and
  ``exp_avg_sq``; the hand-written optimizer's momentum and variance), alive to the end;
* ``gradient``: each step's ``.grad`` storages, with the step;
* ``activation``: the storages autograd saved for backward (``saved_tensors_hooks``), per
  step, with the step;
* ``input``: each step's batch and target, with the step;
* ``steps``: the wall-clock time (ns) each step began and ended, to place them in the trace.

Modes:

* ``adamw``: ``torch.optim.AdamW``, gradients freed by ``zero_grad(set_to_none=True)``,
  memory history from the first allocation;
* ``late``: the same, with history started only after two steps: parameters and optimizer
  state were allocated before the history began (no stack, no alloc event);
* ``handopt``: a hand-written Adam (its state made by ``zeros_like`` in this file, not in
  ``torch/optim``), two micro-batches accumulated per step, gradients kept between steps
  (``zero_grad(set_to_none=False)``), an evaluation pass every third step under
  ``no_grad``.
"""

import json
import sys
import time

import torch

WIDTH, LAYERS, BATCH, STEPS = 2048, 4, 512, 6


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).cuda()


def storage(t: torch.Tensor) -> dict:
    return {"ptr": t.untyped_storage().data_ptr(), "bytes": t.untyped_storage().nbytes()}


class Truth:
    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = {"gradient": [], "activation": [], "input": []}
        self.steps: list[dict] = []
        self.step = -1

    def saved(self, t: torch.Tensor):
        if t.is_cuda and t.untyped_storage().nbytes():
            self.rows["activation"].append({**storage(t), "step": self.step})
        return t

    def add(self, role: str, t: torch.Tensor) -> None:
        self.rows[role].append({**storage(t), "step": self.step})


def get_batch(truth: Truth) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(BATCH, WIDTH).cuda()  # a host batch copied to the device
    y = torch.randn(BATCH, WIDTH, device="cuda")
    truth.add("input", x)
    truth.add("input", y)
    return x, y


def forward_backward(model, truth: Truth, scale: float = 1.0) -> None:
    x, y = get_batch(truth)
    with torch.autograd.graph.saved_tensors_hooks(truth.saved, lambda t: t):
        loss = (model(x) - y).square().mean() * scale
    loss.backward()


class HandAdam:
    """Adam written by hand: one momentum and one variance tensor per parameter."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps, self.t = lr, betas, eps, 0
        self.momentum = [torch.zeros_like(p) for p in self.params]
        self.variance = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.momentum, self.variance, strict=True):
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            update = (m / (1 - b1 ** self.t)) / ((v / (1 - b2 ** self.t)).sqrt() + self.eps)
            p.add_(update, alpha=-self.lr)

    def state_tensors(self):
        return self.momentum + self.variance

    def zero_grad(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()


def evaluate(model, truth: Truth) -> None:
    with torch.no_grad():
        x, _ = get_batch(truth)
        model(x).sum().item()


def start_history() -> None:
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=100_000)


def main() -> None:
    mode, truth_path = sys.argv[1], sys.argv[2]
    if mode == "late":
        torch.cuda.memory._record_memory_history(enabled=None)  # memtui record turned it on
    truth = Truth()
    model = build()
    if mode == "handopt":
        optimizer = HandAdam(model.parameters())
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        if mode == "late" and step == 2:
            start_history()
        truth.step = step
        began = time.time_ns()
        if mode == "handopt":
            for _ in range(2):
                forward_backward(model, truth, scale=0.5)
            for p in model.parameters():
                truth.add("gradient", p.grad)
            optimizer.step()
            optimizer.zero_grad()
            if step % 3 == 2:
                evaluate(model, truth)
        else:
            forward_backward(model, truth)
            for p in model.parameters():
                truth.add("gradient", p.grad)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        truth.steps.append({"step": step, "t_begin_ns": began, "t_end_ns": time.time_ns()})
    if mode == "handopt":
        state = optimizer.state_tensors()
    else:
        state = [t for s in optimizer.state.values() for t in s.values()
                 if torch.is_tensor(t) and t.is_cuda]
    params = list(model.parameters())
    out = {
        "mode": mode, "model": f"{LAYERS} x Linear({WIDTH}, {WIDTH}) + GELU, float32",
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
        "optimizer_state_bytes": sum(t.numel() * t.element_size() for t in state),
        "gradients_kept_between_steps": mode == "handopt",
        "parameter": [storage(p) for p in params],
        "optimizer_state": [storage(t) for t in state],
        **truth.rows, "steps": truth.steps,
        "allocated_at_end": torch.cuda.memory_allocated(),
        "max_allocated": torch.cuda.max_memory_allocated(),
    }
    with open(truth_path, "w") as fh:
        json.dump(out, fh)
    print(mode, "parameters", out["parameter_bytes"], "optimizer state",
          out["optimizer_state_bytes"], "allocated at end", out["allocated_at_end"])


if __name__ == "__main__":
    main()
