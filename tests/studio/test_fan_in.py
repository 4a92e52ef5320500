"""studio/fan_in: many handlers of one event answered in one request, and the page's language switch and load built
that way (gradio's page runs one event's listeners one after another: eighteen round trips for a switch)."""

from __future__ import annotations

import gradio as gr

from studio import fan_in


def test_handlers_share_inputs_and_updates_of_one_component_are_joined():
    with gr.Blocks():
        a, b, lang = gr.Textbox(), gr.Textbox(), gr.Dropdown(choices=["en", "zh"])
        out1, out2, state = gr.Markdown(), gr.Dropdown(), gr.State()
    calls = []

    def first(x, code):
        calls.append(("first", x, code))
        return gr.update(label=f"L-{code}"), gr.update(choices=["x"])

    def second(y):
        calls.append(("second", y))
        return gr.update(info="i", label="later wins")

    def third(code):
        return {"plain": code}

    fn, inputs, outputs = fan_in.combine(
        [(first, [a, lang], [out1, out2]), (second, [b], [out1]), (third, [lang], [state])]
    )
    assert inputs == [a, lang, b] and outputs == [out1, out2, state]  # each component once
    got = fn("A", "zh", "B")
    assert calls == [("first", "A", "zh"), ("second", "B")]
    assert got[0] == {"__type__": "update", "label": "later wins", "info": "i"}
    assert got[1] == {"__type__": "update", "choices": ["x"]}
    assert got[2] == {"plain": "zh"}  # a State's value goes through as it is


def test_a_failing_handler_leaves_its_outputs_and_the_others_answer(caplog):
    with gr.Blocks():
        lang, x, y = gr.Dropdown(choices=["en"]), gr.Markdown(), gr.Markdown()

    def broken(code):
        raise RuntimeError("boom")

    fn, _, _ = fan_in.combine([(broken, [lang], [x]), (lambda code: f"# {code}", [lang], [y])])
    assert fn("en") == [{"__type__": "update"}, "# en"]
    assert "boom" in caplog.text


def test_a_plain_value_and_an_update_of_the_same_component_merge():
    with gr.Blocks():
        lang, x = gr.Dropdown(choices=["en"]), gr.Markdown()
    fn, _, _ = fan_in.combine([(lambda c: "text", [lang], [x]), (lambda c: gr.update(visible=True), [lang], [x])])
    assert fn("en") == {"__type__": "update", "value": "text", "visible": True}  # one output: the value itself


def test_one_plot_output_is_answered_with_a_value_gradio_can_draw():
    """The Runs overlay's colours after a language switch: one plot, one update. Answered as a one-item list, gradio
    handed the list to the plot, which failed ("'list' object has no attribute 'to_json'") and kept its old colours."""
    with gr.Blocks():
        lang, plot = gr.Dropdown(choices=["en"]), gr.LinePlot()
    fn, _, outputs = fan_in.combine([(lambda c: gr.update(color_map={"a": "#ff0000"}), [lang], [plot])])
    answer = fn("en")
    assert answer == {"__type__": "update", "color_map": {"a": "#ff0000"}}
    assert outputs == [plot]


REDRAWN = {"lf-upload", "lf-acc-upload", "ds-upload", "chat-image"}


def test_the_language_switch_and_the_load_are_one_request_each(tmp_path, monkeypatch):
    """Every handler that follows the language (relabels, tables, charts, choices) is in the one listener of the
    language picker's change; the page's load answers its lists in one listener too."""
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    from studio.app import build_app

    app = build_app()
    picker = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "lang-picker")
    on_change = [f for f in app.fns.values() if (picker._id, "change") in [(t[0], t[1]) for t in f.targets]]
    backend = [f for f in on_change if f.fn is not None]
    # and one more: the upload areas drawn again (hidden here, shown after), once gradio's own words in the new
    # language have loaded (its js waits for them; the relabelling need not)
    redraw = [f for f in backend if {getattr(o, "elem_id", None) for o in f.outputs} <= REDRAWN]
    assert len(redraw) == 1 and "changeLocale(locale)" in f"{redraw[0].js}", [f.name for f in backend]
    backend = [f for f in backend if f not in redraw]
    assert len(backend) == 1, [f.name for f in backend]
    assert len(backend[0].outputs) > 300  # every tab's words, the form's checks, the plan, tables and charts
    assert not backend[0].queue
    loads = [f for f in app.fns.values() if any(t[1] == "load" for t in f.targets)]
    assert len(loads) == 1
    after_load = [f for f in app.fns.values() if f.fn is not None and f.trigger_after == loads[0]._id]
    assert len(after_load) == 1, [f.name for f in after_load]
