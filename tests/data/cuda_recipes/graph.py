"""A CUDA graph captured and replayed on a real GPU for memtui's tests (see ../README.md).

The graph's allocations come from its private memory pool (``segment_pool_id`` in the
trace); the warm-up runs on a side stream as PyTorch's documentation does it.
"""

import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 1024)).cuda()
    static_input = torch.randn(128, 1024, device="cuda")
    warmup = torch.cuda.Stream()
    warmup.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warmup):
        for _ in range(3):
            model(static_input)
    torch.cuda.current_stream().wait_stream(warmup)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = model(static_input)
    for _ in range(4):
        static_input.copy_(torch.randn_like(static_input))
        graph.replay()
    torch.cuda.synchronize()
    return graph, static_output


if __name__ == "__main__":
    kept = main()
