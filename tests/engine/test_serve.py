"""`studio serve` (issue 24, item 6): an OpenAI-compatible server for a LoRA run (the adapter on its base, unmerged)
as a registry run, talked to with the `openai` client package on 127.0.0.1: models, chat and text completions,
streamed and not, two concurrent clients, bad requests answered with 4xx JSON errors while the server lives on, and a
stop that frees the port. The answers are checked against greedy text computed in the test with peft + generate.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from engine.export import serve_jobs as sj
from engine.export.checks import ExportError
from engine.runs import registry as runs
from tests.engine import test_merge as tm

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me about the sea."}]


@pytest.fixture(scope="module")
def adapter(demo_paths, tmp_path_factory):
    return tm.make_adapter(demo_paths["model_dir"], tmp_path_factory.mktemp("serve") / "lora", seed=11)


def expected(base: str, adapter, *, chat: bool, text: str | list, n: int) -> str:
    """Greedy continuation by transformers' generate on base + adapter (peft, unmerged)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), str(adapter))
    if chat:
        ids = tok.apply_chat_template(text, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        ids = ids["input_ids"]
    else:
        ids = tok(text, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.eval().generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=tok.eos_token_id)
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def test_openai_client_against_a_served_lora_run(demo_paths, adapter, tmp_path, run_registry):
    import openai

    base = demo_paths["model_dir"]
    run = tm.make_run(tmp_path / "runs", "chatty", base, adapter_from=adapter)
    job = sj.start_serve(str(run), 0)
    try:
        status = job.wait_ready()
        assert status["state"] == "serving", status
        assert runs.get(job.run_id).status == "running" and sj.SERVE_TAG in runs.get(job.run_id).tags
        client = openai.OpenAI(base_url=status["url"], api_key="unused", max_retries=0, timeout=300)
        assert [m.id for m in client.models.list().data] == ["chatty"]

        want_chat = expected(base, adapter, chat=True, text=CHAT, n=10)
        r = client.chat.completions.create(model="chatty", messages=CHAT, max_tokens=10, temperature=0)
        assert r.choices[0].message.content == want_chat and r.choices[0].message.role == "assistant"
        assert r.usage.completion_tokens <= 10 and r.choices[0].finish_reason in ("length", "stop")
        stream = client.chat.completions.create(
            model="chatty", messages=CHAT, max_tokens=10, temperature=0, stream=True
        )
        chunks = [c.choices[0].delta.content or "" for c in stream]
        assert "".join(chunks) == want_chat and len([c for c in chunks if c]) > 1

        want_text = expected(base, adapter, chat=False, text="Once upon a time", n=8)
        r = client.completions.create(model="chatty", prompt="Once upon a time", max_tokens=8, temperature=0)
        assert r.choices[0].text == want_text
        pieces = client.completions.create(
            model="chatty", prompt="Once upon a time", max_tokens=8, temperature=0, stream=True
        )
        assert "".join(p.choices[0].text for p in pieces) == want_text

        answers: dict[int, str] = {}

        def ask(i: int) -> None:
            c = openai.OpenAI(base_url=status["url"], api_key="unused", max_retries=0, timeout=300)
            s = c.chat.completions.create(model="chatty", messages=CHAT, max_tokens=10, temperature=0, stream=True)
            answers[i] = "".join(ch.choices[0].delta.content or "" for ch in s)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert answers == {0: want_chat, 1: want_chat}

        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="chatty", messages=[], max_tokens=4)
        assert err.value.status_code == 400 and err.value.body["param"] == "messages"
        with pytest.raises(openai.BadRequestError, match="temperature"):
            client.chat.completions.create(model="chatty", messages=CHAT, temperature=7)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="other", messages=CHAT)
        bad = urllib.request.Request(
            status["url"] + "/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as raw:
            urllib.request.urlopen(bad, timeout=60)
        assert raw.value.code == 400 and "not valid JSON" in json.loads(raw.value.read())["error"]["message"]
        r = client.chat.completions.create(model="chatty", messages=CHAT, max_tokens=3, temperature=0)
        assert r.choices[0].message.content == want_chat[: len(r.choices[0].message.content)]  # still serving
    finally:
        stopped = job.stop(grace=5)
    assert stopped["state"] == "stopped"
    assert sj.port_free(int(status["url"].rsplit(":", 1)[1].split("/")[0]))


def test_serve_refusals(tmp_path, run_registry):
    with pytest.raises(ExportError, match="no such file or folder"):
        sj.start_serve(str(tmp_path / "nothing"), 0)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "config.json").write_text("{}")
        with pytest.raises(ExportError, match=f"port {port} on 127.0.0.1 is in use"):
            sj.start_serve(str(tmp_path / "m"), port)
    assert runs.list_runs() == []
