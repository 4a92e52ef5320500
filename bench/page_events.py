"""How long the page takes to answer what a person does, and how much of the browser's CPU it burns meanwhile.

Usage: .venv/bin/python bench/page_events.py [--repeats 3] [--baseline DIR [--baseline-patched]] [--out FILE.md]

Measured in Chromium (Playwright, headless) on a studio serving the demo workspace from a temporary STUDIO_HOME on
127.0.0.1, for each variant in turn, --repeats times, alternating so every variant sees the same load:
- load: page opened -> the Start button enabled (the page's load handlers answered);
- switch: language picked -> the Start button reads 开始训练;
- import: a LLaMA-Factory YAML (two dozen fields) imported -> its message shown and Start enabled again;
- idle CPU: the browser's task time (CDP Performance.TaskDuration) over 10 s with the page open and nothing done;
- idle browser: the CPU of all the browser's processes (renderer, GPU, browser; /proc, the kernel's count) over the
  same 10 s, which also counts the frames the page has drawn, where the task time counts only the page's tasks;
- follow CPU: the browser's task time per second while the dashboard follows a run of FOLLOW_STEPS steps (LoRA SFT
  on the demo model, logged every step, started with Start) from the click to its finished event, and that run's
  seconds (follow s), and the CPU of all the browser's processes per second meanwhile (follow browser). The trainer
  shares the CPU with the browser, so compare variants of one round.

Variants: this checkout with studio/page_speed's patch (``patched``) and without it (``STUDIO_GRADIO_PATCH=off``);
with --baseline DIR, another checkout of this repository as well (e.g. ``git worktree add /tmp/page-base 50ec647``,
before the language switch and the load were answered in one request each), run with this checkout's Python,
without the patch unless --baseline-patched (a baseline that has it, to measure a later change).
Only the processes this script started are stopped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proc_cpu import tree_cpu_s  # noqa: E402 - bench/, the script's folder

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, Server  # noqa: E402

FOLLOW_STEPS = 16
FOLLOW_YAML = (
    "model_name_or_path: {model}\nstage: sft\nfinetuning_type: lora\ndataset: demo_alpaca\ntemplate: default\n"
    "cutoff_len: 96\nlogging_steps: 1\nmax_steps: {steps}\nsave_steps: 1000\nreport_to: none\n"
)
YAML = (
    "model_name_or_path: {model}\nstage: dpo\nfinetuning_type: lora\nlora_target: all\ndataset: demo_dpo\n"
    "template: default\ncutoff_len: 64\nlogging_steps: 1\nper_device_train_batch_size: 4\neval_strategy: steps\n"
)


class Variant(Server):
    """A studio from ``root`` (this checkout or the baseline's) with extra environment."""

    def __init__(self, home: Path, root: Path, env: dict):
        import tests.e2e.conftest as conftest

        saved = conftest.ROOT
        conftest.ROOT = root
        try:
            super().__init__(home, env=env)
        finally:
            conftest.ROOT = saved


def browser_cpu_s() -> float:
    """CPU seconds of every process of the browser this script launched (Playwright's driver starts it)."""
    return tree_cpu_s(os.getpid(), "chromium")


def task_seconds(cdp) -> float:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}["TaskDuration"]


