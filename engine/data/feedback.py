"""Learning from use: what a person says of a chat answer, kept as training data in the workspace's data folder.

An edit (the person's better answer beside the model's) is a preference pair, a row of ``chat_feedback_dpo.jsonl``
in LLaMA-Factory's sharegpt ranking layout: ``conversations`` (the earlier turns and the prompt, ``from`` human /
gpt), ``chosen`` (the edited answer) and ``rejected`` (the model's), each ``{"from": "gpt", "value": ...}``. A mark
alone (good or bad) is a row of ``chat_feedback_kto.jsonl``: the conversation up to and with the answer, and
``kto_tag`` true or false (LF's ``columns.kto_tag``). Both files are registered in ``dataset_info.json`` as
``chat_feedback_dpo`` (``ranking: true``) and ``chat_feedback_kto``, so the Datasets tab lists them, a run names them
and LLaMA-Factory reads them as they are. Each row also says which model answered (``chatted``: the model folder, the
adapter, the run, the chat template), which a run trained on the feedback starts from (``train_spec``).

In team mode each account keeps its own sets (what a person chats is theirs): ``chat_feedback_dpo_NAME`` and
``chat_feedback_kto_NAME``, registered as the account's (engine.core.belongings: listed as a dataset they registered
is); the operator's (the shell, single-user mode) are the two names above (``set_name``).

Appends take a file lock (``.chat_feedback.lock`` in the data folder): several people on one page, or several
pages, never lose a row or write half of one. Light: stdlib, engine.core.accounts and engine.data.dataset_registry.
"""

from __future__ import annotations

import fcntl
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.core import accounts, workspace
from engine.data import dataset_registry as reg
from engine.data.messages import message

DPO_NAME, KTO_NAME = "chat_feedback_dpo", "chat_feedback_kto"
# The two entries as dataset_info.json holds them, less their file (LLaMA-Factory's keys; the sharegpt tags are LF's
# defaults); a set's file is its name + ".jsonl".
ENTRIES: dict[str, dict] = {
    "dpo": {
        "formatting": "sharegpt",
        "ranking": True,
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected", "system": "system"},
    },
    "kto": {
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "kto_tag": "kto_tag", "system": "system"},
    },
}
LOCK_NAME = ".chat_feedback.lock"
_FROM = {"user": "human", "assistant": "gpt"}


class FeedbackError(ValueError):
    """Feedback that cannot become a training row; its argument is a catalog message."""


@dataclass(frozen=True)
class Chatted:
    """The model that wrote the answer: the folder loaded (a base model, a merged export or a full fine-tune's
    weights), the adapter on it, the run it came from and the chat template it was rendered with."""

    model: str
    adapter: str = ""
    run_id: str = ""
    template: str = "auto"
    source: str = ""  # what the Chat tab picked (a run folder, an export, a server)


@dataclass(frozen=True)
class Counts:
    """What the feedback sets hold: preference pairs (edits), answers marked good and answers marked bad."""

    pairs: int = 0
    good: int = 0
    bad: int = 0

    @property
    def marks(self) -> int:
        return self.good + self.bad


def set_name(stage: str, owner: str | None = None) -> str:
    """The feedback set of ``stage`` (dpo: the pairs, kto: the marks) of ``owner`` (None: whom this call acts for)."""
    who = accounts.owner_of_new() if owner is None else owner
    base = DPO_NAME if stage == "dpo" else KTO_NAME
    return base if who == accounts.OPERATOR else f"{base}_{who}"


def _entry(stage: str, name: str) -> dict:
    return {"file_name": f"{name}.jsonl", **ENTRIES[stage]}


def _dir(data_dir: str | Path | None) -> Path:
    return Path(data_dir) if data_dir else workspace.data_dir()


def _split(conversation: list[dict]) -> tuple[list[dict], str]:
    """(the turns up to the prompt, the answer) of a conversation ending with the answer judged; refused when there
    is no answer, it is empty or a turn holds an image (its file is the page's, not the data folder's)."""
    turns = [t for t in conversation if t.get("role") in _FROM]
    if len(turns) < 2 or turns[-1]["role"] != "assistant" or turns[-2]["role"] != "user":
        raise FeedbackError(message("data.feedback_no_answer"))
    if any(t.get("images") for t in turns):
        raise FeedbackError(message("data.feedback_images"))
    answer = str(turns[-1].get("content") or "")
    if not answer.strip():
        raise FeedbackError(message("data.feedback_empty_answer"))
    return turns[:-1], answer


def _sharegpt(turns: list[dict]) -> list[dict]:
    return [{"from": _FROM[t["role"]], "value": str(t.get("content") or "")} for t in turns]


