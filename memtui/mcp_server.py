"""``memtui mcp``: a Model Context Protocol server over the Python API, for coding agents.

The server owns what an agent may do, and nothing else: tools named after the commands
(``summary``, ``state``, ``findings``, ``roles``, ``compare``, ``whatif``, ``check``, and
``captures`` to list what may be opened) call :mod:`memtui.api` and answer with the very
JSON the commands print under ``--json`` (the text part of the result is that JSON, the
structured part the same object).

What it may read is fixed when it starts (:class:`Allowed`): the captures the user named
on the command line (a folder named there is a capture, and what lies inside it may be
read) and whatever lies under a ``--root`` folder.  A tool's path is resolved (``..`` and
symbolic links followed) before it is checked, so neither leads outside; a folder holding
a link to a file outside is refused (the loader would read it).  It never writes
a file: captures are opened as the commands open them, through the reopen cache under
``$XDG_CACHE_HOME/memtui`` (``--no-cache``: not even that), and no result is written out.

Every failure, a path refused included, is an MCP tool error of one line (the commands'
``memtui: PATH: problem`` without the prefix), never a traceback.  The ``mcp`` package
(the ``mcp`` extra) is imported only by :func:`build_server`.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.errors import CaptureError, safe_line

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from memtui.api import Capture

#: How the server names itself to a client.
SERVER_NAME = "memtui"
INSTRUCTIONS = (
    "memtui reads GPU/NPU memory captures (PyTorch snapshot pickles, msMemScope DB/CSV, "
    "Ascend profiler folders). Call `captures` first for the paths you may open; every "
    "other tool takes one of them and answers with the JSON of the matching "
    "`memtui COMMAND --json`. Sizes are bytes, times nanoseconds, events 0-based.")
#: Captures kept open between tool calls (an agent asks several questions of one file).
KEPT_CAPTURES = 2


class Refused(Exception):
    """A path the server may not read: its message is the one line the client gets."""


class Allowed:
    """The paths the user allowed: capture ``files`` named on the command line, and
    ``folders`` (named captures that are folders, and ``--root`` folders) whose whole
    content may be read.  Paths are compared resolved."""

    def __init__(self, captures: Sequence[str | Path] = (),
                 roots: Sequence[str | Path] = ()) -> None:
        self.named = [Path(p) for p in captures]
        self.files: set[Path] = set()
        self.folders: list[Path] = []
        for path in self.named:
            resolved = path.resolve()
            (self.folders.append if resolved.is_dir() else self.files.add)(resolved)
        self.roots = [Path(r).resolve() for r in roots]
        self.folders.extend(self.roots)

    def check(self, path: str) -> Path:
        """``path`` (relative ones from the server's working folder) resolved, where it is
        allowed; :class:`Refused` otherwise.  The caller opens the resolved path, the one
        judged: a link at ``path`` swapped between the check and the open (to a file
        outside) is never followed."""
        if not isinstance(path, str) or not path.strip():
            raise Refused("give the path of a capture (the captures tool lists them)")
        given = Path(path).expanduser()
        try:
            resolved = given.resolve()
        except (OSError, RuntimeError) as exc:  # a loop of links
            raise Refused(f"{safe_line(path)}: cannot resolve it ({exc})") from None
        if self._inside(resolved):
            if resolved.is_dir():
                self._no_link_out_of(resolved, path)
            return resolved
        raise Refused(f"{safe_line(path)}: not a capture this server may read (only the "
                      "paths memtui mcp was started with, and what lies under its --root "
                      "folders)")

    def _inside(self, resolved: Path) -> bool:
        return resolved in self.files or any(resolved == folder or resolved.is_relative_to(folder)
                                             for folder in self.folders)

    def _no_link_out_of(self, folder: Path, given: str) -> None:
        """Refused where a link to a file inside ``folder`` leads out of what may be read:
        the loader's walk (:func:`~memtui.sources.common.walk.walk`, the same bounds) reads
        such a file where it points (``run/rank1.pickle -> /elsewhere/x.pickle``)."""
        from memtui.sources.common.walk import walk

        for listed in walk(folder):
            for entry in listed.files:
                if not entry.is_symlink():
                    continue
                try:
                    target = entry.resolve()
                except (OSError, RuntimeError):
                    continue  # a loop of links: the loader cannot read it either
                if not self._inside(target):
                    raise Refused(f"{safe_line(given)}: holds a link out of what this server "
                                  f"may read ({safe_line(str(entry.relative_to(folder)))})")

    def listing(self) -> dict[str, Any]:
        """The ``captures`` tool's answer: what was named and which folders are open."""
        return {"captures": [str(p) for p in self.named],
                "roots": [str(r) for r in self.roots]}


class Captures:
    """Captures opened for the tools, the last :data:`KEPT_CAPTURES` kept open (keyed by
    the resolved path, its size and its modification time: a file rewritten is opened
    again)."""

    def __init__(self, allowed: Allowed, use_cache: bool | None = None) -> None:
        self.allowed = allowed
        self.use_cache = use_cache
        self._open: OrderedDict[tuple, Capture] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str) -> Capture:
        from memtui.api import open as open_capture

        allowed = self.allowed.check(path)
        try:
            stat = allowed.stat()
            key = (allowed, stat.st_size, stat.st_mtime_ns)
        except OSError:
            key = None  # let the loader say what is wrong with it, in its words
        with self._lock:
            if key is not None and key in self._open:
                self._open.move_to_end(key)
                return self._open[key]
        capture = open_capture(allowed, use_cache=self.use_cache)
        if key is not None:
            with self._lock:
                self._open[key] = capture
                while len(self._open) > KEPT_CAPTURES:
                    self._open.popitem(last=False)
        return capture


