"""Security: what the page may use that the shell may (issue 47 items 1 and 2, engine.core.page_trust).

Reward code from the page comes only from the workspace's reward folder (an upload the operator allows with
STUDIO_PAGE_CODE=on, or a file the operator put there); the CLI may name any file. Every user reward function runs
in its confined worker (engine.trainer.reward_confine): no secrets in its environment, a CPU-time limit that stops it
naming the function, no network where a network namespace can be had. The page may send only the secrets the
operator bound for it, each only to its hosts, and reaches no loopback / private address the operator did not allow;
the CLI keeps its freedom. Real parts: the registry's submit, the spec's rules, gradio's own upload cache, the
confined worker process, Python's SMTP server and tests/judge_standin.py on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.core import acting, page_trust, workspace
from engine.runs import registry as runs
from engine.spec.schema import SpecError, validate_spec
from tests.helpers import demo_spec

REWARD = """import os, socket


def secrets(prompts, completions, **kwargs):
    seen = [k for k in os.environ if any(w in k for w in ("TOKEN", "KEY", "SECRET", "PASS", "AUTH"))]
    if seen:
        raise RuntimeError("saw " + ",".join(sorted(seen)))
    return [1.0] * len(completions)


def burns(prompts, completions, **kwargs):
    n = 0
    while True:
        n += 1


def dials(prompts, completions, port=None, **kwargs):
    socket.create_connection(("127.0.0.1", port[0]), timeout=5).close()
    return [1.0] * len(completions)
"""


def grpo_data(demo_paths, file: str, function: str = "secrets") -> dict:
    spec = demo_spec(
        demo_paths,
        method={"stage": "grpo", "grpo": {"num_generations": 4, "rewards": [{"kind": "python", "file": file,
                                                                             "function": function}]}},
        data={"datasets": ["grpo_arith"], "max_samples": None},
        train={"per_device_batch_size": 4, "gradient_accumulation": 1},
    )  # fmt: skip
    return spec.model_dump(mode="json")


def refused(data) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        runs.submit(data, start=False)
    return {field: str(msg) for field, msg in err.value.problems}


# ----------------------------------------------------------------------------------------------- item 1: reward code
def test_page_reward_file_outside_the_reward_folder_is_refused(demo_paths, tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(REWARD, encoding="utf-8")
    got = refused(grpo_data(demo_paths, str(mine)))
    text = got["method.grpo.rewards.0.file"]
    assert "outside the workspace's reward folder" in text and str(workspace.rewards_dir()) in text
    assert "\n" not in text and "STUDIO_PAGE_CODE=on" in text
    with acting.shell():  # the CLI, for the person at the shell, may name it; its run is granted the file
        rid = runs.submit(grpo_data(demo_paths, str(mine)), start=False)
    grant = json.loads((Path(runs.get(rid).run_dir) / acting.GRANT).read_text(encoding="utf-8"))
    assert grant["reward_files"] == [str(mine.resolve())]
    runs.delete(rid)


def test_page_reward_through_a_link_out_of_the_folder_is_refused(demo_paths, tmp_path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text(REWARD, encoding="utf-8")
    link = workspace.rewards_dir() / "link_out.py"
    link.unlink(missing_ok=True)
    link.symlink_to(outside)
    try:
        assert "method.grpo.rewards.0.file" in refused(grpo_data(demo_paths, "rewards/link_out.py"))
    finally:
        link.unlink()


def test_page_reward_at_gradios_upload_path_is_refused(demo_paths, tmp_path):
    """The path gradio's /gradio_api/upload answers with (its own upload cache), named as a reward file."""
    from gradio import processing_utils, utils

    src = tmp_path / "uploaded_reward.py"
    src.write_text(REWARD, encoding="utf-8")
    cached = Path(processing_utils.save_file_to_cache(str(src), utils.get_upload_folder()))
    try:
        assert cached.is_file() and not cached.resolve().is_relative_to(workspace.home())
        got = refused(grpo_data(demo_paths, str(cached)))
        assert "outside the workspace's reward folder" in got["method.grpo.rewards.0.file"]
    finally:
        shutil.rmtree(cached.parent, ignore_errors=True)


