"""engine.machine.doctor on CPU: a PASS/WARN/FAIL list with a passing gloo all-reduce, JSON CLI, and no torch in the
caller."""

from __future__ import annotations

import json
import sys


def test_doctor_checks_on_cpu(capsys):
    from engine.machine import doctor

    rc = doctor.cli(["--json"])
    checks = json.loads(capsys.readouterr().out)
    assert rc == (1 if any(c["status"] == "FAIL" for c in checks) else 0)
    by = {c["name"]: c for c in checks}
    assert all(c["status"] in ("PASS", "WARN", "FAIL") for c in checks)
    assert by["all-reduce"]["status"] == "PASS" and "gloo over 2" in by["all-reduce"]["detail"]
    assert by["gpus"]["status"] == "WARN" and by["gpus"]["fix"]  # STUDIO_FORCE_CPU=1 in tests
    assert "transformers" in by["stack versions"]["detail"]
    assert by["deepspeed ops"]["status"] in ("PASS", "WARN") and "compatible" in by["deepspeed ops"]["detail"]
    assert "GiB free" in by["disk"]["detail"]


def test_doctor_module_is_light():
    import subprocess

    code = "import sys, engine.machine.doctor; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0
