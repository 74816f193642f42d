"""A data-dependent training loop with a planted leak and no step markers (see ../README.md).

A small mixture of experts: each token of a batch goes to one of two experts chosen by the
data (the router), so the number of activations each expert's code allocates changes from
step to step; sequence lengths vary too.  Two micro-batches are accumulated per optimizer
step, an evaluation pass runs every fifth step, the step's wall time is jittered, and no
marker or annotation is written.  The planted leak: ``keep_for_later`` keeps a 128 KiB
tensor every second step (64 KiB per step on average) and never frees it.

Truth, for the tests: the leak is ``keep_for_later`` in this file, 131072 bytes every
second step, from the first step to the last (``STEPS`` steps).
"""

import random
import sys
import time

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 120
WIDTH = 256
LEAK_BYTES = 128 * 1024

kept: list[torch.Tensor] = []


class Expert(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.down = torch.nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


class MoE(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = torch.nn.Linear(WIDTH, 2)
        self.expert_a = Expert()
        self.expert_b = Expert()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        choice = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for index, expert in ((0, self.expert_a), (1, self.expert_b)):
            rows = (choice == index).nonzero().squeeze(-1)
            if rows.numel():
                out = out.index_add(0, rows, expert(x[rows]))
        return out


def keep_for_later() -> None:
    kept.append(torch.empty(LEAK_BYTES, dtype=torch.uint8, device="cuda"))


def micro_batch(model, rng: random.Random) -> None:
    tokens = rng.randint(64, 512)
    x = torch.randn(tokens, WIDTH, device="cuda") * rng.uniform(0.5, 2.0)
    loss = model(x).square().mean()
    loss.backward()


def main() -> None:
    rng = random.Random(7)
    torch.manual_seed(7)
    model = MoE().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        for _ in range(2):
            micro_batch(model, rng)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 2 == 0:
            keep_for_later()
        if step % 5 == 4:
            with torch.no_grad():
                model(torch.randn(rng.randint(64, 256), WIDTH, device="cuda")).sum().item()
        torch.cuda.synchronize()
        time.sleep(rng.uniform(0.0, 0.004))
    print("steps", STEPS, "leaked", len(kept) * LEAK_BYTES, "bytes")


if __name__ == "__main__":
    main()
