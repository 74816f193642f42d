"""``memtui mcp`` (issue 35, memtui for agents): the Model Context Protocol server driven by
the SDK's own client, in-process and over stdio.  Every tool answers what the matching
command prints under ``--json``; only the captures it was started with, and what lies
under its ``--root`` folders, can be read; nothing is written beside them; every failure
is one line."""

from __future__ import annotations

import json
import os
import pickle
import sys

import pytest

mcp = pytest.importorskip(
    "mcp", reason="the Model Context Protocol SDK is absent (pip install 'memtui[mcp]')")

import anyio  # noqa: E402  (installed with mcp)
from mcp.client import Client  # noqa: E402

from memtui.cli import main  # noqa: E402
from memtui.mcp_server import Allowed, build_server  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.helpers.compare_traces import MiB, write_loop  # noqa: E402
from tests.helpers.hand_snapshot import write_hand_snapshot  # noqa: E402
from tests.helpers.replay_snapshots import write_ops  # noqa: E402

TOOLS = {"captures", "summary", "state", "findings", "roles", "compare", "whatif", "check"}


def cli_json(capsys, *argv) -> dict:
    assert main([*map(str, argv), "--json"]) in (0, 1)
    return json.loads(capsys.readouterr().out)


def call(server, *calls: tuple[str, dict]) -> list:
    """Each (tool, arguments) called in turn by the SDK's client, in-process."""

    async def run():
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run)


def answer(result) -> dict:
    """A successful tool result's JSON: its text (the command's --json) and its
    structured content, which must agree."""
    assert not result.is_error, result.content[0].text
    [text] = result.content
    data = json.loads(text.text)
    assert result.structured_content == data
    return data


def error(result) -> str:
    assert result.is_error
    [text] = result.content
    assert "\n" not in text.text and "Traceback" not in text.text
    return text.text


@pytest.fixture
def folder(tmp_path):
    """A --root folder holding a hand snapshot, a clean and a leaking loop, and the
    replay's own capture (the answers of each are the commands', below)."""
    root = tmp_path / "captures"
    root.mkdir()
    write_hand_snapshot(root / "hand.pickle")
    write_loop(root / "clean.pickle")
    write_loop(root / "leak.pickle", leak=MiB)
    write_ops(root / "ops.pickle", [("alloc", 40 * MiB, 0), ("free", 0), ("alloc", 10 * MiB, 0)])
    return root


def test_the_tools_are_listed_read_only(folder):
    async def run():
        async with Client(build_server(Allowed([], [folder]))) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(run)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
        assert tool.description
    assert set(tools["state"].input_schema["properties"]) == {"path", "event", "device",
                                                              "time", "layer"}
    assert tools["compare"].input_schema["required"] == ["a", "b"]


def test_each_tool_answers_the_commands_json(folder, capsys):
    hand, clean, leak, ops = (str(folder / n) for n in
                              ("hand.pickle", "clean.pickle", "leak.pickle", "ops.pickle"))
    server = build_server(Allowed([], [folder]))
    results = call(server,
                   ("summary", {"path": hand}),
                   ("findings", {"path": hand}),
                   ("findings", {"path": leak, "stacks": True}),
                   ("state", {"path": hand, "event": "peak"}),
                   ("state", {"path": hand, "event": "3"}),
                   ("compare", {"a": clean, "b": leak}),
                   ("whatif", {"path": ops, "settings": ["max_split_size_mb:32"]}),
                   ("check", {"path": leak, "max_peak": "8MiB"}),
                   ("check", {"path": leak, "baseline": clean, "tolerance": 5}),
                   ("check", {"path": leak, "max_role": {"other": "1MiB"}}))
    expected = [cli_json(capsys, "summary", hand),
                cli_json(capsys, "findings", hand),
                cli_json(capsys, "findings", leak, "--stacks"),
                cli_json(capsys, "state", hand, "--event", "peak"),
                cli_json(capsys, "state", hand, "--event", "3"),
                cli_json(capsys, "compare", clean, leak),
                cli_json(capsys, "whatif", ops, "--set", "max_split_size_mb:32"),
                cli_json(capsys, "check", leak, "--max-peak", "8MiB"),
                cli_json(capsys, "check", leak, "--baseline", clean, "--tolerance", "5"),
                cli_json(capsys, "check", leak, "--max-role", "other=1MiB")]
    answers = [answer(r) for r in results]
    assert answers == expected
    # and they say what the captures hold (worked out by hand in their helpers)
    summary, _, _, peak, _, compared, whatif, limit, baseline, role = answers
    assert summary["devices"][0]["peak_allocated_bytes"] == 4096
    assert peak["level"]["allocated"] == 4096
    assert compared["devices"][0]["end_allocated"] == [0, 4 * MiB, 4 * MiB]
    assert whatif["devices"][0]["proof"]["holds"]
    assert whatif["devices"][0]["prediction"]["settings"] == "max_split_size_mb:32"
    assert limit["passed"] is False  # 9 MiB at the peak
    assert baseline["passed"] is False  # 4 MiB left at the end, none in the baseline
    assert role["limits"]["max_role"] == {"other": MiB}


