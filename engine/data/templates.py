"""Chat templates: render a conversation into (prompt, response) text segments per assistant turn.

Light: stdlib + jinja2 (+ the ``tokenizers`` library, only inside ``token_lengths``); never torch/transformers,
so the UI can show masked samples and length histograms. The trainer (engine/trainer/dataset.py) uses the same
functions, so what the page shows is what is trained.

Templates: ``auto`` is the tokenizer's own chat template (rendered with jinja2 configured as transformers does:
sandboxed, trim_blocks, lstrip_blocks), or ``default`` when it has none; named ones are llama3, chatml, qwen,
mistral, gemma, alpaca, default, empty. Segments come from rendering prefixes of the conversation, so labels can
mask every prompt and train every assistant turn.

A conversation is the canonical row of engine.data.registry: {"system": str, "messages": [{role, content}]}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.messages import message as data_message


class TemplateError(ValueError):
    """A template that cannot render this conversation, or an unknown template name."""


@dataclass(frozen=True)
class Template:
    name: str
    user: str  # user turn + the assistant header that follows it; {content}
    assistant: str  # assistant content + end of turn; {content}, {eos}
    system: str = "{content}"
    prefix: str = ""  # once at the very start (e.g. a BOS token)
    default_system: str = ""
    system_in_user: bool = False  # families without a system role prepend it to the first user turn
    markers: tuple[str, ...] = ()  # special tokens the template relies on (fit check)


NAMED: dict[str, Template] = {
    "llama3": Template(
        "llama3",
        user="<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        assistant="{content}<|eot_id|>",
        system="<|start_header_id|>system<|end_header_id|>\n\n{content}<|eot_id|>",
        prefix="<|begin_of_text|>",
        markers=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    ),
    "chatml": Template(
        "chatml",
        user="<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n",
        assistant="{content}<|im_end|>\n",
        system="<|im_start|>system\n{content}<|im_end|>\n",
        markers=("<|im_start|>", "<|im_end|>"),
    ),
    "qwen": Template(
        "qwen",
        user="<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n",
        assistant="{content}<|im_end|>\n",
        system="<|im_start|>system\n{content}<|im_end|>\n",
        default_system="You are a helpful assistant.",
        markers=("<|im_start|>", "<|im_end|>"),
    ),
    "mistral": Template(
        "mistral",
        user="[INST] {content} [/INST]",
        assistant="{content}</s>",
        prefix="<s>",
        system_in_user=True,
        markers=("</s>",),
    ),
    "gemma": Template(
        "gemma",
        user="<start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n",
        assistant="{content}<end_of_turn>\n",
        prefix="<bos>",
        system_in_user=True,
        markers=("<start_of_turn>", "<end_of_turn>"),
    ),
    "alpaca": Template(
        "alpaca",
        user="### Instruction:\n{content}\n\n### Response:\n",
        assistant="{content}{eos}\n\n",
        system="{content}\n\n",
        default_system="Below is an instruction that describes a task. Write a response that appropriately "
        "completes the request.",
    ),
    "default": Template(
        "default", user="Human: {content}\nAssistant: ", assistant="{content}{eos}\n", system="System: {content}\n"
    ),
    "empty": Template("empty", user="{content}", assistant="{content}{eos}", system="{content}\n"),
}
TEMPLATE_NAMES = ["auto", *NAMED]


@dataclass
class TokenizerInfo:
    """What templates need from a tokenizer, readable without transformers."""

    chat_template: str | None = None
    special: dict[str, str] = field(default_factory=dict)  # bos_token, eos_token, pad_token, unk_token
    vocab: set[str] = field(default_factory=set)

    @property
    def eos(self) -> str:
        return self.special.get("eos_token", "")


def tokenizer_info(tokenizer: Any) -> TokenizerInfo:
    """From a transformers tokenizer (duck-typed), a model folder, or None (no tokenizer: plain default)."""
    if tokenizer is None:
        return TokenizerInfo()
    if isinstance(tokenizer, (str, Path)):
        return _info_from_dir(Path(tokenizer))
    tmpl = getattr(tokenizer, "chat_template", None)
    if isinstance(tmpl, dict):
        tmpl = tmpl.get("default")
    special = {k: getattr(tokenizer, k, None) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    return TokenizerInfo(tmpl or None, {k: str(v) for k, v in special.items() if v}, set(tokenizer.get_vocab()))


def _info_from_dir(path: Path) -> TokenizerInfo:
    cfg = _read_json(path / "tokenizer_config.json") or {}
    tmpl = cfg.get("chat_template")
    if (path / "chat_template.jinja").is_file():
        tmpl = (path / "chat_template.jinja").read_text(encoding="utf-8")
    if isinstance(tmpl, list):  # [{"name": "default", "template": ...}, ...]
        tmpl = next((t.get("template") for t in tmpl if t.get("name") == "default"), None)
    special = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        val = cfg.get(key)
        if isinstance(val, dict):
            val = val.get("content")
        if val:
            special[key] = str(val)
    vocab: set[str] = set()
    tok_json = _read_json(path / "tokenizer.json") or {}
    vocab |= {t.get("content", "") for t in tok_json.get("added_tokens", [])}
    model_vocab = (tok_json.get("model") or {}).get("vocab")
    if isinstance(model_vocab, dict):
        vocab |= set(model_vocab)
    return TokenizerInfo(tmpl or None, special, vocab)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------------------------- rendering
def _jinja_render(source: str, messages: list[dict], add_generation_prompt: bool, special: dict[str, str]) -> str:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(data_message("template.refused", message=message))

    env = _jinja_env_cache.get("env")
    if env is None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
        env.globals["raise_exception"] = raise_exception
        _jinja_env_cache["env"] = env
    compiled = _jinja_env_cache.get(source)
    if compiled is None:
        compiled = _jinja_env_cache[source] = env.from_string(source)
    return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt, **special)


_jinja_env_cache: dict[str, Any] = {}


def _as_messages(system: str, messages: list[dict]) -> list[dict]:
    return ([{"role": "system", "content": system}] if system else []) + list(messages)


def resolve(name: str, info: TokenizerInfo) -> Template | str:
    """A named Template, or the chat-template source string for ``auto`` on a tokenizer that has one."""
    if name == "auto":
        return info.chat_template or NAMED["default"]
    if name not in NAMED:
        raise TemplateError(data_message("template.unknown", name=name, names=", ".join(TEMPLATE_NAMES)))
    return NAMED[name]


def conversation_segments(name: str, info: TokenizerInfo, system: str, messages: list[dict]) -> list[tuple[str, str]]:
    """[(prompt text, response text)] per assistant turn; the concatenation is the whole rendered conversation.

    ``messages`` alternate user/assistant and end with an assistant turn (checked by the dataset registry).
    """
    tmpl = resolve(name, info)
    if isinstance(tmpl, str):
        return _chat_template_segments(tmpl, info, system, messages)
    segs: list[tuple[str, str]] = []
    system = system or tmpl.default_system
    prompt = tmpl.prefix
    if system and not tmpl.system_in_user:
        prompt += tmpl.system.format(content=system)
    for i, msg in enumerate(messages):
        if msg["role"] == "user":
            content = msg["content"]
            if i == 0 and system and tmpl.system_in_user:
                content = f"{system}\n\n{content}"
            prompt += tmpl.user.format(content=content)
        elif msg["role"] == "assistant":
            segs.append((prompt, tmpl.assistant.format(content=msg["content"], eos=info.eos)))
            prompt = ""
    return segs


def _chat_template_segments(source: str, info: TokenizerInfo, system: str, messages: list[dict]):
    full = _as_messages(system, messages)
    offset = 1 if system else 0
    segs: list[tuple[str, str]] = []
    done = ""
    for i, msg in enumerate(messages):
        if msg["role"] != "assistant":
            continue
        with_prompt = _jinja_render(source, full[: offset + i], True, info.special)
        with_answer = _jinja_render(source, full[: offset + i + 1], False, info.special)
        if not with_prompt.startswith(done) or not with_answer.startswith(with_prompt):
            raise TemplateError(data_message("template.not_prefix_stable"))
        segs.append((with_prompt[len(done) :], with_answer[len(with_prompt) :]))
        done = with_answer
    return segs


def prompt_text(name: str, info: TokenizerInfo, system: str, messages: list[dict]) -> str:
    """The prompt up to and including the assistant header for the next turn (DPO prompts, generation)."""
    tmpl = resolve(name, info)
    if isinstance(tmpl, str):
        return _jinja_render(tmpl, _as_messages(system, messages), True, info.special)
    segs = conversation_segments(name, info, system, [*messages, {"role": "assistant", "content": ""}])
    return "".join(p + r for p, r in segs[:-1]) + segs[-1][0]


def assistant_text(name: str, info: TokenizerInfo, content: str) -> str:
    """An assistant answer with its end-of-turn marker, as the template writes it (DPO chosen/rejected)."""
    tmpl = resolve(name, info)
    if isinstance(tmpl, str):
        probe = [{"role": "user", "content": "x"}]
        head = _jinja_render(tmpl, probe, True, info.special)
        whole = _jinja_render(tmpl, [*probe, {"role": "assistant", "content": content}], False, info.special)
        return whole[len(head) :] if whole.startswith(head) else content + info.eos
    return tmpl.assistant.format(content=content, eos=info.eos)


def pretrain_text(row: dict, info: TokenizerInfo) -> str:
    """The text trained in stage pt: the row's text, or its conversation's contents joined; ends with EOS."""
    text = row.get("text")
    if text is None:
        parts = [row.get("system") or ""] + [m["content"] for m in row.get("messages", [])]
        text = "\n".join(p for p in parts if p)
    return text + info.eos


# ----------------------------------------------------------------------------------------------- checks
def template_warning(name: str, info: TokenizerInfo) -> str | None:
    """A warning when the chosen template does not fit the tokenizer, else None."""
    if name == "auto":
        return None if info.chat_template else "the tokenizer has no chat template: 'auto' uses the default template"
    tmpl = NAMED.get(name)
    if tmpl is None:
        return f"unknown template {name!r}"
    missing = [m for m in tmpl.markers if info.vocab and m not in info.vocab]
    if missing:
        better = sorted({"auto", suggest_from_info(info, {})})
        return (
            f"template {name} relies on {', '.join(missing)}, which the tokenizer does not have as a token: "
            f"the model will read them as plain text. Use {' or '.join(repr(b) for b in better)}."
        )
    if info.chat_template and tmpl.markers and not all(m in info.chat_template for m in tmpl.markers):
        return f"the model ships its own chat template, which differs from {name}: consider 'auto'"
    return None


def suggest_from_info(info: TokenizerInfo, config: dict) -> str:
    if info.chat_template:
        return "auto"
    mtype = str(config.get("model_type", ""))
    if "<|start_header_id|>" in info.vocab:
        return "llama3"
    if "<|im_start|>" in info.vocab:
        return "qwen" if mtype.startswith("qwen") else "chatml"
    if "<start_of_turn>" in info.vocab or mtype.startswith("gemma"):
        return "gemma"
    if mtype in ("mistral", "mixtral"):
        return "mistral"
    return "default"


def suggest_template(model_dir: str | Path) -> str:
    """The template to preselect for a local model folder (``auto`` when it ships a chat template)."""
    path = Path(model_dir).expanduser()
    return suggest_from_info(_info_from_dir(path), _read_json(path / "config.json") or {})


# ----------------------------------------------------------------------------------------------- preview
def _settings(spec_or_template: Any) -> tuple[str, bool, str]:
    if isinstance(spec_or_template, str):
        return spec_or_template, False, "sft"
    d = spec_or_template.data
    return d.template, d.train_on_prompt, spec_or_template.method.stage


def render_sample(
    spec_or_template: Any, tokenizer: Any, row: dict, stage: str | None = None
) -> list[tuple[str, bool]]:
    """A canonical row as [(text, trained)] pieces, for the page's coloured masked-sample view. ``stage`` (sft, pt,
    dpo) replaces the spec's, or the default sft when only a template name is given."""
    name, train_on_prompt, spec_stage = _settings(spec_or_template)
    stage = stage or spec_stage
    info = tokenizer if isinstance(tokenizer, TokenizerInfo) else tokenizer_info(tokenizer)
    if stage == "pt":
        return [(pretrain_text(row, info), True)]
    if stage == "dpo" or "chosen" in row:
        prompt = prompt_text(name, info, row.get("system", ""), row["messages"])
        return [(prompt, False), (assistant_text(name, info, row.get("chosen", "")), True)]
    pieces: list[tuple[str, bool]] = []
    for prompt, response in conversation_segments(name, info, row.get("system", ""), row["messages"]):
        pieces += [(prompt, train_on_prompt), (response, True)]
    return pieces


def token_lengths(spec_or_template: Any, tokenizer: Any, rows: list[dict], stage: str | None = None) -> list[int]:
    """Tokens per canonical row before truncation (for the length histogram): the text the stage trains on (pt:
    the whole text with its EOS). ``tokenizer``: object or folder; ``stage`` as in ``render_sample``."""
    if isinstance(tokenizer, (str, Path)):
        from tokenizers import Tokenizer

        raw = Tokenizer.from_file(str(Path(tokenizer) / "tokenizer.json"))
        info = _info_from_dir(Path(tokenizer))

        def count(text: str) -> int:
            return len(raw.encode(text, add_special_tokens=False).ids)
    else:
        info = tokenizer_info(tokenizer)

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False))

    return [sum(count(t) for t, _ in render_sample(spec_or_template, info, row, stage) if t) for row in rows]
