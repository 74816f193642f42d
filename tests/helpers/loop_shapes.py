"""Training loops shaped as real ones are, with the truth of their planted leak.

:func:`build_loop` runs a :class:`LoopShape` through :class:`TraceBuilder` (a hand-made
trace: every block's stack, size and lifetime known): parameters, then ``steps`` steps of
``micro_batches`` forward and backward passes whose activations are routed at random to
one of ``experts`` stacks (a mixture of experts, a data-dependent branch), in a number
that varies from step to step (variable sequence lengths) and with sizes that vary too;
gradients allocated in the first backward of a step and freed at its end (gradient
accumulation), an optimizer whose state is allocated in the first step and kept, an
evaluation pass every ``eval_every`` steps, and a clock whose steps take a jittered time.

What it plants is the truth a test compares with: ``leak`` bytes kept every
``leak_every``-th step from ``leaky_cache`` (``bytes_per_step`` = ``leak / leak_every``),
and the shapes that are *not* leaks: a warm-up cache filled in the first steps, a KV cache
that grows through each step and is freed at its end, an evaluation cache replaced at
each evaluation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from memtui.model import MemoryTrace
from tests.helpers.findings_traces import MiB, TraceBuilder

KiB = 1 << 10
LEAK_FUNCTION = "leaky_cache"


@dataclass(frozen=True)
class LoopShape:
    """One training loop (see the module docstring); sizes in bytes."""

    steps: int = 40
    markers: bool = False
    experts: int = 2  # stacks an activation is routed to, at random
    activations: int = 12  # per micro-batch, on average
    count_jitter: float = 0.3  # +- share of the activations' count per micro-batch
    activation_size: int = 2 * MiB
    size_jitter: float = 0.5  # +- share of each activation's size
    gradients: int = 6
    gradient_size: int = MiB
    micro_batches: int = 1
    optimizer_temps: int = 2  # temporaries of the optimizer's step, freed in it
    temporaries: float = 0.3  # chance of a temporary after each activation
    eval_every: int = 0
    time_jitter: float = 0.5  # +- share of each step's time spent waiting
    leak: int = 0
    leak_every: int = 1
    leak_start: int = 0
    leak_phase: str = "end"  # "forward", "end" or "random": where in the step it keeps
    warmup_steps: int = 0  # a cache filled in the first steps, then kept: not a leak
    kv_cache: bool = False  # a cache grown through each step, freed at its end
    eval_cache: bool = False  # kept from one evaluation to the next: bounded

    @property
    def bytes_per_step(self) -> float:
        return self.leak / self.leak_every if self.leak else 0.0

    def leaks_at(self, step: int) -> bool:
        return bool(self.leak) and step >= self.leak_start \
            and (step - self.leak_start) % self.leak_every == self.leak_every - 1


def build_loop(shape: LoopShape, seed: int = 0) -> MemoryTrace:
    """The trace of ``shape``'s loop, its randomness drawn from ``seed``."""
    return _Loop(shape, random.Random(seed)).run()


class _Loop:
    def __init__(self, shape: LoopShape, rng: random.Random) -> None:
        self.shape = shape
        self.rng = rng
        self.b = TraceBuilder()
        self.eval_kept: int | None = None

    def jittered(self, size: int, share: float) -> int:
        return max(512, int(size * (1 + self.rng.uniform(-share, share))) // 512 * 512)

    def run(self) -> MemoryTrace:
        b, shape = self.b, self.shape
        for _ in range(4):
            b.alloc("init_params", 16 * MiB)
        for step in range(shape.steps):
            if shape.markers:
                b.step(f"ProfilerStep#{step}")
            self.step(step)
            b.wait(int(20_000 * (1 + self.rng.uniform(-shape.time_jitter, shape.time_jitter))))
        return b.build()

    def step(self, step: int) -> None:
        b, shape = self.b, self.shape
        leak_at = self.rng.randrange(3) if shape.leak_phase == "random" else \
            {"forward": 0, "end": 2}[shape.leak_phase]
        grads: list[int] = []
        kv: list[int] = []
        for micro in range(shape.micro_batches):
            acts = self.forward(kv)
            if leak_at == 0 and micro == 0 and shape.leaks_at(step):
                b.alloc(LEAK_FUNCTION, shape.leak)
            self.backward(acts, grads, first=micro == 0)
            if leak_at == 1 and micro == 0 and shape.leaks_at(step):
                b.alloc(LEAK_FUNCTION, shape.leak)
        if step == 0:  # the optimizer's state, allocated lazily and kept
            for _ in range(shape.gradients):
                b.alloc("optimizer_state", 2 * shape.gradient_size)
        for block in [b.alloc("optimizer_step", shape.gradient_size)
                      for _ in range(shape.optimizer_temps)]:
            b.free(block)
        for block in grads + kv:
            b.free(block)
        if step < shape.warmup_steps:
            b.alloc("warm_cache", MiB)
        if leak_at == 2 and shape.leaks_at(step):
            b.alloc(LEAK_FUNCTION, shape.leak)
        if shape.eval_every and step % shape.eval_every == shape.eval_every - 1:
            self.evaluate()

    def forward(self, kv: list[int]) -> list[int]:
        b, shape = self.b, self.shape
        count = max(1, round(shape.activations
                             * (1 + self.rng.uniform(-shape.count_jitter, shape.count_jitter))))
        acts = []
        for _ in range(count):
            expert = self.rng.randrange(shape.experts)
            acts.append(b.alloc(f"expert_{expert}_forward",
                                self.jittered(shape.activation_size, shape.size_jitter)))
            if self.rng.random() < shape.temporaries:  # a temporary freed at once
                b.free(b.alloc("gelu", self.jittered(shape.activation_size // 2, 0.5)))
            if shape.kv_cache:
                kv.append(b.alloc("kv_cache_grow", 256 * KiB))
        return acts

    def backward(self, acts: list[int], grads: list[int], first: bool) -> None:
        b, shape = self.b, self.shape
        for index in range(shape.gradients):
            if first:
                grads.append(b.alloc("backward_grad", shape.gradient_size))
            for block in acts[index::shape.gradients]:
                b.free(block)

    def evaluate(self) -> None:
        b = self.b
        acts = [b.alloc("evaluate", self.jittered(4 * MiB, 0.5)) for _ in range(4)]
        if self.shape.eval_cache:
            kept = b.alloc("eval_cache", 2 * MiB)
            if self.eval_kept is not None:
                b.free(self.eval_kept)
            self.eval_kept = kept
        for block in acts:
            b.free(block)


__all__ = ["LEAK_FUNCTION", "LoopShape", "build_loop"]
