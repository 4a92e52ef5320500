"""`studio serve` (issue 24, item 6): an OpenAI-compatible server for a LoRA run (the adapter on its base, unmerged)
as a registry run, talked to with the `openai` client package on 127.0.0.1: models, chat and text completions,
streamed and not, two concurrent clients, bad requests answered with 4xx JSON errors while the server lives on, and a
stop that frees the port. The answers are checked against greedy text computed in the test with peft + generate.

Issue 47 (items 5, 9): a server with a key (``--api-key-env``) through the registry, its value in no file, and the
Chat tab's client sending it; a stop while the model loads and one while a request is generating both end the run
'stopped' (an exit 0 was recorded 'completed' before). The request limits are tests/reliability/test_serving.py's.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from engine.export import serve_jobs as sj
from engine.export.checks import ExportError
from engine.runs import registry as runs
from engine.runs.scheduler import SERVE_TAG
from tests.engine import test_merge as tm
from tests.helpers import wait_for

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
        assert runs.get(job.run_id).status == "running" and SERVE_TAG in runs.get(job.run_id).tags
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
        # stream_options.include_usage: a last chunk with the usage and no choices, as OpenAI sends it
        counted = list(
            client.chat.completions.create(
                model="chatty",
                messages=CHAT,
                max_tokens=10,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        last, use = counted[-1], counted[-1].usage
        assert last.choices == [] and use.total_tokens == use.prompt_tokens + use.completion_tokens
        assert last.usage.completion_tokens == r.usage.completion_tokens and last.usage.prompt_tokens > 0
        assert all(c.usage is None for c in counted[:-1])
        wrong = urllib.request.Request(status["url"] + "/chat/completions", method="GET")
        with pytest.raises(urllib.error.HTTPError) as got:
            urllib.request.urlopen(wrong, timeout=60)
        said = json.loads(got.value.read())["error"]
        assert got.value.code == 405 and said["message"] == "GET is not allowed on /v1/chat/completions", said

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
    assert stopped["state"] == "stopped" and runs.get(job.run_id).status == "stopped"  # never 'completed'
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
    vlm = tmp_path / "llava"
    vlm.mkdir()
    (vlm / "config.json").write_text(json.dumps({"model_type": "llava", "vision_config": {"model_type": "clip"}}))
    with pytest.raises(ExportError, match=r"is a vision-language model \(llava\): the server answers text models"):
        sj.start_serve(str(vlm), 0)  # it crashed loading with ~200 class names (issue 45 item 4)
    assert runs.list_runs() == []


KEY_ENV = "STUDIO_TEST_SERVE_KEY"


def call(url: str, body: dict | None = None, key: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_keyed_server_through_the_registry_and_the_chat_tab(demo_paths, run_registry, monkeypatch):
    from studio.tabs import chat_remote

    key = "sk-studio-test-0d9f27c1"
    monkeypatch.setenv(KEY_ENV, key)
    job = sj.start_serve(demo_paths["model_dir"], 0, api_key_env=KEY_ENV)
    try:
        status = job.wait_ready()
        assert status["state"] == "serving" and status["key_env"] == KEY_ENV, status
        ask = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}
        url = status["url"]
        no_key, wrong, right = (call(url + "/chat/completions", ask, k) for k in (None, "sk-wrong", key))
        assert no_key[0] == 401 and wrong[0] == 401 and wrong[1]["error"]["code"] == "invalid_api_key"
        assert right[0] == 200 and right[1]["usage"]["completion_tokens"] <= 4
        assert call(url + "/models")[0] == 401 and call(url + "/models", key=key)[0] == 200
        assert f'-H "Authorization: Bearer ${KEY_ENV}"' in sj.curl_example(url, status["model"], KEY_ENV)

        pane = chat_remote.Remote(chat_remote.PREFIX + job.run_id)  # the page's client: the same variable
        assert pane.wait_ready() == ""
        said = list(pane.generate([{"role": "user", "content": "hi"}], {"max_new_tokens": 4, "temperature": 0}))
        assert said[-1] == right[1]["choices"][0]["message"]["content"]
        monkeypatch.delenv(KEY_ENV)
        assert KEY_ENV in chat_remote.Remote(chat_remote.PREFIX + job.run_id).wait_ready()

        # a request generating when the stop comes: it ends, and so does the run, 'stopped'
        host, port = url.split("//")[1].split("/")[0].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        long = {"prompt": "Once upon a time", "max_tokens": 1500, "temperature": 0, "stream": True}
        conn.request("POST", "/v1/completions", json.dumps(long), {"Authorization": f"Bearer {key}"})
        stream = conn.getresponse()
        assert stream.status == 200 and stream.readline().startswith(b"data: ")  # generating now
    finally:
        job.stop(grace=30)
    assert b"[DONE]" not in stream.read()  # the stream ended early, with the server
    conn.close()
    log = runs.get(job.run_id).log_path.read_text()
    assert re.search(r"generation stopped after \d+ of 1500 tokens: the server is stopping", log), log[-2000:]
    rec = runs.get(job.run_id)
    assert rec.status == "stopped", (rec.status, rec.reason)
    rdir = Path(rec.run_dir)
    assert json.loads((rdir / "pass_env.json").read_text()) == [KEY_ENV]
    written = [f for f in [*rdir.rglob("*"), *run_registry.glob("registry.db*")] if f.is_file()]
    assert written and not [f for f in written if key.encode() in f.read_bytes()]


def test_a_server_stopped_while_loading_ends_stopped(demo_paths, run_registry):
    job = sj.start_serve(demo_paths["model_dir"], 0)
    wait_for(lambda: runs.get(job.run_id).status == "running" and runs.get(job.run_id).pid)
    job.stop(grace=30)  # its model still loading (torch alone takes longer than this)
    assert runs.get(job.run_id).status == "stopped"


def test_serve_command_refusals_are_one_line(demo_paths, run_registry, monkeypatch, capsys):
    """`studio serve` refuses a bad port, a public host without a key and an unset key variable in one line each,
    before anything is queued (a port of 99999 raised OverflowError from the socket before)."""
    model = demo_paths["model_dir"]
    monkeypatch.delenv(KEY_ENV, raising=False)
    cases = {
        ("--port", "99999"): "--port 99999: choose a port from 0 to 65535",
        ("--port", "-1"): "--port -1: choose a port from 0 to 65535",
        ("--host", "0.0.0.0"): "refusing to serve on 0.0.0.0 without a key",
        ("--host", "0.0.0.0", "--api-key-env", KEY_ENV): f"the environment variable {KEY_ENV} is not set",
        ("--api-key-env", "not a name"): "--api-key-env 'not a name': give the name of an environment variable",
    }
    for extra, said in cases.items():
        assert sj.cli([model, *extra]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, (extra, err)
    monkeypatch.setenv(KEY_ENV, "sk-x")
    assert sj.cli([model, "--host", "192.0.2.1", "--api-key-env", KEY_ENV]) == 2  # an address this machine lacks
    assert "--host 192.0.2.1: cannot listen there" in capsys.readouterr().err
    monkeypatch.setenv("STUDIO_SERVE_MAX_BODY_MB", "lots")
    assert sj.cli([model, "--port", "0"]) == 2
    assert "STUDIO_SERVE_MAX_BODY_MB='lots': give a positive number" in capsys.readouterr().err
    assert runs.list_runs() == []
