"""The ``studio`` command. Light: parses the subcommand and dispatches to the module that owns it.

Each subcommand is owned by one module, which exposes ``cli(argv: list[str]) -> int`` with its own argparse
(``prog="studio <name>"``). Modules are imported only when their subcommand runs, so ``studio --help`` and
``studio webui`` never pay for torch.
"""

from __future__ import annotations

import importlib
import os
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "webui": ("studio.app", "serve the studio page (default 127.0.0.1:7860)"),
    "users": ("engine.core.accounts", "team mode's accounts: add / list / passwd / remove"),
    "audit": ("engine.core.audit", "who did what in this workspace: logins, starts, stops, deletes, jobs"),
    "demo": ("engine.trainer.demo", "(re)build the demo workspace: tiny model and datasets"),
    "train": ("engine.commands.train_cli", "run a spec (ours or a LLaMA-Factory YAML) and follow it to the end"),
    "validate": ("engine.commands.train_cli", "check a spec: prints OK or every problem"),
    "preview": ("engine.runs.launch", "print the exact launch command(s) and generated configs for a spec"),
    "import-lf": ("engine.lf.compat", "convert a LLaMA-Factory training YAML (+ accelerate config) to a spec"),
    "export-lf": ("engine.commands.export_lf", "write a spec, or a run as it ran, as a LLaMA-Factory training YAML"),
    "merge": ("engine.export.merge_jobs", "merge a run's adapter(s) into the base model and verify it"),
    "plan": ("engine.commands.plan_cli", "predict per-GPU memory for a spec; --fit walks the out-of-memory ladder"),
    "doctor": ("engine.machine.doctor", "check GPUs, drivers, the stack and communication"),
    "runs": ("engine.commands.runs_cli", "list / show / logs / stop / delete runs"),
    "queue": ("engine.commands.runs_cli", "add / list / remove queued runs"),
    "replay": ("engine.commands.runs_cli", "start a new run from a run's record, warning about what changed"),
    "data": ("engine.commands.data_cli", "check, preview and share datasets: `studio data check NAME`"),
    "download": ("engine.jobs.downloads", "download a hub model or dataset into the cache, as a run (resumable)"),
    "models": ("engine.jobs.downloads", "list local models (workspace and cache) with sizes; delete one"),
    "expand-model": ("engine.models.expand", "LLaMA Pro block expansion: a model with N identity blocks added"),
    "import-gguf": ("engine.jobs.gguf_imports", "import a GGUF file (Ollama, LM Studio) as a base model, verified"),
    "eval": ("engine.commands.eval_cli", "evaluate a run's base, checkpoints and final weights; prints the table"),
    "export": ("engine.export.convert_jobs", "export a run or model as GGUF (+ Ollama Modelfile), verified"),
    "serve": ("engine.export.serve_jobs", "serve a run or model with an OpenAI-compatible API (a key off 127.0.0.1)"),
    "push": ("engine.export.push_jobs", "upload an export, a merge or a run's adapter to the Hugging Face hub"),
    "rewards": ("engine.jobs.rewards_try", "dry-run a GRPO spec's reward functions on real rows: `rewards try SPEC`"),
}

# Commands that serve the page to remote users: bound to the workspace, never acting for the shell.
PAGE_COMMANDS = ("webui",)


def invocation() -> str:
    """How the person at this shell runs ``studio``: ``studio`` when that name on their PATH is this one, else the
    path of this environment's script (after ``scripts/demo.sh`` it is ``.venv/bin/studio``, not on PATH), relative
    to the current folder when inside it. For the commands a command suggests."""
    import os
    import shutil
    from pathlib import Path

    mine = Path(sys.executable).parent / "studio"
    found = shutil.which("studio")
    if found and mine.is_file() and Path(found).resolve() == mine.resolve():
        return "studio"
    if not mine.is_file():
        return "studio"
    try:
        return os.path.relpath(mine) if not os.path.relpath(mine).startswith("..") else str(mine)
    except ValueError:
        return str(mine)


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: studio <command> [options]", "", "Train, watch and merge LLM fine-tunes.", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += [
        "",
        "Run `studio <command> --help` for a command's options. Workspace: $STUDIO_HOME (default ~/.studio).",
        "A shared studio (team mode): `studio --server URL train|queue|runs ...` with STUDIO_TOKEN (or STUDIO_SERVER)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        result = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # `studio runs list | head -1`: the reader left; end quietly as Unix tools do (stdout to /dev/null so the
        # interpreter's last flush does not raise again).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool ended by it
    return result


def _remote(argv: list[str]) -> tuple[str | None, list[str], bool]:
    """(the shared studio's URL or None, the rest, whether it was named on the command line): ``--server URL`` /
    ``--server=URL`` first, or ``STUDIO_SERVER`` (then only for the commands a shared studio has)."""
    if argv[:1] == ["--server"]:
        return (argv[1] if len(argv) > 1 else ""), argv[2:], True
    if argv and argv[0].startswith("--server="):
        return argv[0].split("=", 1)[1], argv[1:], True
    return os.environ.get("STUDIO_SERVER") or None, argv, False


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    server, argv, named = _remote(argv)
    if server is not None and (named or argv[:1] and argv[0] in ("train", "queue", "runs")):
        from engine.commands import remote_cli

        if not server:
            print(
                "studio --server: give the shared studio's URL, e.g. --server https://studio.example.com",
                file=sys.stderr,
            )
            return 2
        return remote_cli.cli(server, argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"studio: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    # Modules that own several commands take the command name first.
    shared = [k for k, (m, _) in COMMANDS.items() if m == COMMANDS[name][0]]
    if name in PAGE_COMMANDS:
        return int(module.cli(rest) or 0)
    from engine.core.acting import shell

    with shell():  # the person at the shell may write where they can (engine.core.acting); the page may not
        result = module.cli([name, *rest] if len(shared) > 1 else rest)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
