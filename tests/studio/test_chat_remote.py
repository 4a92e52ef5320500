"""The Chat tab's served pane (studio.tabs.chat_remote) without a server: what it says when the picked server is not
one of this studio's, and the chat-completions body it sends for the tab's settings (the browser test
tests/e2e/test_e2e_chat.py::test_chat_with_a_served_run talks to a real server)."""

from __future__ import annotations

from studio.tabs import chat, chat_remote, chat_sources


def test_an_unknown_server_is_named_and_nothing_is_offered(run_registry):
    assert not [v for _, v in chat_sources.tuned_choices() if v.startswith("serve:")]
    pane = chat_remote.Remote("serve:20990101-000000-abcdef")
    assert not pane.alive()
    said = pane.wait_ready(lang="en")
    assert said == "server 20990101-000000-abcdef is not answering (not a server of this studio)"
    assert "没有响应" in pane.wait_ready(lang="zh")
    assert chat_sources.template_for("serve:20990101-000000-abcdef") == "auto"
    assert chat_sources.base_for("serve:20990101-000000-abcdef") is None
    assert chat.load("", "serve:20990101-000000-abcdef").startswith("❌")  # no base model: nothing starts


def test_request_body_carries_the_tabs_settings():
    pane = chat_remote.Remote("serve:r1")
    pane.model = "demo"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    turns += [{"role": "user", "content": "?"}]
    body = pane.request(turns, {"system": "be brief", "max_new_tokens": 9, "temperature": 0, "top_p": 0.5, "stop": []})
    assert body == {
        "model": "demo",
        "messages": [{"role": "system", "content": "be brief"}, *turns],
        "max_tokens": 9,
        "temperature": 0.0,
        "top_p": 0.5,
        "stream": True,
    }
    body = pane.request(turns[:1], {"system": "", "max_new_tokens": 4, "stop": ["\n"]})
    assert body["messages"] == turns[:1] and body["stop"] == ["\n"]
