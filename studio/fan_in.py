"""Many handlers of one event answered in one request.

Gradio's page runs the listeners of one event one after another, each a round trip to the server and a redraw of
what it answered before the next one starts. A language switch had eighteen (every tab relabels its tables, charts
and choices): 20 s on an idle machine before the page read in the new language, a minute on a busy one; the page's
load had a dozen more in a chain. ``combine`` folds such handlers into one: every handler runs on the values the
event saw, and the answers are merged per component (updates of the same component from two handlers are joined,
the later handler's keys winning), so the page redraws once.

A handler that needs what another one answered first (a plot's colours sent once it holds its curves) stays a
separate ``.then`` after the combined one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Handler = tuple[Callable[..., Any], Sequence[Any] | None, Sequence[Any]]


def _is_update(value: Any) -> bool:
    return isinstance(value, dict) and value.get("__type__") == "update"


def _merge(before: Any, after: Any) -> Any:
    """One component's answer from two handlers: updates joined (the later's keys win); a plain value is an update
    of its value."""
    if before is _UNSET:
        return after
    if _is_update(before) and _is_update(after):
        return {**before, **after}
    if _is_update(before):
        return {**before, "value": after}
    if _is_update(after):
        return after if "value" in after else {"__type__": "update", "value": before, **after}
    return after


_UNSET = object()


def combine(handlers: Sequence[Handler]) -> tuple[Callable[..., Any], list[Any], list[Any]]:
    """(fn, inputs, outputs) of one listener that runs ``handlers`` — each ``(fn, inputs, outputs)`` as given to
    gradio, returning one value for one output or a sequence for several — in their order. The listener answers
    likewise: a list for several outputs, the value itself for one.

    A handler that raises is logged and leaves its components as they are: the others still answer."""
    # each component once, in the order first seen (keyed by identity: components are not hashable by value)
    unique_in = {id(c): c for _, ins, _ in handlers for c in ins or []}
    unique_out = {id(c): c for _, _, outs in handlers for c in outs}
    inputs, outputs = list(unique_in.values()), list(unique_out.values())
    in_pos = {key: i for i, key in enumerate(unique_in)}
    out_pos = {key: i for i, key in enumerate(unique_out)}

    def run(*values: Any) -> list[Any]:
        answer: list[Any] = [_UNSET] * len(outputs)
        for fn, ins, outs in handlers:
            try:
                got = fn(*(values[in_pos[id(c)]] for c in ins or []))
            except Exception:  # noqa: BLE001 - one tab's failure must not leave the whole page unanswered
                log.exception("handler %s failed", getattr(fn, "__qualname__", fn))
                continue
            got = [got] if len(outs) == 1 else list(got)
            if len(got) != len(outs):
                log.error("handler %s answered %d values for %d outputs", fn, len(got), len(outs))
                continue
            for comp, value in zip(outs, got):
                pos = out_pos[id(comp)]
                answer[pos] = _merge(answer[pos], value)
        out = [{"__type__": "update"} if a is _UNSET else a for a in answer]
        # one output: its value itself. gradio takes a list for one output as that output's value, and a plot then
        # failed to draw it ("'list' object has no attribute 'to_json'": the Runs overlay's colours after a switch)
        return out[0] if len(outputs) == 1 else out

    return run, inputs, outputs
