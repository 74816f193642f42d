"""The pytest plugin with the real recorder on a real GPU (skipped without torch and CUDA).

Run it on a machine with a GPU: ``python -m pytest -q tests/plugin/test_plugin_gpu.py``
(it needs only torch and memtui's own dependencies).  An inner pytest session (a
subprocess, this checkout's memtui first on its path) runs three marked tests that
allocate on ``cuda:0`` through PyTorch's caching allocator:

* 64 MiB allocated and freed under ``max_peak="1 GiB"``: passes;
* 256 MiB under ``max_peak="128 MiB"``: fails, the verdict naming 256.0 MiB, the capture
  (a snapshot dumped by memtui's recorder) kept under the test's ``tmp_path``;
* eight steps that each allocate 32 MiB of activations, free them and keep 4 MiB, under
  ``max_leak_per_step="1 MiB"``: fails with a leak of 4.0 MiB per step.

The kept capture of the failing peak test is then opened with ``memtui.open``: it holds
the 256 MiB block.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.plugin.test_plugin import QUIET, plugin_args

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch", reason="the real recorder needs torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the real recorder has nothing to record",
                allow_module_level=True)

INNER = """
import pytest
import torch

MiB = 1 << 20


def empty(n_bytes):
    return torch.empty(n_bytes, dtype=torch.uint8, device="cuda")


@pytest.mark.accelerator_memory(max_peak="1 GiB", max_leak_per_step="0 B")
def test_within():
    x = empty(64 * MiB)
    del x
    torch.cuda.synchronize()


@pytest.mark.accelerator_memory(max_peak="128 MiB")
def test_over():
    x = empty(256 * MiB)
    del x
    torch.cuda.synchronize()


@pytest.mark.accelerator_memory(max_leak_per_step="1 MiB")
def test_leaks():
    kept = []
    for _ in range(8):
        activations = [empty(16 * MiB), empty(16 * MiB)]
        kept.append(empty(4 * MiB))
        del activations
    torch.cuda.synchronize()
"""


def test_the_real_recorder_checks_real_allocations(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_gpu=textwrap.dedent(INNER))
    result = pytester.runpytest_subprocess(*plugin_args(), *QUIET, "-rA")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "max_peak: peak allocated 256.0 MiB > --max-peak 128.0 MiB" in out
    assert "leaks 4.0 MiB per step" in out
    kept = [line.split("capture kept at ")[1].split(" (open it")[0]
            for line in result.stdout.lines if "capture kept at " in line]
    over = Path(next(p for p in kept if "test_over" in p))
    assert over.is_file()

    import memtui

    cap = memtui.open(over, use_cache=False)
    assert cap.devices == ["cuda:0"]
    sizes = cap.blocks("cuda:0")["size"].to_list()
    assert 256 << 20 in sizes
    assert cap.summary().devices[0].peak_allocated_bytes >= 256 << 20
