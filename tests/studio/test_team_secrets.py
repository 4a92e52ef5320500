"""Team mode's secrets per account (issue 46 item 4): stored for the account only (mode 600, outside the registry and
every run folder), set and listed on the page by name (a value never comes back), given to the account's own runs
and jobs only; a member's run gets none of the operator's secrets the operator did not bind for the page, and never
another account's, not even when the other account's wrapper starts it from the queue. Real parts: the registry,
the scheduler and the detached wrappers of command runs, the Runs tab's handlers as the page calls them."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path

import pytest

from engine.core import accounts, member_secrets, page_trust
from engine.runs import registry as runs
from engine.runs import store
from tests import helpers

ANN_TOKEN, OPERATOR_TOKEN, OPERATOR_WANDB = "hf_ann_own_token_123", "hf_operator_token_456", "wandb_operator_789"
SEEN = ("HF_TOKEN", "WANDB_API_KEY", "ANN_HOOK", "HF_HUB_DISABLE_IMPLICIT_TOKEN")


@pytest.fixture()
def team(run_registry, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", OPERATOR_TOKEN)
    monkeypatch.setenv("WANDB_API_KEY", OPERATOR_WANDB)
    monkeypatch.delenv(page_trust.ENV_SECRETS, raising=False)
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", raising=False)
    accounts.add("ann", "correct horse")
    accounts.add("bob", "battery staple")
    accounts.add("root", "root's password", admin=True)
    who = {"name": "ann"}
    accounts.set_viewer_source(lambda: who["name"])
    yield who
    accounts.set_viewer_source(None)


def _digest(value: str | None) -> str | None:
    return hashlib.sha256(value.encode()).hexdigest()[:16] if value else None


def _env_probe(flag: Path | None = None) -> list[str]:
    """A command run that (after ``flag`` exists, when given) prints digests of the secrets it sees: the log never
    holds a value."""
    wait = f"while not os.path.exists({str(flag)!r}): time.sleep(0.05)\n" if flag else ""
    code = (
        f"import hashlib, json, os, time\n{wait}"
        "d = lambda v: hashlib.sha256(v.encode()).hexdigest()[:16] if v else None\n"
        f"print('SEEN ' + json.dumps({{k: d(os.environ.get(k)) for k in {SEEN!r}}}))"
    )
    return [sys.executable, "-c", code]


def _seen(run_id: str) -> dict:
    rec = helpers.wait_for(lambda: (r := store.get(run_id)).status in ("completed", "failed") and r, timeout=120)
    log = Path(rec.log_path).read_text(encoding="utf-8")
    assert rec.status == "completed", log[-2000:]
    return json.loads(next(line for line in log.splitlines() if line.startswith("SEEN "))[5:])


def test_secrets_are_the_accounts_own_and_the_page_shows_their_names_only(team):
    from studio.tabs import runs_secrets

    table, said, box = runs_secrets.save("HF_TOKEN", ANN_TOKEN)
    assert table["data"] == [["HF_TOKEN"]] and said.startswith("✅") and "HF_TOKEN" in said and box == ""
    assert ANN_TOKEN not in json.dumps([table, said]) and ANN_TOKEN not in json.dumps(runs_secrets.listed())
    file = Path(store.workspace.home()) / member_secrets.FOLDER / "ann.json"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600 and stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    team["name"] = "bob"  # another member sees none of ann's
    assert runs_secrets.listed()[0]["data"] == [] and member_secrets.names() == []
    _, said, _ = runs_secrets.save("not a name", "x")
    assert said.startswith("❌") and "'not a name' is not a variable name" in said and "\n" not in said
    _, said, _ = runs_secrets.save("HF_TOKEN", "")
    assert said.startswith("❌") and "HF_TOKEN" in said
    assert "no secret named HF_TOKEN" in runs_secrets.forget("HF_TOKEN")[1]
    team["name"] = None  # the operator: the studio's environment, nothing stored here
    assert "studio's environment" in runs_secrets.listed()[1]
    assert runs_secrets.save("HF_TOKEN", "x")[1].startswith("❌")
    team["name"] = "ann"
    table, said = runs_secrets.forget("HF_TOKEN")
    assert table["data"] == [] and said.startswith("✅")


def test_each_accounts_runs_get_their_own_secrets_and_a_member_none_of_the_operators(team, monkeypatch):
    member_secrets.put("HF_TOKEN", ANN_TOKEN)
    member_secrets.put("ANN_HOOK", "https://hooks.example.com/ann")
    ann = runs.submit_command(_env_probe(), name="ann-probe")
    assert _seen(ann) == {
        "HF_TOKEN": _digest(ANN_TOKEN),
        "WANDB_API_KEY": None,  # the operator's key, not bound for the page
        "ANN_HOOK": _digest("https://hooks.example.com/ann"),
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": None,
    }
    team["name"] = "bob"  # no secrets of his own: nothing, and not the operator's saved hub login either
    bob = runs.submit_command(_env_probe(), name="bob-probe")
    assert _seen(bob) == {
        "HF_TOKEN": None,
        "WANDB_API_KEY": None,
        "ANN_HOOK": None,
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": _digest("1"),
    }
    monkeypatch.setenv(page_trust.ENV_SECRETS, "WANDB_API_KEY=api.wandb.ai")  # the operator shares W&B's key
    bob = runs.submit_command(_env_probe(), name="bob-probe-2")
    assert _seen(bob)["WANDB_API_KEY"] == _digest(OPERATOR_WANDB)
    team["name"] = "root"  # an admin: the operator's where it holds none of its own
    root = runs.submit_command(_env_probe(), name="root-probe")
    assert _seen(root)["HF_TOKEN"] == _digest(OPERATOR_TOKEN)
    team["name"] = None  # the operator's own run: the studio's environment, as before team mode
    op = runs.submit_command(_env_probe(), name="operator-probe")
    assert _seen(op)["HF_TOKEN"] == _digest(OPERATOR_TOKEN)
    # no value is written anywhere in the workspace but the account's own secrets file
    home = Path(store.workspace.home())
    for f in home.rglob("*"):
        if f.is_file() and member_secrets.FOLDER not in f.relative_to(home).parts:
            data = f.read_bytes()
            assert ANN_TOKEN.encode() not in data and OPERATOR_TOKEN.encode() not in data, f


def test_a_run_started_from_the_queue_by_another_accounts_wrapper_gets_its_own_owners_secrets(team, tmp_path):
    """One CPU slot: ann's run holds it; bob's waits; when ann's ends, ann's wrapper starts bob's. Bob's run sees
    none of ann's secrets (the wrapper keeps the studio's environment, not the run's)."""
    member_secrets.put("HF_TOKEN", ANN_TOKEN)
    flag = tmp_path / "ann-may-end"
    ann = runs.submit_command(_env_probe(flag), name="ann-holds-the-slot")
    helpers.wait_for(lambda: store.get(ann).status == "running", timeout=60)
    team["name"] = "bob"
    bob = runs.submit_command(_env_probe(), name="bob-waits")
    assert store.get(bob).status == "queued"
    flag.write_text("go")
    assert _seen(ann)["HF_TOKEN"] == _digest(ANN_TOKEN)
    assert _seen(bob) == {
        "HF_TOKEN": None,
        "WANDB_API_KEY": None,
        "ANN_HOOK": None,
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": _digest("1"),
    }


