"""Dataset rows: the ``dataset_info.json`` entry schema (LLaMA-Factory's columns and tags), the problem types, and
the row checks that turn any supported row into our canonical one (``normalize_row``).

Light: stdlib only. Never torch, transformers or datasets. ``engine.data.dataset_registry`` reads a registered
entry's files into these rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.messages import Message
from engine.data.messages import message
from engine.models.ms_models import use_modelscope

# ----------------------------------------------------------------------------------------------- entries
ALPACA_COLUMNS = {
    "prompt": "instruction",
    "query": "input",
    "response": "output",
    "system": "system",
    "history": "history",
}
SHAREGPT_COLUMNS = {"messages": "conversations", "system": "system", "tools": "tools"}
SHAREGPT_TAGS = {
    "role_tag": "from",
    "content_tag": "value",
    "user_tag": "human",
    "assistant_tag": "gpt",
    "observation_tag": "observation",
    "function_tag": "function_call",
    "system_tag": "system",
}
COLUMN_KEYS = {
    "prompt",
    "query",
    "response",
    "system",
    "history",
    "messages",
    "chosen",
    "rejected",
    "text",
    "tools",
    "images",
    "videos",
    "audios",
    "kto_tag",
}


# Stages whose data are preference pairs (a ``ranking: true`` entry with chosen / rejected columns).
PAIR_STAGES = ("dpo", "rm")
# Stages whose rows TRL tokenises itself (prompt / answer strings): no packing, length grouping or Studio collator.
# grpo too: TRL tokenises its prompts and generates the answers.
PREFERENCE_STAGES = ("dpo", "kto", "rm", "grpo")


def stage_data_problem(stage: str, name: str, ranking: bool, kto_tag: str | None) -> tuple[str, dict] | None:
    """Does an entry hold the kind of data ``stage`` trains on? dpo and rm: preference pairs (``ranking``); kto:
    answers tagged desirable or not (``columns.kto_tag``, LLaMA-Factory's); sft and pt: neither (they would train a
    rejected answer as a good one). None, or the refusal's catalog key (the same key, prefixed ``data.``, in
    engine.data.messages) and its parameters; the spec's rules and the registry both ask here."""
    if stage in PAIR_STAGES:
        return None if ranking else ("pairs_needed", {"stage": stage, "name": name})
    if stage == "kto":
        if ranking:
            return "kto_not_pairs", {"name": name}
        return None if kto_tag else ("kto_needs_tag", {"name": name})
    if ranking:
        return "pairs_need_pair_stage", {"name": name, "stage": stage}
    if kto_tag:
        return "tags_need_kto", {"name": name, "stage": stage, "column": kto_tag}
    return None


@dataclass
class DataProblem:
    """One thing wrong with a dataset. ``row`` is 1-based (the line number for JSONL files), or None."""

    file: str
    row: int | None
    column: str | None
    message: str  # an engine.data.messages Message (a plain str from older callers)

    def located(self) -> Message:
        """The problem with its place, as one catalog message (the page shows it in its language)."""
        key = "data.at"
        if self.row is not None:
            key += "_line" if self.file.endswith(".jsonl") else "_row"
        if self.column:
            key += "_column"
        return message(key, file=self.file, row=self.row, column=self.column, message=self.message)

    def __str__(self) -> str:
        return str(self.located())


class DataError(ValueError):
    """Datasets that cannot be trained on; ``problems`` lists every DataProblem found."""

    def __init__(self, problems: list[DataProblem]):
        self.problems = problems
        super().__init__("bad training data:\n" + "\n".join(f"  {p}" for p in problems))


class _RowError(Exception):
    def __init__(self, column: str | None, text: Message, kind: str = ""):
        self.column, self.message, self.kind = column, text, kind or str(text)
        super().__init__(text)


