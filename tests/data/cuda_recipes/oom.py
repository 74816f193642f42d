"""Out-of-memory errors recorded on a real GPU for memtui's tests (see ../README.md).

``fragmented``: the process may use 2 GiB (``set_per_process_memory_fraction``); 6 MiB
tensors fill 20 MiB large-pool segments, two of every three are freed, so about 1.2 GiB is
free but split inside segments that each still hold one live tensor, and a 100 MiB tensor
cannot be placed: a fragmentation OOM.  ``full``: a tensor larger than the whole device.
Each OOM is caught, so the recorder's exit dump follows its OOM dump.
"""

import sys

import torch

MiB = 2**20


def fragmented():
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(2 * 1024 * MiB / total)
    tensors = [torch.empty(6 * MiB, dtype=torch.uint8, device="cuda") for _ in range(300)]
    survivors = tensors[::3]
    del tensors
    try:
        big = torch.empty(100 * MiB, dtype=torch.uint8, device="cuda")
        del big
    except torch.OutOfMemoryError as exc:
        print("fragmented OOM as planned:", str(exc).splitlines()[0])
    return survivors


def full():
    weights = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(total * 2, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as exc:
        print("full-device OOM as planned:", str(exc).splitlines()[0])
    return weights


if __name__ == "__main__":
    kept = {"fragmented": fragmented, "full": full}[sys.argv[1]]()
    torch.cuda.synchronize()
