"""A real headless Chromium driven over the DevTools protocol (CDP), for ``memtui serve``.

``chromium --dump-dom`` returns before textual-serve's websocket brings the first byte,
and xterm.js draws on a canvas (no text in the DOM), so the test drives the browser: a
tiny CDP client over the websocket (aiohttp, which textual-serve already pulls in) loads
the page, counts what the terminal's canvas draws, keeps the text the page's websocket
received (a hook on ``WebSocket`` installed before the page's scripts run), presses keys
and takes a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Installed before the page's scripts: every text frame the page's websockets receive
#: is appended to ``window.__ws_text``.
_HOOK = """
(() => {
  window.__ws_text = "";
  const Native = window.WebSocket;
  const keep = (data) => {
    if (typeof data === "string") { window.__ws_text += data; }
    else if (data instanceof ArrayBuffer) { window.__ws_text += new TextDecoder().decode(data); }
    else if (data instanceof Blob) { data.text().then((t) => { window.__ws_text += t; }); }
  };
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    socket.addEventListener("message", (event) => keep(event.data));
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();
"""

#: What the page shows now: body classes, the terminal canvas's lit pixels and colours,
#: and the websocket text received so far.
_PROBE = """
(() => {
  const canvas = document.querySelector(".xterm-text-layer");
  let lit = 0;
  const colours = new Set();
  if (canvas) {
    const d = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    for (let i = 0; i < d.length; i += 4) {
      if (d[i + 3] > 0 && d[i] + d[i + 1] + d[i + 2] > 60) {
        lit++;
        colours.add((d[i] >> 4) + "," + (d[i + 1] >> 4) + "," + (d[i + 2] >> 4));
      }
    }
  }
  return JSON.stringify({body: document.body ? document.body.className : "",
                         lit: lit, colours: colours.size, text: window.__ws_text || ""});
})()
"""


@dataclass
class PageState:
    body: str
    lit: int  # canvas pixels drawn in a visible colour
    colours: int  # distinct colours among them
    text: str  # what the page's websockets received


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium page (``async with Browser() as page``)."""

    def __init__(self, width: int = 1000, height: int = 560) -> None:
        self.size = (width, height)
        self._proc: subprocess.Popen | None = None
        self._next = 0

    async def __aenter__(self) -> Browser:
        import aiohttp

        self._profile = tempfile.TemporaryDirectory()
        self._proc = subprocess.Popen(
            [chromium() or "chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile.name}",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = await asyncio.to_thread(self._devtools_port)
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as reply:
            pages = [t for t in await reply.json() if t["type"] == "page"]
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"],
                                                  max_msg_size=0)
        await self.call("Page.enable")
        await self.call("Page.addScriptToEvaluateOnNewDocument", source=_HOOK)
        return self

    def _devtools_port(self) -> int:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if found:
                return int(found.group(1))
        raise RuntimeError("chromium did not open its DevTools port")

    async def __aexit__(self, *_exc) -> None:
        try:
            await self._ws.close()
            await self._session.close()
        finally:
            if self._proc is not None:
                self._proc.terminate()
                self._proc.wait(timeout=10)
            self._profile.cleanup()

    async def call(self, method: str, **params: Any) -> dict:
        """One CDP command; its result (events in between are skipped)."""
        self._next += 1
        ident = self._next
        await self._ws.send_json({"id": ident, "method": method, "params": params})
        while True:
            message = json.loads((await self._ws.receive()).data)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def state(self) -> PageState:
        reply = await self.call("Runtime.evaluate", expression=_PROBE, returnByValue=True)
        value = reply.get("result", {}).get("value")
        if value is None:  # the new document is not there yet
            return PageState("", 0, 0, "")
        return PageState(**json.loads(value))

    async def wait_for(self, condition, seconds: float = 40.0) -> PageState:
        """Poll the page until ``condition(state)``; the last state either way."""
        end = time.monotonic() + seconds
        state = await self.state()
        while not condition(state) and time.monotonic() < end:
            await asyncio.sleep(0.5)
            state = await self.state()
        return state

    async def press(self, key: str) -> None:
        """Type one printable key into the page's terminal (its hidden textarea focused)."""
        await self.call("Runtime.evaluate", expression=(
            "document.querySelector('.xterm-helper-textarea').focus()"))
        await self.call("Input.dispatchKeyEvent", type="keyDown", text=key, key=key,
                        unmodifiedText=key)
        await self.call("Input.dispatchKeyEvent", type="keyUp", key=key)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


__all__ = ["Browser", "PageState", "chromium"]