@dataclass
class DatasetEntry:
    """One entry of ``dataset_info.json`` on LLaMA-Factory's semantics (its ``parser.py``): where the rows come from
    (``source``: a local ``file`` or folder, an ``hf_hub`` dataset, or a ``script`` folder under the dataset folder),
    the ``datasets.load_dataset`` options ``subset`` (config name), ``split``, ``folder`` (data_dir) and ``revision``,
    ``num_samples`` (LF's sampling, applied by the trainer) and the column mapping."""

    name: str
    file_name: str
    formatting: str = "alpaca"
    ranking: bool = False
    columns: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)
    is_text: bool = False  # pretraining text: one prompt/text column and no response
    source: str = "file"  # file | hf_hub | ms_hub | script (LF's load_from)
    hub_id: str = ""  # hf_hub_url, ms_hub_url, or script_url for source script
    subset: str | None = None
    split: str = "train"
    folder: str | None = None
    num_samples: int | None = None
    revision: str | None = None

    @property
    def kto_tag(self) -> str | None:
        """The column tagging each answer desirable (true) or not (false) for kto, as LLaMA-Factory maps it."""
        return self.columns.get("kto_tag") or None

    @classmethod
    def from_info(cls, name: str, raw: dict) -> DatasetEntry:
        fmt = raw.get("formatting", "alpaca")
        given = dict(raw.get("columns") or {})
        ranking = bool(raw.get("ranking"))
        is_text = (
            fmt == "alpaca"
            and not ranking
            and "response" not in given
            and (("prompt" in given or "text" in given) or str(raw.get("file_name", "")).lower().endswith(".txt"))
        )
        if is_text and not given:  # a .txt file: its lines are the rows' "text" (LF maps columns prompt -> text)
            given = {"text": "text"}
        base = SHAREGPT_COLUMNS if fmt == "sharegpt" else ({} if is_text else ALPACA_COLUMNS)
        if ranking and fmt == "alpaca":
            base = {k: v for k, v in ALPACA_COLUMNS.items() if k != "response"} | {
                "chosen": "chosen",
                "rejected": "rejected",
            }
        tags = {**SHAREGPT_TAGS, **(raw.get("tags") or {})} if fmt == "sharegpt" else {}
        # LF: ms_hub_url when USE_MODELSCOPE_HUB is set or no hf_hub_url is given; hf_hub_url wins over script_url,
        # which wins over file_name
        source, hub_id = ("hf_hub", str(raw["hf_hub_url"])) if raw.get("hf_hub_url") else ("file", "")
        if raw.get("ms_hub_url") and (use_modelscope() or not raw.get("hf_hub_url")):
            source, hub_id = "ms_hub", str(raw["ms_hub_url"])
        if source == "file" and raw.get("script_url"):
            source, hub_id = "script", str(raw["script_url"])
        num = raw.get("num_samples")
        return cls(
            name,
            str(raw.get("file_name", "")),
            fmt,
            ranking,
            {**base, **given},
            tags,
            is_text,
            source,
            hub_id,
            str(raw["subset"]) if raw.get("subset") else None,
            str(raw.get("split") or "train"),
            str(raw["folder"]) if raw.get("folder") else None,
            num if isinstance(num, int) and not isinstance(num, bool) and num > 0 else None,
            str(raw["revision"]) if raw.get("revision") else None,
        )


