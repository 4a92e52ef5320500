"""One ``engine.trainer.chat_worker`` process of the Chat tab, as the page drives it: started with a model (and an
adapter), read line by line into a queue by a thread, asked to generate a reply token by token, closed.

Light: subprocess/json/threads; the page never loads weights.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from engine.core import accounts
from engine.machine.kernels import with_gptq_path
from studio.i18n.page import t
from studio.tabs.chat_remote import ERROR_MARK

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One chat_worker process and a thread that turns its stdout lines into a queue of messages."""

    def __init__(self, model: str, adapter: str | None = None, template: str = "auto", source: str = ""):
        env = {
            **{k: v for k, v in os.environ.items() if k != "STUDIO_AUTH"},  # the page's login stays behind
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "PYTHONPATH": with_gptq_path(str(ROOT)),  # a GPTQ / AWQ export loads with gptqmodel, kept apart
            "TOKENIZERS_PARALLELISM": "false",
        }
        # team mode: a member's worker holds their own secrets, none of the operator's unbound ones (as their runs)
        from engine.runs.launch import owner_environment

        env = owner_environment(env, accounts.owner_of_new())
        argv = [sys.executable, "-m", "engine.trainer.chat_worker", model, "--template", template] + (
            ["--adapter", adapter] if adapter else []
        )
        self.model, self.adapter, self.template = model, adapter, template
        self.source = source or model  # what the page picked: a model folder, a run folder or an export
        self.seq = 0
        self.vision = False  # a vision-language model, as the worker says once loaded: it takes images
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                continue
        self.messages.put({"type": "exit", "returncode": self.proc.wait()})

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 180, lang: str = "en") -> str:
        try:
            msg = self.messages.get(timeout=timeout)
        except queue.Empty:
            return t("chat_timeout", lang)
        if msg.get("type") == "ready":
            self.vision = bool(msg.get("vision"))
            return ""
        return msg.get("error") or t("chat_exited", lang, detail=msg)

    def generate(self, messages: list[dict], options: dict, lang: str = "en") -> Iterator[str]:
        """Yields the reply so far after each token. ``options``: system, max_new_tokens, temperature, top_p, stop.
        Requests are numbered: what is left of an abandoned reply (a closed page) is skipped, not shown here."""
        self.seq += 1
        rid = self.seq
        try:
            self.proc.stdin.write(json.dumps({"type": "generate", "id": rid, "messages": messages, **options}) + "\n")
            self.proc.stdin.flush()
        except OSError:
            yield f"{ERROR_MARK}{t('chat_exited', lang, detail=self.proc.poll())}"
            return
        text = ""
        while True:
            try:
                msg = self.messages.get(timeout=300)
            except queue.Empty:
                yield f"{text}\n\n{ERROR_MARK}{t('chat_reply_timeout', lang)}"
                return
            if msg.get("type") in ("token", "done", "error") and msg.get("id", rid) != rid:
                continue
            if msg.get("type") == "token":
                text += msg["text"]
                yield text
            elif msg.get("type") == "done":
                # A weakly trained model may end its turn at once; say so instead of showing an empty bubble.
                yield msg.get("text", text) or t("chat_empty", lang)
                return
            else:
                error = msg.get("error") or t("chat_exited", lang, detail=msg)
                yield f"{text}\n\n{ERROR_MARK}{error}".lstrip("\n")
                return

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"type": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