def test_roles_are_the_summarys_and_at_an_event_the_apis(folder, capsys):
    """Without an event: each device's ``by_role`` and ``roles`` of ``memtui summary
    --json``; at an event: ``Capture.by_role`` there (summing to allocated)."""
    import memtui

    leak = str(folder / "leak.pickle")
    results = call(build_server(Allowed([], [folder])),
                   ("roles", {"path": leak}),
                   ("roles", {"path": leak, "event": "peak"}),
                   ("roles", {"path": leak, "event": "last", "device": "cuda:0"}),
                   ("roles", {"path": leak, "device": "cuda:7"}))
    summary = cli_json(capsys, "summary", leak)
    at_peak = answer(results[0])
    assert at_peak["devices"] == [{"device": d["device"], "by_role": d["by_role"],
                                   "roles": d["roles"]} for d in summary["devices"]]
    assert sum(at_peak["devices"][0]["by_role"].values()) == 9 * MiB  # the peak
    capture = memtui.open(leak)
    assert answer(results[1])["by_role"] == capture.by_role("peak")
    last = answer(results[2])["by_role"]
    assert last == capture.by_role("last", device="cuda:0")
    assert sum(last.values()) == 4 * MiB  # the four leaked blocks
    assert "no device 'cuda:7'" in error(results[3])


def test_only_the_captures_named_and_what_lies_under_a_root(folder, tmp_path):
    outside = write_loop(tmp_path / "outside.pickle")
    (folder / "link.pickle").symlink_to(outside)
    named = write_loop(tmp_path / "named.pickle")
    server = build_server(Allowed([str(named)], [folder]))
    results = call(server,
                   ("captures", {}),
                   ("summary", {"path": str(named)}),
                   ("summary", {"path": str(folder / "clean.pickle")}),
                   ("summary", {"path": str(outside)}),
                   ("summary", {"path": str(folder / ".." / "outside.pickle")}),
                   ("summary", {"path": str(folder / "link.pickle")}),
                   ("compare", {"a": str(folder / "clean.pickle"), "b": str(outside)}),
                   ("check", {"path": str(named), "baseline": str(outside)}),
                   ("summary", {"path": "/etc/passwd"}),
                   ("summary", {"path": ""}))
    listing, ok_named, ok_root, *refused = results
    assert answer(listing) == {"captures": [str(named)], "roots": [str(folder.resolve())]}
    assert answer(ok_named)["devices"][0]["peak_allocated_bytes"] == 6 * MiB
    assert answer(ok_root)["devices"][0]["peak_allocated_bytes"] == 6 * MiB
    for result in refused[:-1]:
        assert "not a capture this server may read" in error(result)
    assert "give the path of a capture" in error(refused[-1])


def test_a_link_swapped_after_the_check_is_not_followed(folder, tmp_path, monkeypatch):
    """The server opens the path it judged (resolved), not the one given: a link inside
    the root, pointing inside when checked and swapped to a capture outside before the
    open, still reads the capture inside."""
    from memtui.mcp_server import Captures

    outside = write_loop(tmp_path / "outside.pickle", leak=MiB)  # its peak: not 6 MiB
    link = folder / "swapped.pickle"
    link.symlink_to(folder / "clean.pickle")
    allowed = Allowed([], [folder])
    judged = allowed.check

    def check_then_swap(path: str):
        result = judged(path)
        link.unlink()
        link.symlink_to(outside)  # the swap, between the check and the open
        return result

    monkeypatch.setattr(allowed, "check", check_then_swap)
    capture = Captures(allowed, use_cache=False).get(str(link))
    assert capture.summary().to_dict()["devices"][0]["peak_allocated_bytes"] == 6 * MiB
    assert os.path.realpath(capture.path) == str((folder / "clean.pickle").resolve())