def _entry_problems(name: str, raw: Any, info_path: Path) -> list[DataProblem]:
    if not isinstance(raw, dict):
        return [DataProblem(str(info_path), None, None, message("data.entry_not_object", name=name))]
    out = []
    if not (raw.get("file_name") or raw.get("hf_hub_url") or raw.get("script_url") or raw.get("ms_hub_url")):
        out.append(DataProblem(str(info_path), None, "file_name", message("data.entry_no_file", name=name)))
    num = raw.get("num_samples")
    if num is not None and (not isinstance(num, int) or isinstance(num, bool) or num < 1):
        out.append(
            DataProblem(str(info_path), None, "num_samples", message("data.entry_num_samples", name=name, value=num))
        )
    for key in ("subset", "split", "folder", "revision"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            out.append(
                DataProblem(str(info_path), None, key, message("data.entry_option", name=name, key=key, value=value))
            )
    if raw.get("formatting", "alpaca") not in ("alpaca", "sharegpt"):
        out.append(
            DataProblem(
                str(info_path),
                None,
                "formatting",
                message("data.entry_formatting", name=name, formatting=raw.get("formatting")),
            )
        )
    for kind in ("videos", "audios"):  # LF's other multimodal columns: refused here, not found out in training
        column = (raw.get("columns") or {}).get(kind)
        if column:
            out.append(
                DataProblem(
                    str(info_path), None, "columns", message("data.multimodal", name=name, kind=kind, column=column)
                )
            )
    bad = sorted(set(raw.get("columns") or {}) - COLUMN_KEYS)
    if bad:
        out.append(
            DataProblem(
                str(info_path),
                None,
                "columns",
                message("data.entry_columns", name=name, bad=", ".join(bad), known=", ".join(sorted(COLUMN_KEYS))),
            )
        )
    return out


# ----------------------------------------------------------------------------------------------- normalising
def normalize_row(row: Any, entry: DatasetEntry, stage: str = "sft") -> dict:
    """Any supported row -> {system, messages:[{role, content}], chosen?, rejected?, text?, kto_tag?}; raises
    _RowError. Stage kto reads the row's kto tag (true, false, or None when it has none)."""
    if not isinstance(row, dict):
        raise _RowError(None, message("data.row_not_object", type=type(row).__name__))
    cols = entry.columns

    def get(key: str, required: bool) -> Any:
        col = cols.get(key)
        if col is None or col not in row or row[col] is None:
            if not required:
                return None
            have = ", ".join(map(str, row))
            raise _RowError(
                col or key,
                message("data.missing_column", column=col or key, key=key, have=have)
                if have
                else message("data.missing_column_empty", column=col or key, key=key),
                kind=f"missing:{key}",
            )
        return row[col]

    if entry.is_text:
        text = get("text" if "text" in cols else "prompt", True)
        if not str(text).strip():
            raise _RowError(cols.get("text", cols.get("prompt")), message("data.empty_text"), kind="empty")
        return {"system": "", "messages": [], "text": str(text)}
    system = str(get("system", False) or "")
    if entry.formatting == "sharegpt":
        system, messages = _sharegpt_messages(get("messages", True), entry, system)
    else:
        messages = []
        for pair in get("history", False) or []:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise _RowError(cols.get("history"), message("data.bad_history"))
            messages += [{"role": "user", "content": str(pair[0])}, {"role": "assistant", "content": str(pair[1])}]
        prompt, query = str(get("prompt", True)), str(get("query", False) or "")
        messages.append({"role": "user", "content": f"{prompt}\n{query}" if query else prompt})
        if not entry.ranking:
            response = get("response", stage != "grpo")  # grpo: the answer column is optional (rewards read it)
            if response is not None:
                messages.append({"role": "assistant", "content": str(response)})
    out = {"system": system, "messages": messages}
    if cols.get("images"):
        out["images"] = _images(get("images", False), cols["images"], messages)
    tools = get("tools", False)
    if tools:
        text = _tools_text(tools, cols.get("tools"))
        if text:
            out["tools"] = text
    if entry.ranking:
        for key in ("chosen", "rejected"):
            val = get(key, True)
            if isinstance(val, dict):  # sharegpt ranking: {"from": "gpt", "value": ...}
                val = val.get(entry.tags.get("content_tag", "value"), "")
            if not str(val).strip():
                raise _RowError(cols[key], message("data.empty_answer", key=key), kind=f"empty-{key}")
            out[key] = str(val)
        if messages and _SIDE[messages[-1]["role"]] != "user":
            raise _RowError(cols.get("messages"), message("data.pair_end_user"))
    else:
        if stage == "kto" and entry.kto_tag:
            out["kto_tag"] = _kto_tag(get("kto_tag", False), entry.kto_tag)
        last = messages[-1] if messages else None
        if stage == "grpo" and last is None:
            raise _RowError(cols.get("messages"), message("data.end_assistant"), kind="end")
        if stage not in ("pt", "grpo") and (last is None or _SIDE[last["role"]] != "assistant"):
            raise _RowError(cols.get("messages"), message("data.end_assistant"), kind="end")
        for i, m in enumerate(messages):
            if m["role"] in ("assistant", "function") and not m["content"].strip():
                col = cols.get("response") if entry.formatting == "alpaca" else cols.get("messages")
                raise _RowError(col, message("data.empty_response", turn=i + 1), kind="empty")
    return out


def _images(value: Any, column: str, messages: list[dict]) -> list[str]:
    """A row's images column (LF's: a path or URL, or a list of them) as a list, checked against the ``<image>``
    placeholders of its messages (LF pairs them in order; a count that differs is refused, naming both; with no
    placeholder at all, LF puts every image before the first user message's text, and so do we)."""
    refs = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(refs, list) or not all(isinstance(r, str) and r.strip() for r in refs):
        raise _RowError(column, message("data.images_not_list", type=type(value).__name__), kind="images_type")
    count = sum(str(m.get("content", "")).count("<image>") for m in messages)
    first_user = next((m for m in messages if m["role"] == "user"), None)
    if count == 0 and refs and first_user is not None:  # LF's rule: no placeholder at all, all images go first
        first_user["content"] = "<image>" * len(refs) + first_user["content"]
    elif count != len(refs):
        raise _RowError(column, message("data.image_count", placeholders=count, images=len(refs)), kind="image_count")
    return list(refs)


def _kto_tag(value: Any, column: str) -> bool | None:
    """A row's kto tag: true (a desirable answer), false (undesirable) or None (no tag: the row is left out of kto
    training, as LLaMA-Factory drops it). JSON booleans only: "yes", 1 or "false" are refused, naming the row."""
    if value is None or isinstance(value, bool):
        return value
    plain = isinstance(value, (str, int, float))
    shown = json.dumps(value, ensure_ascii=False)[:40] if plain else type(value).__name__
    raise _RowError(column, message("data.kto_tag_not_bool", value=shown), kind="kto_tag")


def kto_counts(rows: list[dict]) -> dict[str, int]:
    """Canonical kto rows counted: desirable (tag true), undesirable (false) and untagged (left out of training)."""
    tags = [r.get("kto_tag") for r in rows]
    return {
        "desirable": sum(1 for t in tags if t is True),
        "undesirable": sum(1 for t in tags if t is False),
        "untagged": sum(1 for t in tags if t is None),
    }


def _sharegpt_messages(turns: Any, entry: DatasetEntry, system: str) -> tuple[str, list[dict]]:
    t = entry.tags
    col = entry.columns.get("messages")
    if not isinstance(turns, list):
        raise _RowError(col, message("data.turns_not_list", type=type(turns).__name__))
    roles = {
        t["user_tag"]: "user",
        t["observation_tag"]: "observation",  # a tool result: on the user's side, rendered by the template's
        t["assistant_tag"]: "assistant",  # observation format
        t["function_tag"]: "function",  # a tool call (JSON): on the answer side, trained
        t["system_tag"]: "system",
    }
    messages: list[dict] = []
    for i, turn in enumerate(turns, 1):
        if not isinstance(turn, dict) or t["role_tag"] not in turn or t["content_tag"] not in turn:
            raise _RowError(
                col,
                message("data.turn_keys", turn=i, role_tag=t["role_tag"], content_tag=t["content_tag"]),
                kind="turn-keys",
            )
        tag, content = turn[t["role_tag"]], str(turn[t["content_tag"]] or "")
        role = roles.get(tag)
        if role is None:
            known = ", ".join(map(str, roles))
            raise _RowError(col, message("data.turn_role", turn=i, tag=tag, known=known), kind="role")
        if role == "system":
            if i != 1:
                raise _RowError(col, message("data.system_first", turn=i), kind="order")
            system = content
            continue
        want = "user" if len(messages) % 2 == 0 else "assistant"
        if _SIDE[role] != want:
            tag_want = t["user_tag"] if want == "user" else t["assistant_tag"]
            raise _RowError(
                col,
                message(
                    "data.turn_order", turn=i, tag=tag, want=tag_want, user=t["user_tag"], assistant=t["assistant_tag"]
                ),
                kind="order",
            )
        if role == "function" and not _is_call(content):
            raise _RowError(col, message("template.bad_call"), kind="call")
        messages.append({"role": role, "content": content})
    return system, messages


_SIDE = {"user": "user", "observation": "user", "assistant": "assistant", "function": "assistant"}


def _is_call(content: str) -> bool:
    try:
        data = json.loads(content)
    except ValueError:
        return False
    items = data if isinstance(data, list) else [data]
    return bool(items) and all(isinstance(c, dict) and "name" in c and "arguments" in c for c in items)


def _tools_text(tools: Any, column: str | None) -> str:
    """The tools column as JSON text (LF takes a JSON string; a list or object from JSON files is dumped)."""
    if isinstance(tools, str):
        try:
            parsed = json.loads(tools) if tools.strip() else []
        except ValueError:
            parsed = None
    else:
        parsed, tools = tools, json.dumps(tools, ensure_ascii=False)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list) or not all(isinstance(t, dict) for t in parsed):
        raise _RowError(column, message("template.bad_tools"), kind="tools")
    return tools if parsed else ""