# -- the tools: each returns what the matching command prints under --json --------------------


def tool_functions(captures: Captures) -> dict[str, Callable[..., dict[str, Any]]]:
    """The tools by name, as plain functions returning the commands' JSON objects (the
    server wraps them; tests may call them directly)."""

    def summary(path: str) -> dict[str, Any]:
        """Per-device figures of a capture (`memtui summary --json`): events, blocks, peak
        allocated and reserved (bytes) and when, allocated and reserved at the end, the
        findings counted by kind."""
        return captures.get(path).summary().to_dict()

    def state(path: str, event: str | None = None, device: str | None = None,
              time: str | None = None, layer: str | None = None) -> dict[str, Any]:
        """The allocator state just after one event (`memtui state --json`): segments,
        blocks, free gaps, fragmentation.  `event`: a 0-based position in the device's
        trace, or first, peak, last (default); or `time`: +1.5s / 250ms from the start;
        `device` (default: the one with the most events); `layer` for msMemScope."""
        if event is not None and time is not None:
            raise CaptureError(path, "an event or a time, not both")
        return captures.get(path).state(event, device=device, time=time,
                                        layer=layer).to_dict()

    def findings(path: str, stacks: bool = False) -> dict[str, Any]:
        """Leaks, the peak, OOMs, fragmentation, inefficient blocks and capture limits,
        most severe first, each with what to do (`memtui findings --json`); `stacks`: the
        full call stack of each finding's evidence."""
        return captures.get(path).findings(stacks=stacks).to_dict()

    def roles(path: str, event: str | None = None,
              device: str | None = None) -> dict[str, Any]:
        """Bytes by role (parameter, gradient, optimizer_state, activation, temporary,
        input, cache, other; they sum to allocated).  Without `event`: each device's
        roles at its peak (`by_role`) and `roles` (at the peak, at the end, each role's
        own peak), as `memtui summary --json` gives them; with `event` (0-based, or
        first, peak, last): the bytes by role just after it on `device`."""
        return roles_of(captures.get(path), event, device)

    def compare(a: str, b: str, align: str | None = None, shift: int = 0) -> dict[str, Any]:
        """What changed from capture A to capture B and where (`memtui compare --json`):
        peaks and ends of each, deltas B - A by stack, owner and operator.  `align`: step,
        time or position (default: step where both have steps)."""
        from memtui.api import compare as compare_captures

        return compare_captures(captures.get(a), captures.get(b), align=align,
                                shift=shift).to_dict()

    def whatif(path: str, settings: list[str] | None = None, capacity: str | None = None,
               fraction_limit: str | None = None,
               device: str | None = None) -> dict[str, Any]:
        """Replay PyTorch's caching allocator (`memtui whatif --json`): the proof that the
        replay reproduces the recording, and what `settings` (["expandable_segments:True",
        "max_split_size_mb:512"], as in PYTORCH_CUDA_ALLOC_CONF), a `capacity` ("80GiB")
        or a per-process `fraction_limit` would change: reserved peak, cudaMallocs, OOMs."""
        return captures.get(path).whatif(settings or (), capacity=capacity,
                                         fraction_limit=fraction_limit,
                                         device=device).to_dict()

    def check(path: str, baseline: str | None = None, max_peak: str | None = None,
              max_reserved: str | None = None, max_end: str | None = None,
              max_role: dict[str, str] | None = None, max_leak_per_step: str | None = None,
              tolerance: float | None = None,
              allow_oom: bool | None = None) -> dict[str, Any]:
        """Check a capture against memory limits (`memtui check --json`): sizes as
        "40GiB", "512MiB", 1e9; `max_role` a size per role ({"optimizer_state": "4GiB"});
        `tolerance` in percent against `baseline` (another capture of the same job).
        `passed` is false where a limit is broken, each result with its figure and what
        holds the bytes.  No pyproject.toml is read."""
        limits: dict[str, Any] = {
            "max_peak": max_peak, "max_reserved": max_reserved, "max_end": max_end,
            "max_role": max_role, "max_leak_per_step": max_leak_per_step,
            "tolerance": tolerance, "allow_oom": allow_oom}
        base = captures.get(baseline) if baseline is not None else None
        return captures.get(path).check(
            base, **{k: v for k, v in limits.items() if v is not None}).to_dict()

    def captures_tool() -> dict[str, Any]:
        """The captures this server may open: those it was started with, and the folders
        under which any capture may be opened (`roots`)."""
        return captures.allowed.listing()

    return {"captures": captures_tool, "summary": summary, "state": state,
            "findings": findings, "roles": roles, "compare": compare, "whatif": whatif,
            "check": check}


