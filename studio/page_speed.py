"""Keeps gradio's page from re-applying every widget's unchanged loading status on every event.

Gradio 6's page, on every event that calls the server (each field change, each tick of the dashboard's timers),
hands the loading status of every widget that is an output of any handler back to the component tree
(``DependencyManager.update_loading_stati_state``), and each hand-over finds its widget by walking the whole tree
(``AppTree.update_state``): on this page, about a thousand widgets, half a second of the browser's CPU per event, so
a page left open kept a core busy and a pasted LLaMA-Factory YAML (two dozen field changes) took 15 s to settle.

The patch, given to the page in its head: ``AppTree.update_state`` skips a call that only hands over a widget's
loading status when that status is the one it handed over last (the tree already holds it); any other update goes
through as before, and a rebuilt tree forgets what was handed over. The core module's file name carries a build hash:
it is read from the installed gradio. When gradio has no such file or class, or ``STUDIO_GRADIO_PATCH=off`` (a
gradio update that the patch does not fit; ``bench/page_events.py`` measures with and without it), the page runs as
gradio made it.

The same switch keeps gradio's status trackers from animating for nothing. Each widget's ``StatusTracker`` counts the
seconds of a pending event in a ``requestAnimationFrame`` loop that goes on while its own flag says it runs, and that
flag is cleared only when the tracker's effect sees the status leave "pending". On this page loops kept going after
their event had ended: an idle page, nothing pending, ran 60-100 loop frames a second (a debugger on the loop read
the tracker's status as "complete"), each a whole frame of the page: 10-13% of a core in the browser and ~2% in its
GPU process, for as long as the page stayed open. ``QuietStatusTrackers`` (an ASGI middleware in front of gradio's
app) serves the tracker's module with one change: the loop asks for its next frame only while the status it counts
is still "pending", and otherwise clears its flag, as the effect would, so the next pending status starts it again.
The rewrite needs the installed module's two pieces (the loop, and the effect naming the status) each exactly once;
anything else serves the module as gradio made it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

PATCH_JS = """
const proto = AppTree && AppTree.prototype;
if (proto && typeof proto.update_state === 'function' && !proto.__studio_quiet) {
  const update = proto.update_state;
  const handed = new Map();  // widget id -> the loading status handed over last, as JSON
  proto.update_state = function (id, state, ...rest) {
    if (state && typeof state === 'object' && 'loading_status' in state) {
      const was = handed.get(id), now = JSON.stringify(state.loading_status);
      handed.set(id, now);
      if (now === was && Object.keys(state).length === 1) {
        AppTree.studio_skipped = (AppTree.studio_skipped || 0) + 1;  // read by tests/e2e/test_e2e_page_speed.py
        return Promise.resolve();
      }
    }
    return update.call(this, id, state, ...rest);
  };
  for (const name of ['reload', 'rerender', 'render_previously_invisible_children']) {
    const original = proto[name];
    if (typeof original === 'function') {
      proto[name] = function (...args) { handed.clear(); return original.apply(this, args); };
    }
  }
  proto.__studio_quiet = true;
}
"""


def _asset(pattern: str) -> Path | None:
    """The one file of gradio's front-end assets that matches ``pattern``, or None."""
    try:
        import gradio
    except ImportError:
        return None
    found = sorted((Path(gradio.__file__).parent / "templates" / "frontend" / "assets").glob(pattern))
    return found[0] if len(found) == 1 else None


def core_asset() -> str | None:
    """The file name of gradio's front-end core module (``core-<hash>.js``), or None when it is not one file."""
    found = _asset("core-*.js")
    return found.name if found else None


def patch_on() -> bool:
    return os.environ.get("STUDIO_GRADIO_PATCH", "on").lower() not in ("off", "0", "no", "false")


def head() -> str:
    """The page's head script that applies the patch ("" when the core module is not found)."""
    name = core_asset()
    if name is None or not patch_on():
        return ""
    return f'<script type="module">\nimport {{ AppTree }} from "./assets/{name}";\n{PATCH_JS}</script>'


# The tracker's effect: ``<effect>(()=>{<props>.status===`pending`?<start>():<untrack>(()=>{<stop>()})})``.
_EFFECT = re.compile(r"\w+\(\(\)=>\{(\w+)\.status===`pending`\?\w+\(\):\w+\(\(\)=>\{\w+\(\)\}\)\}\)")
# Its loop: ``function <loop>(){<raf>(()=>{<set elapsed>,<running>&&<loop>()})}``.
_LOOP = re.compile(r"function (\w+)\(\)\{\w+\(\(\)=>\{[^{}]{0,160}?,(\w+)&&\1\(\)\}\)\}")


def quiet_statustracker(text: str) -> str | None:
    """gradio's StatusTracker module with its elapsed-time loop ending once the status it counts is not "pending"
    (clearing its running flag, so the next pending status starts it again); None when the module does not hold the
    loop and the effect each exactly once."""
    effects, loops = _EFFECT.findall(text), list(_LOOP.finditer(text))
    if len(effects) != 1 or len(loops) != 1:
        return None
    props, loop = effects[0], loops[0]
    name, running, old = loop.group(1), loop.group(2), loop.group(0)
    again = f"{running}&&{name}()"  # the loop's last statement
    cut = old.rindex(again)
    quiet = f"{running}&&({props}.status===`pending`?{name}():({running}=!1))"
    return text[: loop.start()] + old[:cut] + quiet + old[cut + len(again) :] + text[loop.end() :]


@lru_cache(maxsize=1)
def _statustracker() -> tuple[str, bytes] | None:
    """(the tracker module's file name, its quieted text), or None when it cannot be rewritten."""
    found = _asset("statustracker-*.js")
    if found is None:
        return None
    quiet = quiet_statustracker(found.read_text(encoding="utf-8"))
    return (found.name, quiet.encode("utf-8")) if quiet is not None else None


class QuietStatusTrackers:
    """ASGI middleware: ``GET .../assets/statustracker-<hash>.js`` answers the quieted module (quiet_statustracker);
    every other request, and every request when the patch is off or does not fit, goes to gradio as it came."""

    def __init__(self, app):
        self.app = app
        self.asset = _statustracker() if patch_on() else None

    async def __call__(self, scope, receive, send):
        if (
            self.asset is None
            or scope["type"] != "http"
            or scope.get("method") not in ("GET", "HEAD")
            or not scope.get("path", "").endswith("/assets/" + self.asset[0])
        ):
            return await self.app(scope, receive, send)
        body = self.asset[1]
        headers = [
            (b"content-type", b"text/javascript; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-cache"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