def test_page_upload_into_the_reward_folder_only_when_the_operator_allows(demo_paths, tmp_path, monkeypatch):
    from studio.tabs.train_rewards import upload_reward

    src = tmp_path / "page_upload.py"
    src.write_text(REWARD, encoding="utf-8")
    monkeypatch.delenv(page_trust.ENV_CODE, raising=False)
    said = upload_reward(str(src))
    assert said.startswith("❌") and "STUDIO_PAGE_CODE=on" in said
    assert not (workspace.rewards_dir() / "page_upload.py").exists()
    monkeypatch.setenv(page_trust.ENV_CODE, "on")
    said = upload_reward(str(src))
    assert said.startswith("✅") and "rewards/page_upload.py" in said
    spec, errors, _ = validate_spec(grpo_data(demo_paths, "rewards/page_upload.py"))  # the page's own check
    assert spec is not None and not errors, errors
    rid = runs.submit(grpo_data(demo_paths, "rewards/page_upload.py"), start=False)  # and the registry's
    assert runs.get(rid).load_spec().method.grpo.rewards[0].file == str(workspace.rewards_dir() / "page_upload.py")
    runs.delete(rid)
    assert upload_reward(str(src), "zh").startswith("✅")
    assert "not a reward file name" in str(
        pytest.raises(page_trust.PageTrustError, page_trust.save_reward, src, "x.sh")
    )


def confined(tmp_path, function: str, timeout_s: float = 5.0):
    from engine.trainer.rewards import ConfinedReward

    path = tmp_path / "confined.py"
    path.write_text(REWARD, encoding="utf-8")
    return ConfinedReward(function, path, function, timeout_s)


def test_reward_code_sees_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_do_not_leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("STUDIO_AUTH", "ann:pw")
    reward = confined(tmp_path, "secrets")
    assert reward(prompts=["p", "q"], completions=["a", "b"]) == [1.0, 1.0]
    reward.close()


def test_reward_code_that_burns_cpu_is_stopped_by_its_limit_and_named(tmp_path):
    from engine.trainer.rewards import RewardError

    reward = confined(tmp_path, "burns", timeout_s=1)
    with pytest.raises(RewardError, match=r"reward 'burns' used more than its CPU-time limit \(1 s\)"):
        reward(prompts=["p"], completions=["a"])
    reward.close()


def test_reward_code_has_no_network_where_a_namespace_can_be_had(tmp_path):
    import socket

    from engine.trainer.reward_confine import network_prefix
    from engine.trainer.rewards import RewardError

    prefix, note = network_prefix()
    if not prefix:
        pytest.skip(note)
    server = socket.create_server(("127.0.0.1", 0))  # a listener the worker would reach with the machine's network
    try:
        reward = confined(tmp_path, "dials")
        with pytest.raises(RewardError, match=r"reward 'dials' raised OSError: .*unreachable|refused"):
            reward(prompts=["p"], completions=["a"], port=[server.getsockname()[1]])
        reward.close()
    finally:
        server.close()


def test_the_dry_run_of_the_cli_runs_a_file_anywhere_the_pages_does_not(demo_paths, tmp_path):
    from engine.jobs.rewards_try import try_rewards

    mine = tmp_path / "anywhere.py"
    mine.write_text(REWARD, encoding="utf-8")
    spec_file = tmp_path / "spec.yaml"
    import yaml

    spec_file.write_text(yaml.safe_dump(grpo_data(demo_paths, str(mine))), encoding="utf-8")
    page = try_rewards(spec_file, rows=2)
    assert "rows" not in page and "method.grpo.rewards.0.file" in page["error"]
    with acting.shell():
        shell = try_rewards(spec_file, rows=2)
    assert shell["rewards"][0]["scores"] == [1.0, 1.0], shell


