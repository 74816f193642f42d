"""More training loops whose memory roles are known (see roles.py and ../README.md).

The same kind of truth file as ``roles.py`` (parameters, optimizer state, per step the
gradients and inputs, the steps' wall-clock times), for shapes roles.py lacks:

* ``ckpt``: each layer under activation checkpointing (``torch.utils.checkpoint``,
  ``use_reentrant=False``), AdamW, two micro-batches accumulated per step, gradients freed
  by ``zero_grad(set_to_none=True)``;
* ``sgd``: SGD with momentum (one state tensor per parameter), the forward under
  ``torch.autocast(dtype=torch.bfloat16)``, an evaluation pass every second step, the
  recipe's own history with C++ frames (``stacks="all"``).

Run: ``python roles_more.py MODE OUT.pickle`` (it records and dumps the snapshot itself,
history from the first allocation); the truth goes to ``OUT.truth.json``.
"""

import json
import sys
import time

import torch
from torch.utils.checkpoint import checkpoint

WIDTH, LAYERS, BATCH, STEPS = 1024, 4, 256, 4


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


class Model(torch.nn.Module):
    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return x


def storage(t: torch.Tensor) -> dict:
    return {"ptr": t.untyped_storage().data_ptr(), "bytes": t.untyped_storage().nbytes()}


def main() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    torch.cuda.memory._record_memory_history(
        enabled="all", context="all", stacks="all" if mode == "sgd" else "python",
        max_entries=200_000)
    torch.manual_seed(0)
    model = Model(checkpointed=mode == "ckpt").cuda()
    if mode == "ckpt":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    rows = {"gradient": [], "input": []}
    steps = []
    micro = 2 if mode == "ckpt" else 1
    for step in range(STEPS):
        began = time.time_ns()
        for _ in range(micro):
            x = torch.randn(BATCH, WIDTH).cuda()
            y = torch.randn(BATCH, WIDTH, device="cuda")
            rows["input"] += [{**storage(x), "step": step}, {**storage(y), "step": step}]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "sgd"):
                loss = (model(x).float() - y).square().mean() / micro
            loss.backward()
        for p in model.parameters():
            rows["gradient"].append({**storage(p.grad), "step": step})
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if mode == "sgd" and step % 2 == 1:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                x = torch.randn(BATCH, WIDTH).cuda()
                rows["input"].append({**storage(x), "step": step})
                model(x).sum().item()
        torch.cuda.synchronize()
        steps.append({"step": step, "t_begin_ns": began, "t_end_ns": time.time_ns()})
    state = [t for s in optimizer.state.values() for t in s.values()
             if torch.is_tensor(t) and t.is_cuda]
    params = list(model.parameters())
    truth = {
        "mode": mode, "model": f"{LAYERS} x Linear({WIDTH}, {WIDTH}) + GELU, float32",
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
        "optimizer_state_bytes": sum(t.numel() * t.element_size() for t in state),
        "parameter": [storage(p) for p in params],
        "optimizer_state": [storage(t) for t in state], "activation": [],
        **rows, "steps": steps,
        "allocated_at_end": torch.cuda.memory_allocated(),
        "max_allocated": torch.cuda.max_memory_allocated(),
    }
    torch.cuda.memory._dump_snapshot(out)
    with open(out.replace(".pickle", ".truth.json"), "w") as fh:
        json.dump(truth, fh)
    print(mode, "parameters", truth["parameter_bytes"], "state",
          truth["optimizer_state_bytes"], "max allocated", truth["max_allocated"])


if __name__ == "__main__":
    main()