def test_a_members_own_webhook_needs_no_binding_but_stays_off_private_hosts(team):
    from engine.spec.watch_group import NotifySpec, notify_page_problems

    spec = NotifySpec(webhook_env="ANN_HOOK")
    member_secrets.put("ANN_HOOK", "https://93.184.216.34/hooks/ann")  # a public address: theirs to send to
    assert notify_page_problems(spec) == []
    member_secrets.put("ANN_HOOK", "http://127.0.0.1:9/hook")  # the studio's own machine: refused as for anyone
    assert "loopback, link-local or private address" in str(dict(notify_page_problems(spec))["notify.webhook_env"])
    team["name"] = "bob"  # bob holds no ANN_HOOK, and the operator bound none: he may not name it
    assert "may not use the environment variable ANN_HOOK" in str(
        dict(notify_page_problems(spec))["notify.webhook_env"]
    )


def test_a_members_chat_worker_gets_their_secrets_and_never_the_page_login(team, monkeypatch):
    """The Chat tab's worker process (started by the studio itself, not a run) follows the same rule."""
    from studio.tabs import chat_process

    seen = {}

    class Started(Exception):
        pass

    def popen(argv, env=None, **_kw):
        seen.update(env)
        raise Started

    monkeypatch.setattr(chat_process.subprocess, "Popen", popen)
    monkeypatch.setenv("STUDIO_AUTH", "someone:their-password")
    member_secrets.put("HF_TOKEN", ANN_TOKEN)
    with pytest.raises(Started):
        chat_process.Worker("models/any")
    assert seen["HF_TOKEN"] == ANN_TOKEN and "WANDB_API_KEY" not in seen and "STUDIO_AUTH" not in seen
    team["name"] = None  # the operator's worker: the studio's own secrets, still not the login
    seen.clear()
    with pytest.raises(Started):
        chat_process.Worker("models/any")
    assert seen["HF_TOKEN"] == OPERATOR_TOKEN and "STUDIO_AUTH" not in seen
