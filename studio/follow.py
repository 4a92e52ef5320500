"""The timers that follow a job (a merge, an export, a push, a server, an evaluation, a download) tick only while
there is one to follow: every tick is an event the browser handles across the whole page, and four timers ticking
each second with nothing to follow kept a page open in a browser busy for nothing. The handler that starts a job turns
its timer on, and the tick that sees the job end turns it off. ``retime``: a timer that slows down with nothing to
follow (the dashboard, the downloads list) instead.

Light: gradio.
"""

from __future__ import annotations

from typing import Any


def timer(active: Any) -> Any:
    """The update that turns a follow timer on (``active`` truthy: a job id) or off."""
    import gradio as gr

    return gr.update(active=bool(active))  # as gr.Timer(active=...) would: the constructor arguments given


def with_timer(out: tuple | list) -> tuple:
    """``out`` (a handler's outputs, the first the followed job's id, None once it ended) and the timer's update."""
    return (*out, timer(out[0]))


def started(out: tuple | list) -> tuple:
    """As ``with_timer`` where one timer follows several jobs: a start turns it on, a failed start leaves it as it
    is (following the others)."""
    import gradio as gr

    return (*out, timer(True) if out[0] else gr.skip())


def from_tick(out: tuple | list) -> tuple:
    """As ``with_timer``, for the timer's own tick: it only ever turns the timer off (a tick that still follows
    leaves the timer alone rather than set it again each second)."""
    import gradio as gr

    return (*out, gr.skip() if out[0] else timer(False))


def retime(state: dict, want: float) -> Any:
    """The update that sets a timer's interval to ``want`` seconds, or ``gr.skip()`` when ``state`` (a session's
    dict, which keeps the interval last set under "interval") says it is set already."""
    import gradio as gr

    update = gr.skip() if state.get("interval") == want else gr.update(value=want)
    state["interval"] = want
    return update