# --------------------------------------------------------------------------------------------- item 2: secrets
def notify_data(demo_paths, **notify) -> dict:
    data = demo_spec(demo_paths).model_dump(mode="json")
    data["notify"] = {"email_to": ["ops@example.org"], "smtp_security": "none", **notify}
    return data


def test_page_smtp_password_from_an_unbound_variable_is_refused(demo_paths, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_do_not_leak")
    monkeypatch.delenv(page_trust.ENV_SECRETS, raising=False)
    data = notify_data(
        demo_paths, smtp_host="smtp.example.com", smtp_user="me", smtp_password_env="HF_TOKEN"
    )  # fmt: skip
    text = refused(data)["notify.smtp_password_env"]
    assert "may not use the environment variable HF_TOKEN" in text and "STUDIO_PAGE_SECRETS" in text
    with acting.shell():  # the CLI keeps its freedom
        runs.delete(runs.submit(data, start=False))


def test_page_bound_secret_goes_only_to_its_hosts(demo_paths, monkeypatch):
    monkeypatch.setenv("SMTP_PASS", "pw")
    monkeypatch.setenv(page_trust.ENV_SECRETS, "SMTP_PASS=smtp.example.com:587")
    elsewhere = notify_data(
        demo_paths, smtp_host="mail.attacker.example", smtp_user="me", smtp_password_env="SMTP_PASS"
    )
    text = refused(elsewhere)["notify.smtp_password_env"]
    assert "only to smtp.example.com:587, not to mail.attacker.example:587" in text
    other_port = notify_data(
        demo_paths, smtp_host="smtp.example.com", smtp_port=25, smtp_user="me", smtp_password_env="SMTP_PASS"
    )
    assert "notify.smtp_password_env" in refused(other_port)
    bound = notify_data(demo_paths, smtp_host="SMTP.example.com", smtp_user="me", smtp_password_env="SMTP_PASS")
    runs.delete(runs.submit(bound, start=False))


def test_page_smtp_server_on_a_loopback_address_needs_the_operators_leave(demo_paths, monkeypatch):
    """Python's SMTP server on 127.0.0.1: the page may not point its notifications there unless allowed."""
    from tests.engine.test_notify import SmtpServer

    smtp = SmtpServer()
    try:
        data = notify_data(demo_paths, smtp_host="127.0.0.1", smtp_port=smtp.port)
        monkeypatch.delenv(page_trust.ENV_HOSTS, raising=False)
        assert "loopback, link-local or private address (127.0.0.1)" in refused(data)["notify.smtp_host"]
        monkeypatch.setenv(page_trust.ENV_HOSTS, f"127.0.0.1:{smtp.port}")
        runs.delete(runs.submit(data, start=False))
    finally:
        smtp.close()
    assert not smtp.messages


def test_page_webhook_variable_must_be_bound_to_its_urls_host(demo_paths, monkeypatch):
    data = demo_spec(demo_paths).model_dump(mode="json")
    data["notify"] = {"webhook_env": "HOOK_UNDER_TEST"}
    monkeypatch.setenv("HOOK_UNDER_TEST", "https://hooks.slack.com/services/T/B/x")
    monkeypatch.setenv(page_trust.ENV_SECRETS, "HOOK_UNDER_TEST=hooks.example.org")
    assert "not to hooks.slack.com:443" in refused(data)["notify.webhook_env"]
    monkeypatch.setenv(page_trust.ENV_SECRETS, "HOOK_UNDER_TEST=hooks.slack.com")
    runs.delete(runs.submit(data, start=False))


def judge_problems(spec: dict) -> dict[str, str]:
    from engine.eval.messages import EvalError
    from engine.jobs import evals

    try:
        evals.resolve(spec)
    except EvalError as exc:
        return {f: str(m) for f, m in exc.problems}
    return {}


def test_page_judge_on_loopback_or_with_an_unbound_key_is_refused(demo_paths, monkeypatch):
    from tests.judge_standin import JudgeStandin

    monkeypatch.setenv("HF_TOKEN", "hf_do_not_leak")
    monkeypatch.delenv(page_trust.ENV_HOSTS, raising=False)
    monkeypatch.delenv(page_trust.ENV_SECRETS, raising=False)
    with JudgeStandin(lambda prompt: "Score: 5") as judge:
        spec = {
            "models": {"base_model": demo_paths["model_dir"]},
            "data": {
                "source": "dataset",
                "datasets": [demo_paths["datasets"][0]],
                "dataset_dir": demo_paths["data_dir"],
            },
            "measures": ["judge"],
            "judge": {"base_url": judge.url, "model": "judge-7b"},
        }
        assert "loopback, link-local or private address" in judge_problems(spec)["judge.base_url"]
        monkeypatch.setenv(page_trust.ENV_HOSTS, "127.0.0.1")
        assert "judge.base_url" not in judge_problems(spec)
        keyed = spec | {"judge": spec["judge"] | {"api_key_env": "HF_TOKEN"}}
        assert "may not use the environment variable HF_TOKEN" in judge_problems(keyed)["judge.api_key_env"]
        monkeypatch.delenv(page_trust.ENV_HOSTS)
        with acting.shell():  # the CLI may send its key to its own judge on this machine
            got = judge_problems(keyed)
        assert "judge.api_key_env" not in got and "judge.base_url" not in got
    assert not judge.requests  # nothing was sent while checking


def test_malformed_operator_settings_are_refused_at_start():
    from studio import settings

    for env, var in (
        ({page_trust.ENV_SECRETS: "SMTP_PASS"}, page_trust.ENV_SECRETS),
        ({page_trust.ENV_SECRETS: "SMTP_PASS=host:99999"}, page_trust.ENV_SECRETS),
        ({page_trust.ENV_HOSTS: "http://x/y"}, page_trust.ENV_HOSTS),
        ({page_trust.ENV_CODE: "maybe"}, page_trust.ENV_CODE),
    ):
        with pytest.raises(settings.SettingsError, match=var):
            settings.load([], env=env)
    env = {page_trust.ENV_SECRETS: "A=h1:25, A=[::1]:8000,B=judge.internal", page_trust.ENV_HOSTS: "10.0.0.5"}
    settings.load([], env=env)
    assert page_trust.page_secrets(env) == {"A": [("h1", 25), ("::1", 8000)], "B": [("judge.internal", None)]}


def test_the_trainer_runs_a_reward_file_from_outside_the_folder_only_with_the_shells_grant(demo_paths, tmp_path):
    """The trainer checks its spec again: a file outside the reward folder fails the run naming the field, unless the
    run's grant (written by submit at the shell) names it; then GRPO trains through the confined worker."""
    from engine.spec.schema import RunSpec
    from tests.engine.test_grpo_train import grpo_spec
    from tests.helpers import log_tail, run_trainer

    mine = tmp_path / "anywhere.py"
    mine.write_text(REWARD, encoding="utf-8")
    data = grpo_spec(demo_paths, 1).model_dump(mode="json")
    data["method"]["grpo"]["rewards"].append({"kind": "python", "file": str(mine), "function": "secrets"})
    spec = RunSpec.model_validate(data)
    rc, events = run_trainer(spec, tmp_path / "ungranted")
    assert rc != 0 and events[-1]["type"] == "failed"
    assert "method.grpo.rewards.2.file" in events[-1]["payload"]["error"]
    granted = tmp_path / "granted"
    granted.mkdir()
    acting.write_grant(granted, reward_files=[mine])
    rc, events = run_trainer(spec, granted)
    assert rc == 0, log_tail(granted)
    (log,) = [e for e in events if e["type"] == "log"]
    assert log["payload"]["metrics"]["rewards/secrets/mean"] == 1.0