def roles_of(capture: Capture, event: str | None = None,
             device: str | None = None) -> dict[str, Any]:
    """The ``roles`` tool's answer: the summary's ``by_role`` and ``roles`` of each device
    (of ``device``), or ``Capture.by_role`` just after ``event``."""
    if event is not None:
        if device is not None:
            capture.state(event, device=device)  # a device or an event it lacks: one line
        return {"path": capture.path, "device": device, "event": event,
                "by_role": capture.by_role(event, device=device)}
    data = capture.summary().to_dict()
    devices = [{"device": d["device"], "by_role": d.get("by_role", {}),
                "roles": d.get("roles", {})}
               for d in data["devices"] if device is None or d["device"] == device]
    if device is not None and not devices:
        raise CaptureError(capture.path, f"no device {device!r} (it has "
                                         f"{', '.join(capture.devices) or 'none'})")
    return {"source": data["source"], "path": data["path"], "devices": devices}


def one_line(exc: BaseException) -> str:
    """The one line a client gets for ``exc``: a CaptureError's own line, a refusal's
    message, else the kind of failure and its message (never a traceback)."""
    if isinstance(exc, CaptureError | Refused):
        return safe_line(str(exc))
    return safe_line(f"{type(exc).__name__}: {exc}")


def build_server(allowed: Allowed, use_cache: bool | None = None) -> MCPServer:
    """The MCP server with every tool of :func:`tool_functions`, each run in a worker
    thread (a capture may take seconds to open: the server keeps answering), read-only."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations

    from memtui.version import __version__

    server = MCPServer(name=SERVER_NAME, instructions=INSTRUCTIONS, version=__version__,
                       log_level="WARNING", middleware=[_one_line_errors])
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                idempotent_hint=True, open_world_hint=False)
    for name, fn in tool_functions(Captures(allowed, use_cache)).items():
        server.add_tool(_as_tool(fn, anyio, ToolError, CallToolResult, TextContent),
                        name=name, description=fn.__doc__, annotations=read_only,
                        structured_output=False)
    return server


async def _one_line_errors(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
    """Middleware: a failed tool call's text made one line, also where the SDK wrote it
    (arguments that fail the tool's schema come as several lines of pydantic's)."""
    result = await call_next(ctx)
    if ctx.method != "tools/call":
        return result
    if hasattr(result, "model_dump"):
        result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(result, dict) and result.get("isError"):
        texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
        line = safe_line(" ".join(" ".join(texts).split()))
        result = {**result, "content": [{"type": "text", "text": line}]}
    return result


def _as_tool(fn: Callable[..., dict[str, Any]], anyio, tool_error, result_type,
             text_type) -> Callable[..., Any]:
    """``fn`` as an async tool: run in a thread, its object answered as the commands'
    JSON text (and as structured content), any failure as one line."""
    import functools
    import inspect

    async def tool(**arguments: Any) -> Any:
        try:
            data = await anyio.to_thread.run_sync(functools.partial(fn, **arguments))
            text = json.dumps(data)
        except Exception as exc:  # noqa: BLE001 - every failure is one line for the client
            raise tool_error(one_line(exc)) from None
        return result_type(content=[text_type(type="text", text=text)],
                           structured_content=data)

    setattr(tool, "__signature__", inspect.signature(fn))  # noqa: B010 - the arguments are fn's
    tool.__annotations__ = {**fn.__annotations__, "return": result_type}
    tool.__name__, tool.__doc__ = fn.__name__, fn.__doc__
    return tool


def serve_stdio(allowed: Allowed, use_cache: bool | None = None) -> None:
    """Serve on stdin/stdout until the client goes away."""
    build_server(allowed, use_cache).run("stdio")


__all__ = ["Allowed", "Captures", "Refused", "build_server", "one_line", "roles_of",
           "serve_stdio", "tool_functions"]