def test_a_folder_named_is_a_capture_whose_content_may_be_read(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    write_loop(folder / "rank0.pickle")
    results = call(build_server(Allowed([str(folder)], [])),
                   ("summary", {"path": str(folder / "rank0.pickle")}),
                   ("summary", {"path": str(tmp_path)}))
    assert answer(results[0])["devices"][0]["peak_allocated_bytes"] == 6 * MiB
    assert "not a capture this server may read" in error(results[1])


def test_bad_input_is_one_line(folder):
    (folder / "cut.pickle").write_bytes((folder / "hand.pickle").read_bytes()[:40])
    (folder / "evil.pickle").write_bytes(pickle.dumps({"segments": [print]}, protocol=4))
    (folder / "bad\x1b[31mname.pickle").write_bytes(b"\x80\x04K\x01.")
    hand = str(folder / "hand.pickle")
    results = call(build_server(Allowed([], [folder])),
                   ("summary", {"path": str(folder / "cut.pickle")}),
                   ("summary", {"path": str(folder / "evil.pickle")}),
                   ("summary", {"path": str(folder / "missing.pickle")}),
                   ("summary", {"path": str(folder / "bad\x1b[31mname.pickle")}),
                   ("state", {"path": hand, "event": "nine"}),
                   ("state", {"path": hand, "event": "1", "time": "+1ms"}),
                   ("whatif", {"path": hand, "settings": ["nonsense:1"]}),
                   ("check", {"path": hand, "max_peak": "lots"}),
                   ("compare", {"a": hand}))
    lines = [error(r) for r in results]
    assert f"{folder / 'cut.pickle'}: corrupt pickle (pickle data was truncated)" in lines[0]
    assert "unsafe pickle" in lines[1] and "nothing was run" in lines[1]
    assert "missing.pickle" in lines[2]
    assert "\x1b" not in lines[3] and "\\x1b[31m" in lines[3]
    assert "event 'nine'" in lines[4]
    assert "an event or a time, not both" in lines[5]
    assert "unknown setting" in lines[6]
    assert "lots" in lines[7]
    assert "b" in lines[8] and "required" in lines[8].lower()


def test_nothing_is_written_beside_the_captures(folder, isolated_cache):
    """The tools read: the folder holds the same files, unchanged, after every tool ran;
    the reopen cache is written under $XDG_CACHE_HOME only."""
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}
    hand, clean, leak, ops = (str(folder / n) for n in
                              ("hand.pickle", "clean.pickle", "leak.pickle", "ops.pickle"))
    results = call(build_server(Allowed([], [folder])),
                   ("summary", {"path": hand}), ("findings", {"path": leak}),
                   ("state", {"path": hand}), ("roles", {"path": hand}),
                   ("compare", {"a": clean, "b": leak}),
                   ("whatif", {"path": ops, "capacity": "48MiB"}),
                   ("check", {"path": leak, "baseline": clean}))
    assert sum(not r.is_error for r in results) >= 6
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before
    assert isolated_cache.is_dir() and any(isolated_cache.rglob("*"))


def test_the_command_serves_over_stdio(folder):
    """The real command as a client starts it: a subprocess on stdin/stdout."""
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memtui.cli", "mcp", "--root", str(folder)],
        cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)})

    async def run():
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return tools, await client.call_tool(
                "summary", {"path": str(folder / "hand.pickle")})

    tools, result = anyio.run(run)
    assert tools == TOOLS
    assert answer(result)["devices"][0]["peak_allocated_bytes"] == 4096


@pytest.mark.parametrize("argv, words", [
    (["mcp", "--root", "/no/such/folder"], "--root: not a folder"),
    (["mcp", "/no/such/capture.pickle"], "no such file or folder"),
])
def test_the_command_refuses_bad_arguments_in_one_line(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_without_the_sdk_the_command_says_how_to_install_it(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mcp" else real(name, *a))
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'memtui[mcp]'" in err and err.count("\n") == 1
