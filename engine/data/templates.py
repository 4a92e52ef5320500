"""Chat templates: render a conversation into (prompt, response) text segments per assistant turn.

Light: stdlib + jinja2; never torch/transformers, so the UI can show masked samples and length histograms
(engine.data.masked_samples). The trainer (engine/trainer/dataset.py) uses the same functions, so what the page
shows is what is trained. The named templates are a table of their own (engine.data.template_table: ``Template``,
``NAMED``, ``TEMPLATE_NAMES``, ``TemplateError``), LF's tool formats another (engine.data.template_tools); this
module renders with them and checks a template against a tokenizer (fit warnings, the template to preselect).
``Template`` and ``TemplateError``, which it uses, are still imported from here by engine.trainer.dataset.

Templates: ``auto`` is the tokenizer's own chat template (rendered with jinja2 configured as transformers does:
sandboxed, trim_blocks, lstrip_blocks; tools and tool calls passed as transformers does), or ``default`` when it has
none. Named ones are LLaMA-Factory's, rendered as LF 0.9.5 renders them: {bos}/{eos} where LF writes the tokenizer's
tokens, LF's Llama2Template folding of the system into the first user turn, reasoning templates (qwen3, deepseekr1:
an empty thought before answers without one, trained, as LF's default enable_thinking=True; data.enable_thinking
false removes thoughts and puts the empty one in the prompt), efficient_eos (glm4), stop words, and LF's tool formats
for function/observation turns (data.tool_format replaces the template's own, as LF's tool_format does).
Segments of ``auto`` come from rendering prefixes of the conversation, so labels can mask every prompt and train
every answer.

A conversation is the canonical row of engine.data.dataset_registry: {"system": str, "messages": [{role, content}],
"tools"?: str}; roles user, assistant, function (a tool call: JSON) and observation (a tool result).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.messages import message as data_message
from engine.data.template_table import NAMED, TEMPLATE_NAMES, THOUGHT, Template, TemplateError
from engine.data.template_tools import (
    function_text,
    parse_calls,
    tool_schemas,
    tools_text,
    with_tool_format,
    wrap_tool,
)


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
def _jinja_render(
    source: str, messages: list[dict], add_generation_prompt: bool, special: dict[str, str], tools: Any = None
) -> str:
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
    extra = {"tools": tools} if tools else {}
    return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt, **extra, **special)


_jinja_env_cache: dict[str, Any] = {}


def _as_messages(system: str, messages: list[dict]) -> list[dict]:
    """Our canonical messages in the form chat templates expect (transformers' conventions): a tool call is an
    assistant message with ``tool_calls``, a tool result a ``tool`` message."""
    out = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m["role"] == "function":
            calls = [
                {"type": "function", "function": {"name": n, "arguments": a}} for n, a in parse_calls(m["content"])
            ]
            out.append({"role": "assistant", "content": "", "tool_calls": calls})
        elif m["role"] == "observation":
            out.append({"role": "tool", "content": m["content"]})
        else:
            out.append(m)
    return out


_ANSWER_ROLES = ("assistant", "function")  # the turns a model writes (trained)


def resolve(name: str, info: TokenizerInfo) -> Template | str:
    """A named Template, or the chat-template source string for ``auto`` on a tokenizer that has one."""
    if name == "auto":
        return info.chat_template or NAMED["default"]
    if name not in NAMED:
        raise TemplateError(data_message("template.unknown", name=name, names=", ".join(TEMPLATE_NAMES)))
    return NAMED[name]


def template_problem(name: str) -> Any:
    """The message for a template name Studio does not know (None when it knows it): for checks before a run."""
    return (
        None
        if name in TEMPLATE_NAMES
        else data_message("template.unknown", name=name, names=", ".join(TEMPLATE_NAMES))
    )


def conversation_segments(
    name: str,
    info: TokenizerInfo,
    system: str,
    messages: list[dict],
    tools: Any = None,
    *,
    enable_thinking: bool = True,
    tool_format: str | None = None,
    mask_history: bool = False,
) -> list[tuple[str, str]]:
    """[(prompt text, response text)] per answer turn; the concatenation is the whole rendered conversation.

    ``messages`` alternate user-side (user, observation) and answer (assistant, function) turns and end with an
    answer (checked by the dataset registry). ``tools``: the row's tools column (a JSON list, or its text).
    ``enable_thinking`` is LF's data argument of the same name for reasoning templates (True: an answer without a
    thought gets an empty one, trained; False: thoughts are removed and the empty one goes into the prompt).
    ``tool_format`` (LF's data argument) replaces the named template's own tool format (default, qwen, llama3,
    glm4, mistral); None keeps it. ``mask_history``: as in ``conversation_pieces``.
    """
    pieces = conversation_pieces(
        name,
        info,
        system,
        messages,
        tools,
        enable_thinking=enable_thinking,
        tool_format=tool_format,
        mask_history=mask_history,
    )
    return [("".join(prompt), "".join(response)) for prompt, response in pieces]


def conversation_pieces(
    name: str,
    info: TokenizerInfo,
    system: str,
    messages: list[dict],
    tools: Any = None,
    *,
    enable_thinking: bool = True,
    tool_format: str | None = None,
    mask_history: bool = False,
) -> list[tuple[list[str], list[str]]]:
    """``conversation_segments`` as LF tokenises it: per answer turn, the prompt's and the response's texts that are
    each tokenised on their own (their ids concatenated). For a named template these are LF's elements: every message
    apart, and within one the prefix, the system and the turn's slot, each slot cut at the tokenizer's {bos}/{eos}
    (LF's special-token slots), the empty thought apart, an efficient-EOS template's final EOS last. A BPE tokenizer
    gives other ids for a text tokenised whole ("...request.\\n\\n" + "### Instruction:" merges the newlines
    differently). ``auto`` (a chat template): one text per prompt and per response. ``mask_history`` (LF's, only the
    last answer trained): a reasoning template drops the earlier answers' thoughts and gives only the last answer the
    empty thought, as LF does then (its discarding_history_cot)."""
    tmpl = with_tool_format(resolve(name, info), tool_format)
    if isinstance(tmpl, str):
        return [([p], [r]) for p, r in _chat_template_segments(tmpl, info, system, messages, tools)]
    return _lf_pieces(tmpl, info, system, messages, tools, enable_thinking=enable_thinking, last_only=mask_history)


def _tokens(tmpl: Template, info: TokenizerInfo) -> dict[str, str]:
    eos = tmpl.stop_words[0] if tmpl.replace_eos and tmpl.stop_words else info.eos
    return {"{bos}": info.special.get("bos_token", ""), "{eos}": eos}


def _fill(slot: str, content: str, tokens: dict[str, str]) -> str:
    return "".join(_elements(slot, content, tokens))


_TOKEN_SLOT = re.compile(r"(\{bos\}|\{eos\})")


def _elements(slot: str, content: str, tokens: dict[str, str]) -> list[str]:
    """A slot as LF's formatter gives it: the texts between its {bos}/{eos} and those tokens' texts (an absent token
    left out), {content} filled once; empty texts left out, as LF skips them."""
    out: list[str] = []
    filled = False
    for part in _TOKEN_SLOT.split(slot):
        if part in tokens:
            part = tokens[part]
        elif not filled and "{content}" in part:
            part, filled = part.replace("{content}", content, 1), True
        out.append(part)
    return [p for p in out if p]


_EMPTY_THOUGHT = THOUGHT[0] + THOUGHT[1]


def _has_thought(content: str) -> bool:
    return THOUGHT[0].strip() in content or THOUGHT[1].strip() in content


def _strip_thought(content: str) -> str:
    return re.sub(re.escape(THOUGHT[0]) + "(.*?)" + re.escape(THOUGHT[1]), "", content, flags=re.DOTALL).lstrip("\n")


def _lf_segments(
    tmpl: Template,
    info: TokenizerInfo,
    system: str,
    messages: list[dict],
    tools: Any,
    *,
    enable_thinking: bool = True,
    last_only: bool = False,
) -> list[tuple[str, str]]:
    pieces = _lf_pieces(tmpl, info, system, messages, tools, enable_thinking=enable_thinking, last_only=last_only)
    return [("".join(prompt), "".join(response)) for prompt, response in pieces]


def _lf_pieces(
    tmpl: Template,
    info: TokenizerInfo,
    system: str,
    messages: list[dict],
    tools: Any,
    *,
    enable_thinking: bool = True,
    last_only: bool = False,
) -> list[tuple[list[str], list[str]]]:
    """LF's encoding: prefix and system (+ tools) with the first turn, each turn through its formatter, in LF's
    elements (see ``conversation_pieces``). ``last_only``: LF's one-turn encoding (DPO prompts): earlier answers
    lose their thoughts and only the last answer gets the empty-thought rule."""
    tok = _tokens(tmpl, info)
    system = system or tmpl.default_system
    tool_text = tools_text(tmpl.tool_format, tool_schemas(tools)) if tools else ""
    last_answer = max((i for i, m in enumerate(messages) if m["role"] in _ANSWER_ROLES), default=-1)
    segs: list[tuple[list[str], list[str]]] = []
    prompt: list[str] = []
    for i, msg in enumerate(messages):
        role, content = msg["role"], msg["content"]
        if i == 0:
            prompt += _elements(tmpl.prefix, "", tok)
            if system or tool_text:
                if tmpl.system_in_user:  # LF's Llama2Template: the system's first element leads the user text
                    content = (_elements(tmpl.system, system + tool_text, tok) or [""])[0] + content
                else:
                    prompt += _elements(tmpl.system, system + tool_text, tok)
        if role == "user":
            prompt += _elements(tmpl.user, content, tok)
        elif role == "observation":
            prompt += _elements(tmpl.observation or tmpl.user, content, tok)
        elif role in _ANSWER_ROLES:
            thought: list[str] = []
            if tmpl.reasoning:
                if last_only and i != last_answer:
                    content = _strip_thought(content)
                else:
                    if not enable_thinking:
                        content = _strip_thought(content)
                    if not _has_thought(content):
                        if enable_thinking:
                            thought = [_EMPTY_THOUGHT]
                        else:
                            prompt.append(_EMPTY_THOUGHT)
            if role == "function":
                text = function_text(tmpl, content)
                response = _elements(tmpl.function if tmpl.function is not None else tmpl.assistant, text, tok)
            else:
                response = _elements(tmpl.assistant, content, tok)
            segs.append((prompt, thought + response))
            prompt = []
        else:
            raise TemplateError(data_message("template.role", role=role))
    if tmpl.efficient_eos and segs and info.eos:
        segs[-1][1].append(info.eos)
    return segs


def _chat_template_segments(source: str, info: TokenizerInfo, system: str, messages: list[dict], tools: Any = None):
    tool_list = tool_schemas(tools) if tools else []
    if tool_list and "tools" not in source:
        raise TemplateError(data_message("template.no_tool_support"))
    wrapped = [wrap_tool(t) for t in tool_list] or None
    full = _as_messages(system, messages)
    offset = 1 if system else 0
    segs: list[tuple[str, str]] = []
    done = ""
    for i, msg in enumerate(messages):
        if msg["role"] not in _ANSWER_ROLES:
            continue
        with_prompt = _jinja_render(source, full[: offset + i], True, info.special, wrapped)
        with_answer = _jinja_render(source, full[: offset + i + 1], False, info.special, wrapped)
        if not with_prompt.startswith(done) or not with_answer.startswith(with_prompt):
            raise TemplateError(data_message("template.not_prefix_stable"))
        segs.append((with_prompt[len(done) :], with_answer[len(with_prompt) :]))
        done = with_answer
    return segs


def prompt_text(
    name: str,
    info: TokenizerInfo,
    system: str,
    messages: list[dict],
    tools: Any = None,
    tool_format: str | None = None,
) -> str:
    """The prompt up to and including the assistant header for the next turn (DPO prompts, generation)."""
    tmpl = with_tool_format(resolve(name, info), tool_format)
    if isinstance(tmpl, str):
        wrapped = [wrap_tool(t) for t in tool_schemas(tools)] if tools else None
        return _jinja_render(tmpl, _as_messages(system, messages), True, info.special, wrapped)
    probe = [*messages, {"role": "assistant", "content": _PROBE}]
    segs = _lf_segments(tmpl, info, system, probe, tools, last_only=True)
    return "".join(p + r for p, r in segs[:-1]) + segs[-1][0]


_PROBE = "<think>\n</think>"  # an answer with a thought, so the empty-thought rule adds nothing to the prompt


def assistant_text(name: str, info: TokenizerInfo, content: str) -> str:
    """An assistant answer with its end-of-turn marker, as the template writes it (DPO chosen/rejected)."""
    tmpl = resolve(name, info)
    if isinstance(tmpl, str):
        probe = [{"role": "user", "content": "x"}]
        head = _jinja_render(tmpl, probe, True, info.special)
        whole = _jinja_render(tmpl, [*probe, {"role": "assistant", "content": content}], False, info.special)
        return whole[len(head) :] if whole.startswith(head) else content + info.eos
    return _lf_segments(
        tmpl, info, "", [{"role": "user", "content": ""}, {"role": "assistant", "content": content}], None
    )[-1][1]


def stop_words(name: str, info: TokenizerInfo) -> list[str]:
    """The texts that end an answer for this template (generation): the EOS and LF's stop words."""
    tmpl = resolve(name, info)
    words = [] if isinstance(tmpl, str) else list(tmpl.stop_words)
    return [
        w
        for w in dict.fromkeys([_tokens(tmpl, info)["{eos}"] if not isinstance(tmpl, str) else info.eos, *words])
        if w
    ]


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
    if info.chat_template:
        return differs_from_tokenizer(name, info)
    return None


_PROBE_CONVERSATIONS = [
    ("", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]),
    (
        "You are a bot.",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
        ],
    ),
]


def differs_from_tokenizer(name: str, info: TokenizerInfo) -> str | None:
    """None when the named template renders like the tokenizer's own chat template (the name then stands for the
    model's template), else a note saying where they part: training follows the name, as LLaMA-Factory does."""
    if name == "auto" or not info.chat_template or name not in NAMED:
        return None
    for system, messages in _PROBE_CONVERSATIONS:
        ours = "".join(p + r for p, r in conversation_segments(name, info, system, messages))
        try:
            theirs = _jinja_render(info.chat_template, _as_messages(system, messages), False, info.special)
        except Exception as exc:  # noqa: BLE001 - any template failure is a difference worth naming
            theirs = f"<error: {exc}>"
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            return (
                f"the model ships its own chat template, which renders differently from {name} (from character {at}: "
                f"{name} writes {ours[at : at + 40]!r}, the model's template {theirs[at : at + 40]!r}). Training "
                f"follows {name}, as LLaMA-Factory does; choose 'auto' to train with the model's own template."
            )
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
