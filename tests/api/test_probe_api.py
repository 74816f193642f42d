"""Held-out probes of the API (issue 31) that found something: each failed before its fix.

* ``capture.whatif("max_split_size_mb:32")``: a string is one PYTORCH_CUDA_ALLOC_CONF
  (as ``--set`` takes it), not a sequence of one-character settings ("m: unknown
  setting").
* ``memtui mcp --root R``: a folder under R holding a link to a file outside R was read
  through the link.
"""

from __future__ import annotations

import pytest

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


def test_the_mcp_server_reads_no_file_a_link_in_a_folder_leads_out_to(tmp_path):
    """A folder under ``--root`` whose one capture is a link to a file outside it: the
    server read the outside file (the loader follows a link to a file)."""
    from memtui.mcp_server import Allowed, Captures, Refused, tool_functions

    outside = write_ops(tmp_path / "outside.pickle", OPS)
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    (run / "rank0.pickle").symlink_to(outside)
    write_ops(tmp_path / "root" / "own.pickle", OPS)
    tools = tool_functions(Captures(Allowed(roots=[tmp_path / "root"]), use_cache=False))
    for folder in (run, run.parent):
        with pytest.raises(Refused, match=r"holds a link out of .*rank0\.pickle"):
            tools["summary"](str(folder))
    (run / "rank0.pickle").unlink()
    (run / "rank0.pickle").symlink_to(run.parent / "own.pickle")  # a link inside: read
    assert tools["summary"](str(run))["devices"][0]["events"] > 0