def add_edit(
    conversation: list[dict], better: str, chatted: Chatted, system: str = "", data_dir: str | Path | None = None
) -> Counts:
    """A person's better answer to the conversation's last answer: one preference pair (chosen: theirs, rejected:
    the model's). Returns what the sets hold now."""
    prompt_turns, answer = _split(conversation)
    better = str(better or "")
    if not better.strip():
        raise FeedbackError(message("data.feedback_empty_edit"))
    if better.strip() == answer.strip():
        raise FeedbackError(message("data.feedback_same_edit"))
    row = {
        "conversations": _sharegpt(prompt_turns),
        "chosen": {"from": "gpt", "value": better},
        "rejected": {"from": "gpt", "value": answer},
        "system": str(system or ""),
    }
    return _append("dpo", row, chatted, _dir(data_dir))


def add_mark(
    conversation: list[dict], good: bool, chatted: Chatted, system: str = "", data_dir: str | Path | None = None
) -> Counts:
    """The conversation's last answer marked good (kto_tag true) or bad (false). Returns what the sets hold now."""
    prompt_turns, answer = _split(conversation)
    row = {
        "conversations": _sharegpt([*prompt_turns, {"role": "assistant", "content": answer}]),
        "kto_tag": bool(good),
        "system": str(system or ""),
    }
    return _append("kto", row, chatted, _dir(data_dir))


def _append(stage: str, row: dict, chatted: Chatted, ddir: Path) -> Counts:
    """One row appended under the lock to the asking account's set, the set's entry registered (again, if it was
    removed or changed) as that account's."""
    row = {**row, "chatted": asdict(chatted), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    line = json.dumps(row, ensure_ascii=False) + "\n"
    who = accounts.owner_of_new()
    name = set_name(stage, who)
    entry = _entry(stage, name)
    ddir.mkdir(parents=True, exist_ok=True)
    with open(ddir / LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(ddir / entry["file_name"], "a", encoding="utf-8") as fh:
            fh.write(line)
        info = reg.read_dataset_info(ddir) if (ddir / reg.INFO_NAME).is_file() else {}
        if info.get(name) != entry:
            reg.register_dataset(
                ddir,
                name,
                entry["file_name"],
                entry["formatting"],
                entry["columns"],
                ranking=bool(entry.get("ranking")),
                overwrite=True,
                owner="" if who == accounts.OPERATOR else who,
            )
        return _counts(ddir, who)


def _rows(ddir: Path, name: str) -> list[dict]:
    """The rows of set ``name`` that read as JSON objects (a line a person broke by hand is skipped, not fatal here:
    the registry's check names it)."""
    try:
        lines = (ddir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            out.append(row)
    return out


def _counts(ddir: Path, owner: str | None = None) -> Counts:
    tags = [r.get("kto_tag") for r in _rows(ddir, set_name("kto", owner))]
    pairs = len(_rows(ddir, set_name("dpo", owner)))
    return Counts(pairs, sum(t is True for t in tags), sum(t is False for t in tags))


def counts(data_dir: str | Path | None = None) -> Counts:
    """What the asking account's feedback sets in the data folder hold now."""
    return _counts(_dir(data_dir))


def stage_for(found: Counts) -> str | None:
    """What a run trained on the feedback is: dpo when there are pairs; kto on marks alone (TRL's KTO compares
    answers within a batch of 2 or more, so 2 marks at least); None when there is not enough yet."""
    if found.pairs:
        return "dpo"
    return "kto" if found.marks >= 2 else None


def last_chatted(stage: str, data_dir: str | Path | None = None) -> Chatted | None:
    """The model of the set's newest row (the one a run trained on the feedback starts from), or None."""
    for row in reversed(_rows(_dir(data_dir), set_name(stage))):
        got = row.get("chatted")
        if isinstance(got, dict) and got.get("model"):
            return Chatted(**{k: str(got.get(k) or "") for k in Chatted.__dataclass_fields__})
    return None


def train_spec(stage: str, model: dict[str, Any], template: str = "auto", name: str = "") -> dict:
    """A run spec (as data) training a LoRA on the asking account's feedback set of ``stage`` (dpo or kto) from
    ``model`` (a spec's model group), with the template the answers were rendered with. Small defaults that train the
    demo on a CPU in a minute: a few epochs over the few rows there are, one pair (two marks for kto) per step."""
    dataset = set_name(stage)
    return {
        "schema_version": 1,
        "model": dict(model),
        "method": {
            "stage": stage,
            "finetuning": "lora",
            "lora": {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": ["all"]},
        },
        "data": {"datasets": [dataset], "template": template or "auto", "cutoff_len": 1024},
        "train": {
            "num_epochs": 3,
            "per_device_batch_size": 1 if stage == "dpo" else 2,
            "gradient_accumulation": 1,
            "learning_rate": 1e-4,
            "logging_steps": 1,
            "save_steps": 500,
        },
        "output": {"run_name": name or f"chat-feedback-{stage}"},
    }
