"""A long loop for the benchmarks: about ``EVENTS`` allocator events (see ../README.md).

Record with ``memtui record --max-entries 6000000``: a small model's forward and backward
over and over, with a few long-lived tensors kept now and then (a slow planted leak), so
the trace has the shape of a real training loop at millions of events.  The capture is too
large for the repository; the benchmarks read it from where it was recorded.
"""

import sys

import torch

EVENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000

kept: list[torch.Tensor] = []


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    steps = 200  # first a few steps, to count the events one step makes
    step = 0
    while step < steps:
        x = torch.randn(64 + step % 32, 256, device="cuda")
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 100 == 0:
            kept.append(torch.empty(4096, device="cuda"))
        step += 1
        if step == 200:
            per_step = len(torch.cuda.memory._snapshot()["device_traces"][0]) / step
            steps = int(EVENTS / per_step)
    torch.cuda.synchronize()
    print("steps", step, "events per step", per_step)


if __name__ == "__main__":
    main()
