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
"""

from __future__ import annotations

import os
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


def core_asset() -> str | None:
    """The file name of gradio's front-end core module (``core-<hash>.js``), or None when it is not one file."""
    try:
        import gradio
    except ImportError:
        return None
    found = sorted((Path(gradio.__file__).parent / "templates" / "frontend" / "assets").glob("core-*.js"))
    return found[0].name if len(found) == 1 else None


def head() -> str:
    """The page's head script that applies the patch ("" when the core module is not found)."""
    name = core_asset()
    if name is None or os.environ.get("STUDIO_GRADIO_PATCH", "on").lower() in ("off", "0", "no", "false"):
        return ""
    return f'<script type="module">\nimport {{ AppTree }} from "./assets/{name}";\n{PATCH_JS}</script>'
