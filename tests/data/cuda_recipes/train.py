"""A small training loop recorded on a real GPU for memtui's tests (see ../README.md).

A two-layer MLP trained for a few steps with AdamW. Each step also keeps a 3 MiB buffer
on purpose (``remember_for_debugging``: the planted leak, 3 MiB per step) and runs a
side-stream copy whose input is freed while the side stream may still use it
(``record_stream``: a free that completes later, on another stream).
"""

import sys

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 8
LEAK_BYTES = 3 * 2**20

kept_for_debugging: list[torch.Tensor] = []


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model, optimizer, batch):
    loss = model(batch).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def side_stream_copy(side, tensor):
    with torch.cuda.stream(side):
        copy = tensor * 2
    tensor.record_stream(side)
    return copy


def remember_for_debugging():
    kept_for_debugging.append(torch.empty(LEAK_BYTES, dtype=torch.uint8, device="cuda"))


def main():
    model, optimizer = build()
    side = torch.cuda.Stream()
    for _ in range(STEPS):
        batch = torch.randn(512, 1024, device="cuda")
        train_step(model, optimizer, batch)
        scratch = torch.randn(256, 1024, device="cuda")
        side_stream_copy(side, scratch)
        del scratch
        remember_for_debugging()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
