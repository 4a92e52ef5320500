"""Serving safety: loopback by default, any other host needs a login, the UI process stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from studio import settings

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_bind_loopback():
    conf = settings.load([], env={})
    assert (conf.host, conf.port, conf.auth) == ("127.0.0.1", 7860, None)


def test_non_loopback_without_auth_is_refused_with_the_fix():
    with pytest.raises(settings.SettingsError, match="--auth USER:PASS.*STUDIO_AUTH"):
        settings.load(["--host", "0.0.0.0"], env={})


def test_non_loopback_with_auth_from_env_or_flag():
    assert settings.load(["--host", "0.0.0.0"], env={"STUDIO_AUTH": "ann:secret"}).auth == ("ann", "secret")
    assert settings.load(["--host", "0.0.0.0", "--auth", "bob:pw"], env={}).auth == ("bob", "pw")


@pytest.mark.parametrize("bad", ["nocolon", ":pw", "user:"])
def test_malformed_auth_is_refused(bad):
    with pytest.raises(settings.SettingsError, match="USER:PASS"):
        settings.load(["--auth", bad], env={})


def test_env_host_and_port():
    conf = settings.load([], env={"STUDIO_HOST": "localhost", "STUDIO_PORT": "9000"})
    assert (conf.host, conf.port) == ("localhost", 9000)
    with pytest.raises(settings.SettingsError, match="STUDIO_PORT"):
        settings.load([], env={"STUDIO_PORT": "http"})


def test_cli_refuses_public_host_without_auth(capsys, monkeypatch):
    from studio import app

    monkeypatch.delenv("STUDIO_AUTH", raising=False)
    assert app.cli(["--host", "0.0.0.0", "--no-demo"]) == 2
    assert "STUDIO_AUTH" in capsys.readouterr().err


def test_importing_the_app_loads_no_heavy_library():
    code = (
        "import sys, studio.app, studio.tabs.train, studio.tabs.dashboard, studio.tabs.runs, studio.tabs.data, "
        "studio.tabs.export, studio.tabs.chat, studio.tabs.doctor\n"
        "heavy = [m for m in ('torch', 'transformers', 'peft', 'datasets', 'deepspeed', 'bitsandbytes') "
        "if m in sys.modules]\nprint(heavy)\nassert not heavy, heavy\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_launch_options_turn_run_history_off():
    from studio import app

    kwargs = app.launch_kwargs(settings.Settings())
    assert kwargs["run_history"] is False and kwargs["server_name"] == "127.0.0.1"


def test_upload_cap_from_the_environment():
    assert settings.load([], env={}).max_upload_bytes == 200 * 2**20
    assert settings.load([], env={"STUDIO_MAX_UPLOAD_MB": "1.5"}).max_upload_bytes == int(1.5 * 2**20)
    for bad in ("0", "-3", "lots"):
        with pytest.raises(settings.SettingsError, match="STUDIO_MAX_UPLOAD_MB"):
            settings.load([], env={"STUDIO_MAX_UPLOAD_MB": bad})


def test_the_form_refuses_a_dataset_folder_outside_the_workspace(demo_paths, tmp_path):
    """The page reads only the workspace's datasets (issue 47 item 9): a dataset folder elsewhere on the server is
    refused by the form and so by Start, naming data.dataset_dir, before its registry is read; the workspace's own
    folder passes."""
    import json

    import yaml

    from studio import form_validation, forms

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "dataset_info.json").write_text(json.dumps({"secret": {"file_name": "/etc/shadow"}}))
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    assert form_validation.check(forms.spec_to_values(data))[0] is not None  # the workspace's datasets pass
    data["data"]["dataset_dir"] = str(elsewhere)
    spec, errors, _ = form_validation.form_check(forms.spec_to_values(data))
    assert spec is None and [p for p, _ in errors] == ["data.dataset_dir"]
    assert str(errors[0][1]).startswith(f"{elsewhere} is outside the workspace (")


def test_a_busy_port_is_said_in_one_line(tmp_path):
    """Another server on the port: `studio webui` says so in one line naming --port and STUDIO_PORT, exit 2, before
    building anything (issue 45 item 2: a 26-line traceback whose hint, GRADIO_SERVER_PORT, Studio ignores)."""
    import os
    import socket

    root = Path(__file__).resolve().parents[2]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        env = {**os.environ, "STUDIO_HOME": str(tmp_path), "GRADIO_ANALYTICS_ENABLED": "False"}
        out = subprocess.run(
            [sys.executable, "-m", "engine.cli", "webui", "--port", str(port), "--no-demo"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 2, out.stderr
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert lines == [
        f"studio webui: port {port} on 127.0.0.1 is in use (Address already in use): choose another with --port N "
        "or STUDIO_PORT=N"
    ], lines
