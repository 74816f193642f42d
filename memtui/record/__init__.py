"""Recording PyTorch memory history into snapshot dumps that ``memtui --follow`` shows live.

The only part of memtui that touches torch (installed with the ``record`` extra; the
viewer never imports it).  Two ways in:

* ``memtui record [--out DIR] [--every S] -- python train.py ARGS``
  (:mod:`memtui.commands.record`): runs the script unchanged, recording in its process;
* the Python API, for people who prefer it::

      from memtui.record import recording
      with recording("DIR", every=60):
          train()

Both dump ``DIR/snapshot_*.pickle`` every ``every`` seconds, at an out-of-memory error and
at the end, each written whole under a temporary name and renamed (:mod:`.recorder`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memtui.record.recorder import DEFAULT_MAX_ENTRIES, Backend, Recorder, Settings, say


@contextmanager
def recording(out: str | Path = "memtui_record", every: float | None = 60.0, *,
              on_oom: bool = True, max_entries: int = DEFAULT_MAX_ENTRIES,
              stacks: str = "python", keep: int = 5,
              backend: Backend | None = None) -> Iterator[Recorder]:
    """Record memory history while the block runs; dumps as ``memtui record`` writes them.

    ``backend`` is found from torch where not given (CUDA, or Ascend with torch_npu
    imported).  Without an accelerator the block still runs and a line on stderr says
    that nothing could be recorded.
    """
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
    settings = Settings(out=str(out), every=every, on_oom=on_oom, max_entries=max_entries,
                        stacks=stacks, keep=keep)
    if backend is None:
        import torch  # noqa: F401  (the recording needs it loaded)

        from memtui.record.recorder import find_backend

        backend, why = find_backend()
        if backend is None:
            say(f"no accelerator memory history can be recorded: {why}")
    recorder = Recorder(settings, backend)
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.stop()


__all__ = ["Recorder", "Settings", "recording"]