def measure(browser, server: Server) -> dict[str, float]:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(300_000)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    out = {}
    t0 = time.perf_counter()
    page.goto(server.url)
    page.wait_for_selector("#start-btn:not([disabled])")
    out["load s"] = time.perf_counter() - t0
    page.wait_for_timeout(3000)  # the load's last answers drawn
    before, browser_before = task_seconds(cdp), browser_cpu_s()
    page.wait_for_timeout(10_000)  # a benchmark's idle window, not a test's wait
    out["idle CPU %"] = 100 * (task_seconds(cdp) - before) / 10
    out["idle browser %"] = 100 * (browser_cpu_s() - browser_before) / 10
    t0 = time.perf_counter()
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('开始训练')")
    out["switch s"] = time.perf_counter() - t0
    page.click("#lang-picker input")
    page.get_by_role("option", name="English").click()
    page.wait_for_function("document.querySelector('#start-btn').innerText.includes('Start')")
    page.get_by_text("LLaMA-Factory YAML", exact=True).first.click()
    page.locator("#lf-text textarea").fill(YAML.format(model=server.home / "models" / "demo-tiny-llama"))
    t0 = time.perf_counter()
    page.click("#lf-import")
    page.wait_for_function("document.querySelector('#lf-msg').innerText.includes('filled from the LLaMA-Factory')")
    page.wait_for_selector("#start-btn:not([disabled])")
    out["import s"] = time.perf_counter() - t0
    out.update(follow(page, cdp, server))
    page.context.close()
    return out


def follow(page, cdp, server: Server) -> dict[str, float]:
    """The browser's task time per second while the dashboard follows a short run started from the page."""
    model = server.home / "models" / "demo-tiny-llama"
    page.locator("#lf-text textarea").fill(FOLLOW_YAML.format(model=model, steps=FOLLOW_STEPS))
    page.click("#lf-import")
    page.wait_for_function("document.querySelector('#lf-msg').innerText.includes('filled from the LLaMA-Factory')")
    page.wait_for_selector("#start-btn:not([disabled])")
    runs = server.home / "runs"
    before_runs = set(runs.iterdir()) if runs.is_dir() else set()
    before, browser_before, t0 = task_seconds(cdp), browser_cpu_s(), time.perf_counter()
    page.click("#start-btn")
    while True:  # the run's own record of its end, not the page's
        new = [d for d in runs.iterdir() if d not in before_runs] if runs.is_dir() else []
        events = new[0] / "events.jsonl" if new else None
        if events and events.is_file() and any(w in events.read_text() for w in ('"finished"', '"failed"')):
            break
        if time.perf_counter() - t0 > 600:
            raise TimeoutError("the followed run did not end in 600 s")
        page.wait_for_timeout(250)
    seconds = time.perf_counter() - t0
    return {
        "follow s": seconds,
        "follow CPU %": 100 * (task_seconds(cdp) - before) / seconds,
        "follow browser %": 100 * (browser_cpu_s() - browser_before) / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another checkout of this repository to measure beside this one")
    ap.add_argument("--baseline-patched", action="store_true", help="run the baseline with its page patch on")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "page_events.md")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    variants = {"patched": (ROOT, {}), "unpatched": (ROOT, {"STUDIO_GRADIO_PATCH": "off"})}
    if args.baseline:
        commit = subprocess.run(
            ["git", "-C", str(args.baseline), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        off = {} if args.baseline_patched else {"STUDIO_GRADIO_PATCH": "off"}  # the baseline may have no patch
        variants[f"baseline {commit or args.baseline.name}"] = (args.baseline.resolve(), off)
    tmp = Path(tempfile.mkdtemp(prefix="page-events-"))
    results: dict[str, list[dict]] = {name: [] for name in variants}
    servers: dict[str, Server] = {}
    try:
        for name, (root, env) in variants.items():
            home = tmp / name.replace(" ", "-")
            home.mkdir()
            servers[name] = Variant(home, root, {"HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", **env})
        for server in servers.values():
            server.wait_up(timeout=600)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for i in range(args.repeats):
                for name, server in servers.items():
                    results[name].append(measure(browser, server))
                    print(f"round {i + 1} {name}: {results[name][-1]}", flush=True)
            browser.close()
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    keys = list(next(iter(results.values()))[0])
    lines = [
        f"# Page events ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {args.repeats} rounds, median)",
        "",
        "Produced by `bench/page_events.py`; see its docstring for what each column measures.",
        "",
        "| variant | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for name, rows in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{statistics.median(r[k] for r in rows):.1f}" for k in keys) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
