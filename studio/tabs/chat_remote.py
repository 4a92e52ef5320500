"""The Chat tab's Tuned pane talking to a model Studio serves (``studio serve``, the Export tab's Serve): the pane
sends its conversation to the server's OpenAI-compatible ``/v1/chat/completions`` with ``stream: true`` and shows the
reply as its chunks arrive, the same way any OpenAI client of that server would.

Only servers of this studio's registry are offered (the source ``serve:RUN_ID``): the page never fetches an address
a visitor typed. The server renders the conversation with the served model's own chat template, so the tab's
template choice does not apply to this pane; Unload leaves the server running (it is a run of its own, stopped from
the Export or Runs tab).

A server started with a key (``studio serve --api-key-env NAME``) is sent ``Authorization: Bearer`` with the value of
the same variable NAME in the studio's own environment: the operator exports it for both commands. The key is read
from memory at each request and never written (no page field holds it, no file the page could offer for download);
the name comes from the server's registry run, which only a command at the shell names (the Export tab's Serve asks
for no key), so a visitor can neither choose the variable nor where it goes (engine.core.page_trust's concern). A
studio without the variable says so in one line instead of sending nothing and showing a 401.

Light: stdlib (urllib, json) and engine.export.serve_jobs (the registry's servers).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from engine.export import serve_jobs
from engine.export.checks import ExportError
from engine.export.sources import run_id_folder
from studio.i18n.page import t

PREFIX = "serve:"
ERROR_MARK = "⚠️ "  # starts the line a failed reply ends with (here and in studio.tabs.chat): not sent back


def is_served(source: str | None) -> bool:
    return bool(source) and str(source).startswith(PREFIX)


def serving() -> list[tuple[str, dict]]:
    """(``serve:RUN_ID``, its status: model, url, ...) for each of the registry's servers that is answering now."""
    statuses = ((PREFIX + job.run_id, job.poll()) for job in serve_jobs.list_servers())
    return [(source, status) for source, status in statuses if status["state"] == "serving"]


def served_source(source: str) -> str | None:
    """The run or folder a server serves (its base model then follows, as for a picked run); None when unknown."""
    try:
        served = serve_jobs.ServeJob(source[len(PREFIX) :]).source
    except ExportError:
        return None
    folder = None if Path(served).exists() else run_id_folder(served)  # `studio serve RUN_ID`: the run's folder
    return str(folder or served)


class Remote:
    """A Chat pane's model behind a served endpoint: the same calls as a ``chat.Worker`` (``wait_ready``,
    ``generate``, ``alive``, ``close``), over HTTP."""

    vision = False  # the server takes text parts only

    def __init__(self, source: str):
        self.source, self.run_id = source, source[len(PREFIX) :]
        self.adapter, self.template = None, t("chat_served_template", "en")
        self.url, self.model = "", self.run_id
        self.key_env: str | None = None
        self.seq = 0

    def _status(self) -> dict | None:
        try:
            return serve_jobs.ServeJob(self.run_id).poll()
        except ExportError:
            return None

    def alive(self) -> bool:
        status = self._status()
        return bool(status) and status["state"] == "serving"

    def wait_ready(self, timeout: float = 30, lang: str = "en") -> str:
        """'' once the server answers ``GET /v1/models``; else what is wrong, in a line."""
        status = self._status()
        if not status or status["state"] != "serving":
            state = status["state"] if status else t("chat_served_unknown", lang)
            return t("chat_served_down", lang, run=self.run_id, state=state)
        self.url, self.model = status["url"], status["model"] or self.run_id
        self.key_env = status.get("key_env")
        if self.key_env and not os.environ.get(self.key_env):
            return t("chat_served_no_key", lang, run=self.run_id, var=self.key_env)
        try:
            with urllib.request.urlopen(
                urllib.request.Request(self.url + "/models", headers=self.headers()), timeout=timeout
            ) as r:
                names = [m.get("id") for m in json.load(r).get("data", [])]
        except (OSError, ValueError) as exc:
            return t("chat_served_down", lang, run=self.run_id, state=str(exc))
        self.model = names[0] if names else self.model
        self.template = t("chat_served_template", lang)
        return ""

    def headers(self, **more: str) -> dict[str, str]:
        """The server's key, if it has one, as OpenAI's bearer token (read from the environment, never stored)."""
        key = os.environ.get(self.key_env) if self.key_env else None
        return {**more, **({"Authorization": f"Bearer {key}"} if key else {})}

    def request(self, messages: list[dict], options: dict) -> dict:
        """The chat-completions body for a pane's conversation and the tab's generation settings."""
        system = [{"role": "system", "content": options["system"]}] if options.get("system") else []
        body = {
            "model": self.model,
            "messages": system + [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": int(options.get("max_new_tokens") or 128),
            "temperature": float(options.get("temperature") or 0.0),
            "top_p": float(options.get("top_p") or 1.0),
            "stream": True,
        }
        if options.get("stop"):
            body["stop"] = list(options["stop"])
        return body

    def generate(self, messages: list[dict], options: dict, lang: str = "en") -> Iterator[str]:
        """Yields the reply so far after each streamed chunk (server-sent events, ``data: [DONE]`` at the end)."""
        req = urllib.request.Request(
            self.url + "/chat/completions",
            data=json.dumps(self.request(messages, options)).encode(),
            headers=self.headers(**{"Content-Type": "application/json", "Accept": "text/event-stream"}),
        )
        text = ""
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                for raw in r:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    choice = (json.loads(data).get("choices") or [{}])[0]
                    delta = (choice.get("delta") or {}).get("content") or ""
                    if delta:
                        text += delta
                        yield text
        except urllib.error.HTTPError as exc:  # the server's own JSON error, e.g. a 400 naming the field
            try:
                said = json.loads(exc.read().decode() or "{}").get("error", {}).get("message") or str(exc)
            except ValueError:
                said = str(exc)
            yield f"{text}\n\n{ERROR_MARK}{said}".lstrip("\n")
            return
        except (OSError, ValueError) as exc:  # the server went away mid-reply, or sent what is not an event
            yield f"{text}\n\n{ERROR_MARK}{t('chat_served_down', lang, run=self.run_id, state=exc)}".lstrip("\n")
            return
        yield text or t("chat_empty", lang)

    def close(self) -> None:
        """Nothing to end here: the server is its own run."""
