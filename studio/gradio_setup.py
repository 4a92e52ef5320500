"""Import gradio without the work it does at import time for its own developers. Light: stdlib only.

Measured with ``python -X importtime`` and cProfile on the 2-core development machine (gradio 6.31), two pieces of
``import gradio`` serve nobody running an app:

- every component class (~80 of them) runs ``gradio.component_meta.create_or_modify_pyi`` as it is created: it
  reads the class's source file, parses it with ``ast``, renders a Jinja template and rewrites the package's
  ``.pyi`` stub when it differs (a write into site-packages). About 1.3 s of the ~3 s import;
- every event listener of every component (~220) compiles a fresh Jinja template only to put the component's name
  into the listener's docstring (about 0.2 s).

``install()``, called before the first ``import gradio``, adds an import hook that patches those two modules right
after they are executed: stubs are left as installed, and listener docstrings get the name by plain substitution
(the same text Jinja renders; a docstring with any other template syntax still goes through Jinja). The hook removes
itself once all of them are loaded. A third patch lets ``launch``'s check that its own server answers wait on a busy
machine (``_patient_self_check``); a fourth keeps the idle event queue from polling a thousand times a second
(``_calm_queue``). Nothing changes when gradio is already imported or a gradio version lacks
these functions: the page is the same either way, only built sooner.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType

COMPONENT_PLACEHOLDER = "{{ component }}"


def render_listener_doc(doc: str, component: str) -> str | None:
    """What ``jinja2.Template(doc).render(component=component)`` gives, when ``doc``'s only template syntax is
    ``{{ component }}``; None for anything else (the caller falls back to Jinja)."""
    rest = doc.replace(COMPONENT_PLACEHOLDER, "")
    if any(mark in rest for mark in ("{{", "}}", "{%", "%}", "{#", "#}", "\r")):  # Jinja also normalises \r\n
        return None
    text = doc.replace(COMPONENT_PLACEHOLDER, component)
    return text[:-1] if text.endswith("\n") else text  # Jinja drops one trailing newline


def _keep_stubs(module: ModuleType) -> None:
    if callable(getattr(module, "create_or_modify_pyi", None)):
        module.create_or_modify_pyi = _no_stub_update


def _no_stub_update(component_class: type, class_name: str, events: list) -> None:
    """Stand-in for gradio's ``create_or_modify_pyi``: the installed ``.pyi`` stubs stay as they are."""


def _plain_listener_docs(module: ModuleType) -> None:
    listener_cls = getattr(module, "EventListener", None)
    original = getattr(listener_cls, "set_doc", None)
    if listener_cls is None or not callable(original):
        return

    def set_doc(self, component: str) -> None:
        doc = getattr(getattr(self, "listener", None), "__doc__", None)
        rendered = render_listener_doc(doc, component) if isinstance(doc, str) else None
        if rendered is None:
            original(self, component)
        else:
            self.listener.__doc__ = rendered

    set_doc.__doc__ = original.__doc__
    listener_cls.set_doc = set_doc


SELF_CHECK_S = 120.0  # how long ``launch`` may wait for its own server to answer
ANSWER_STATUSES = (200, 401, 301, 302, 303, 307, 308)  # what gradio's own check counts as an answer


def _patient_self_check(module: ModuleType) -> None:
    """``launch`` asks its own fresh server for the page (``networking.url_ok``: a HEAD with a 3 s timeout; a timeout
    ends the check) and refuses to start without an answer ("When localhost is not accessible, a shareable link must
    be created"). Rendering the page's config takes longer than 3 s on a loaded machine (load 12-22 on 2 cores, the
    tests' machine): the studio exited at start, and every timed-out request still cost the server its work. The
    server is ours and listening: ask with a patient timeout until ``SELF_CHECK_S`` has passed."""
    if not callable(getattr(module, "url_ok", None)):
        return

    def url_ok(url: str) -> bool:
        import time
        import warnings

        import httpx

        deadline = time.monotonic() + SELF_CHECK_S
        while True:
            left = deadline - time.monotonic()
            try:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore")
                    if httpx.head(url, timeout=max(left, 1.0), verify=False).status_code in ANSWER_STATUSES:
                        return True
            except (httpx.HTTPError, OSError):
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)

    module.url_ok = url_ok


QUEUE_POLL_S = 0.02  # how often an idle gradio queue looks for a new event (gradio: 0.001 s, and 0.01 s for progress)


def queue_poll_s() -> float:
    """``STUDIO_QUEUE_POLL_S`` (seconds, 0.001-1) or QUEUE_POLL_S; 0.001 gives gradio's own polling back."""
    import os

    try:
        return min(1.0, max(0.001, float(os.environ.get("STUDIO_QUEUE_POLL_S", QUEUE_POLL_S))))
    except ValueError:
        return QUEUE_POLL_S


def _calm_queue(module: ModuleType) -> None:
    """gradio's event queue finds new events by polling: ``start_processing`` sleeps ``sleep_when_free`` (1 ms off
    Windows) between looks while nothing is queued, ``start_progress_updates`` 10 ms. Measured on the 2-core
    development machine, an idle ``studio webui`` with no browser open spent ~10 % of a core on those wake-ups, all
    day, and so did every studio a browser test starts beside Chromium and a trainer (``bench/idle_server.py``
    measures it against gradio's own polling). Both loops sleep ``queue_poll_s()`` (20 ms) instead: a click or a
    timer tick starts at most 20 ms later, below what a person notices and far below one tick's own work."""
    queue_cls = getattr(module, "Queue", None)
    original = getattr(queue_cls, "__init__", None)
    if queue_cls is None or not callable(original):
        return

    def __init__(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        poll = queue_poll_s()
        for name in ("sleep_when_free", "progress_update_sleep_when_free"):
            if isinstance(getattr(self, name, None), (int, float)):
                setattr(self, name, poll)

    __init__.__doc__ = original.__doc__
    queue_cls.__init__ = __init__


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "gradio.component_meta": _keep_stubs,
    "gradio.events": _plain_listener_docs,
    "gradio.networking": _patient_self_check,
    "gradio.queueing": _calm_queue,
}


class _PatchAfterExec:
    """A meta-path finder: finds the modules in PATCHES as usual and patches each right after it has executed."""

    def __init__(self) -> None:
        self.pending = set(PATCHES)

    def find_spec(self, name: str, path=None, target=None):
        if name not in self.pending:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec
        finder = self

        def exec_then_patch(module: ModuleType) -> None:
            exec_module(module)
            PATCHES[name](module)
            finder.pending.discard(name)
            if not finder.pending and finder in sys.meta_path:
                sys.meta_path.remove(finder)

        loader.exec_module = exec_then_patch  # this loader instance serves this one spec
        return spec


def install() -> bool:
    """Add the hook unless gradio is imported already (then it is too late and nothing changes). True if added."""
    if "gradio" in sys.modules or any(isinstance(f, _PatchAfterExec) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _PatchAfterExec())
    return True
