"""Hostile files given where a command or the page reads YAML (issue 47 items 7, 8): an alias bomb, a 5000-deep
document, a binary file and a FIFO, to every command that reads a spec or an LLaMA-Factory YAML, and the page's LF
paste. Each is refused at once in one message naming the file, exit non-zero, never a traceback or a hang (on the old
code: validate and train busy past a minute on the bomb, every command blocked forever on the FIFO, RecursionError
and UnicodeDecodeError tracebacks)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from engine.cli import main as studio

COMMANDS = (
    ["validate"],
    ["train"],
    ["preview"],
    ["import-lf", "-o", "x.yaml"],
    ["merge", "--lf-yaml"],
    ["rewards", "try"],
)


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines + ["model_name_or_path: m", "stage: sft", "do_train: true"]) + "\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    files = {
        "alias bomb": d / "bomb.yaml",
        "5000-deep": d / "deep.yaml",
        "binary": d / "binary.yaml",
        "fifo": d / "fifo.yaml",
    }
    files["alias bomb"].write_text(_bomb())
    files["5000-deep"].write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    files["binary"].write_bytes(bytes(range(256)) * 8)
    os.mkfifo(files["fifo"])
    return files


def _run(argv: list[str], limit: float = 60.0) -> int | None:
    """The command's exit code, or None when it was still running after ``limit`` seconds (a hang)."""
    out: list[int] = []
    worker = threading.Thread(target=lambda: out.append(studio(argv)), daemon=True)
    worker.start()
    worker.join(limit)
    return out[0] if out else None


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("kind", ["alias bomb", "5000-deep", "binary", "fifo"])
def test_each_command_refuses_in_one_line(command, kind, hostile, studio_home, tmp_path, monkeypatch, capsys, tally):
    path = hostile[kind]
    monkeypatch.chdir(tmp_path)
    rc = _run([*command, str(path)])
    said = capsys.readouterr()
    text = said.out + said.err
    problem = [line for line in text.splitlines() if line.strip() and not line.startswith("invalid run spec")]
    ok = rc not in (None, 0) and "Traceback" not in text and len(problem) == 1 and str(path) in text
    tally.check(f"hostile::studio {' '.join(command)} on a {kind} file -> one line, non-zero", ok, f"rc={rc}\n{text}")


def test_the_pages_lf_paste_refuses_a_bomb_at_once():
    from engine.lf.compat import lf_text_to_spec
    from engine.spec.schema import SpecError

    for text, words in ((_bomb(), "once its aliases are expanded"), ("x: 1\n" * (1 << 20), "larger than 4 MiB")):
        result: list = []
        worker = threading.Thread(target=_paste, args=(lf_text_to_spec, SpecError, text, result), daemon=True)
        worker.start()
        worker.join(30)
        assert result and words in str(result[0]), result


def _paste(to_spec, error, text: str, result: list) -> None:
    try:
        to_spec(text)
    except error as exc:
        result.append(exc)
