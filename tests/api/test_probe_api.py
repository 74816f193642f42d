"""Held-out probes of the API (issue 31) that found something: each failed before its fix.

* ``capture.whatif("max_split_size_mb:32")``: a string is one PYTORCH_CUDA_ALLOC_CONF
  (as ``--set`` takes it), not a sequence of one-character settings ("m: unknown
  setting").
"""

from __future__ import annotations

import memtui
from tests.helpers.replay_snapshots import write_ops

#: A 40 MiB block freed, then a 10 MiB one (the op list of replay_snapshots.run_ops).
OPS = [("alloc", 40 << 20, 0), ("free", 0), ("alloc", 10 << 20, 0)]


def test_one_string_is_one_setting(tmp_path):
    capture = memtui.open(write_ops(tmp_path / "ops.pickle", OPS), use_cache=False)
    for setting in ("max_split_size_mb:32", "max_split_size_mb:32,expandable_segments:True"):
        one = capture.whatif(setting).to_dict()
        listed = capture.whatif(setting.split(",")).to_dict()
        assert one == listed and one["devices"][0]["prediction"] is not None
