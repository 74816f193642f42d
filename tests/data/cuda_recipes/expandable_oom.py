"""Expandable segments that unmap, then an OOM on a full device (see ../README.md).

Run with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.  Before the memory history
begins, 2 GiB of weights are mapped (a segment mapped before the history began).  Then:
a working set of 1 GiB tensors fills the device to about 2 GiB below its capacity; every
fourth is freed (free pages left mapped inside the segment); ``empty_cache`` unmaps some;
the set grows again; a request larger than all that is free (device and cache) fails:
the allocator first unmaps its cached pages (``segment_unmap``), then raises the OOM
(asked: the device's free memory, the cache and 4 GiB more).
The OOM is caught; a few more tensors come and go before the exit dump.  Small tensors
churn throughout (the small pool's own expandable segment).
"""

import torch

GiB = 2**30
MiB = 2**20


def churn(n: int) -> None:
    for i in range(n):
        t = torch.empty((i % 7 + 1) * 64 * 1024, dtype=torch.uint8, device="cuda")
        del t


def main() -> None:
    torch.cuda.memory._record_memory_history(enabled=None)  # memtui record turned it on
    weights = [torch.empty(512 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=100_000)
    free, _total = torch.cuda.mem_get_info()
    working = []
    for _ in range(max(free // GiB - 2, 4)):
        working.append(torch.empty(GiB, dtype=torch.uint8, device="cuda"))
        churn(5)
    for i in range(0, len(working), 4):
        working[i] = None  # freed: its pages stay mapped, cached in the segment
    churn(20)
    torch.cuda.empty_cache()  # unmaps the free pages
    for i in range(0, len(working), 4):
        if i % 8 == 0:
            working[i] = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    for i in range(2, len(working), 8):
        working[i] = None
    churn(20)
    free, _total = torch.cuda.mem_get_info()
    cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    try:  # more than the device's free memory and the cache together
        too_big = torch.empty(free + cached + 4 * GiB, dtype=torch.uint8, device="cuda")
        del too_big
    except torch.OutOfMemoryError as exc:
        print("expandable OOM as planned:", str(exc).splitlines()[0])
    after = [torch.empty(256 * MiB, dtype=torch.uint8, device="cuda") for _ in range(3)]
    churn(20)
    del after[1]
    torch.cuda.synchronize()
    print("weights", len(weights), "working", sum(t is not None for t in working))


if __name__ == "__main__":
    main()
