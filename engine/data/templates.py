"""Chat templates: render a conversation into (prompt, response) text segments per assistant turn.

Light: stdlib + jinja2 (+ the ``tokenizers`` library, only inside ``token_lengths``); never torch/transformers,
so the UI can show masked samples and length histograms. The trainer (engine/trainer/dataset.py) uses the same
functions, so what the page shows is what is trained.

Templates: ``auto`` is the tokenizer's own chat template (rendered with jinja2 configured as transformers does:
sandboxed, trim_blocks, lstrip_blocks; tools and tool calls passed as transformers does), or ``default`` when it has
none. Named ones are LLaMA-Factory's, rendered as LF 0.9.5 renders them: {bos}/{eos} where LF writes the tokenizer's
tokens, LF's Llama2Template folding of the system into the first user turn, reasoning templates (qwen3, deepseekr1:
an empty thought before answers without one, trained, as LF's default enable_thinking=True; data.enable_thinking
false removes thoughts and puts the empty one in the prompt), efficient_eos (glm4), stop words, and LF's tool formats
for function/observation turns (data.tool_format replaces the template's own, as LF's tool_format does).
Segments of ``auto`` come from rendering prefixes of the conversation, so labels can mask every prompt and train
every answer.

A conversation is the canonical row of engine.data.registry: {"system": str, "messages": [{role, content}],
"tools"?: str}; roles user, assistant, function (a tool call: JSON) and observation (a tool result).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.data.messages import message as data_message


class TemplateError(ValueError):
    """A template that cannot render this conversation, or an unknown template name."""


THOUGHT = ("<think>\n", "\n</think>\n\n")  # LF's thought words; the empty thought is their concatenation
TOOL_CALL = ("<tool_call>", "</tool_call>")


@dataclass(frozen=True)
class Template:
    """A named template with LLaMA-Factory's semantics. Strings take ``{content}`` and the tokenizer's ``{bos}`` /
    ``{eos}`` (empty when the tokenizer has none; ``{eos}`` is ``stop_words[0]`` when ``replace_eos``)."""

    name: str
    user: str  # user turn + the assistant header that follows it
    assistant: str = "{content}{eos}"  # assistant content + end of turn
    system: str = "{content}"  # LF's default system formatter: the text as it is
    prefix: str = ""  # once at the very start (e.g. {bos})
    default_system: str = ""  # used when a row has no system text
    system_in_user: bool = False  # LF's Llama2Template: the formatted system is prepended to the first user turn
    observation: str | None = None  # a tool result (sharegpt observation); None: as a user turn
    function: str | None = None  # a tool call (sharegpt function_call); None: as an assistant turn
    tool_format: str = "default"  # how tools are described and calls written (see _TOOL_FORMATS)
    reasoning: bool = False  # LF's ReasoningTemplate: an empty <think> block before answers that have none
    efficient_eos: bool = False  # no EOS per turn: one EOS after the last answer, taught at each next prompt
    stop_words: tuple[str, ...] = ()
    replace_eos: bool = False  # LF makes stop_words[0] the tokenizer's EOS
    markers: tuple[str, ...] = ()  # special tokens the template relies on (fit check)


_IM = "<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
_IM_SYS = "<|im_start|>system\n{content}<|im_end|>\n"
_IM_END = "{content}<|im_end|>\n"
_IM_MARKS = ("<|im_start|>", "<|im_end|>")
_QWEN_OBS = "<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
_L3 = "<|start_header_id|>{role}<|end_header_id|>\n\n"
_L4 = "<|header_start|>{role}<|header_end|>\n\n"
_GEMMA = "<start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n"
_DS = "<\uff5cUser\uff5c>{content}<\uff5cAssistant\uff5c>"
_COHERE = "<|START_OF_TURN_TOKEN|>"
_VICUNA_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions."
)
_INTERN_SYSTEM = (
    "You are an AI assistant whose name is InternLM (\u4e66\u751f\u00b7\u6d66\u8bed).\n"
    "- InternLM (\u4e66\u751f\u00b7\u6d66\u8bed) is a conversational language model that is developed by "
    "Shanghai AI Laboratory (\u4e0a\u6d77\u4eba\u5de5\u667a\u80fd\u5b9e\u9a8c\u5ba4). It is designed to be "
    "helpful, honest, and harmless.\n"
    "- InternLM (\u4e66\u751f\u00b7\u6d66\u8bed) can understand and communicate fluently in the language "
    "chosen by the user such as English and \u4e2d\u6587."
)


def _qwen_family(name: str, default_system: str = "", reasoning: bool = False) -> Template:
    return Template(
        name,
        user=_IM,
        assistant=_IM_END,
        system=_IM_SYS,
        default_system=default_system,
        observation=_QWEN_OBS,
        function=_IM_END,
        tool_format="qwen",
        reasoning=reasoning,
        stop_words=("<|im_end|>",),
        replace_eos=True,
        markers=_IM_MARKS,
    )


def _llama3_family(name: str, head: str, eot: str, eom: str) -> Template:
    return Template(
        name,
        user=head.format(role="user") + "{content}" + eot + head.format(role="assistant"),
        assistant="{content}" + eot,
        system=head.format(role="system") + "{content}" + eot,
        prefix="{bos}",
        observation=head.format(role="ipython") + "{content}" + eot + head.format(role="assistant"),
        function="{content}" + eot,
        tool_format="llama3",
        stop_words=(eot, eom),
        replace_eos=True,
        markers=(head.split("{")[0], eot),
    )


def _gemma_family(
    name: str, efficient_eos: bool = False, stop_words: tuple[str, ...] = ("<end_of_turn>",)
) -> Template:
    return Template(
        name,
        user=_GEMMA,
        assistant="{content}<end_of_turn>\n",
        system="{content}\n\n",
        prefix="{bos}",
        system_in_user=True,
        observation="<start_of_turn>tool\n{content}<end_of_turn>\n<start_of_turn>model\n",
        function="{content}<end_of_turn>\n",
        efficient_eos=efficient_eos,
        stop_words=stop_words,
        replace_eos=not efficient_eos,
        markers=("<start_of_turn>", "<end_of_turn>"),
    )


def _deepseek3(name: str, reasoning: bool = False) -> Template:
    return Template(name, user=_DS, prefix="{bos}", reasoning=reasoning, markers=("<\uff5cUser\uff5c>",))


def _chatml_like(name: str, prefix: str = "", default_system: str = "", replace_eos: bool = False) -> Template:
    return Template(
        name,
        user=_IM,
        assistant=_IM_END,
        system=_IM_SYS,
        prefix=prefix,
        default_system=default_system,
        function=_IM_END,
        stop_words=("<|im_end|>",),
        replace_eos=replace_eos,
        markers=_IM_MARKS,
    )


# Every template name LLaMA-Factory's examples and README use for text models, with LF's strings and behaviour
# (LF 0.9.5's template definitions; tests/engine/test_lf_templates.py holds the renderings they must give).
NAMED: dict[str, Template] = {
    "llama3": _llama3_family("llama3", _L3, "<|eot_id|>", "<|eom_id|>"),
    "llama4": _llama3_family("llama4", _L4, "<|eot|>", "<|eom|>"),
    "llama2": Template(
        "llama2",
        user="{bos}[INST] {content} [/INST]",
        system="<<SYS>>\n{content}\n<</SYS>>\n\n",
        system_in_user=True,
    ),
    "mistral": Template(
        "mistral",
        user="[INST] {content}[/INST]",
        assistant=" {content}{eos}",
        system="{content}\n\n",
        prefix="{bos}",
        system_in_user=True,
        observation='[TOOL_RESULTS] {"content": {content}}[/TOOL_RESULTS]',
        function="[TOOL_CALLS] {content}{eos}",
        tool_format="mistral",
        markers=("[INST]",),
    ),
    "qwen": _qwen_family("qwen", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."),
    "qwen2_vl": _qwen_family("qwen2_vl", "You are a helpful assistant."),
    "qwen3": _qwen_family("qwen3", reasoning=True),
    "qwen3_nothink": _qwen_family("qwen3_nothink"),
    "qwen3_vl": _qwen_family("qwen3_vl", reasoning=True),
    "qwen3_vl_nothink": _qwen_family("qwen3_vl_nothink"),
    "gemma": _gemma_family("gemma"),
    "gemma2": _gemma_family("gemma2", efficient_eos=True, stop_words=("<eos>", "<end_of_turn>")),
    "gemma3": _gemma_family("gemma3"),
    "deepseek3": _deepseek3("deepseek3"),
    "deepseekr1": _deepseek3("deepseekr1", reasoning=True),
    "glm4": Template(
        "glm4",
        user="<|user|>\n{content}<|assistant|>",
        assistant="\n{content}",
        system="<|system|>\n{content}",
        prefix="[gMASK]<sop>",
        observation="<|observation|>\n{content}<|assistant|>",
        function="{content}",
        tool_format="glm4",
        efficient_eos=True,
        stop_words=("<|user|>", "<|observation|>"),
        markers=("<|user|>", "<|assistant|>"),
    ),
    "phi4": Template(
        "phi4",
        user="<|im_start|>user<|im_sep|>{content}<|im_end|><|im_start|>assistant<|im_sep|>",
        assistant="{content}<|im_end|>",
        system="<|im_start|>system<|im_sep|>{content}<|im_end|>",
        stop_words=("<|im_end|>",),
        replace_eos=True,
        markers=("<|im_start|>", "<|im_sep|>", "<|im_end|>"),
    ),
    "chatml": Template(
        "chatml",
        user=_IM,
        assistant=_IM_END,
        system=_IM_SYS,
        observation="<|im_start|>tool\n{content}<|im_end|>\n<|im_start|>assistant\n",
        function=_IM_END,
        stop_words=("<|im_end|>", "<|im_start|>"),
        replace_eos=True,
        markers=_IM_MARKS,
    ),
    "yi": _chatml_like("yi"),
    "intern2": _chatml_like("intern2", prefix="{bos}", default_system=_INTERN_SYSTEM),
    "cohere": Template(
        "cohere",
        user=_COHERE + "<|USER_TOKEN|>{content}<|END_OF_TURN_TOKEN|>" + _COHERE + "<|CHATBOT_TOKEN|>",
        system=_COHERE + "<|SYSTEM_TOKEN|>{content}<|END_OF_TURN_TOKEN|>",
        prefix="{bos}",
        markers=(_COHERE,),
    ),
    "alpaca": Template(
        "alpaca",
        user="### Instruction:\n{content}\n\n### Response:\n",
        assistant="{content}{eos}\n\n",
        default_system="Below is an instruction that describes a task. Write a response that appropriately "
        "completes the request.\n\n",
    ),
    "vicuna": Template("vicuna", user="USER: {content} ASSISTANT:", default_system=_VICUNA_SYSTEM),
    "llava": Template("llava", user="USER: {content} ASSISTANT:", default_system=_VICUNA_SYSTEM),
    "default": Template(
        "default",
        user="Human: {content}{eos}\nAssistant:",
        assistant="{content}{eos}\n",
        system="System: {content}{eos}\n",
    ),
    "empty": Template("empty", user="{content}", assistant="{content}"),
    "fewshot": Template("fewshot", user="{content}", assistant="{content}\n\n", efficient_eos=True),
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
            calls = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in _calls(m["content"])]
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
) -> list[tuple[str, str]]:
    """[(prompt text, response text)] per answer turn; the concatenation is the whole rendered conversation.

    ``messages`` alternate user-side (user, observation) and answer (assistant, function) turns and end with an
    answer (checked by the dataset registry). ``tools``: the row's tools column (a JSON list, or its text).
    ``enable_thinking`` is LF's data argument of the same name for reasoning templates (True: an answer without a
    thought gets an empty one, trained; False: thoughts are removed and the empty one goes into the prompt).
    ``tool_format`` (LF's data argument) replaces the named template's own tool format (default, qwen, llama3,
    glm4, mistral); None keeps it.
    """
    tmpl = _with_tool_format(resolve(name, info), tool_format)
    if isinstance(tmpl, str):
        return _chat_template_segments(tmpl, info, system, messages, tools)
    return _lf_segments(tmpl, info, system, messages, tools, enable_thinking=enable_thinking)


def _with_tool_format(tmpl: Template | str, tool_format: str | None) -> Template | str:
    if not tool_format or isinstance(tmpl, str):
        return tmpl
    if tool_format not in _TOOL_FORMATS:
        raise TemplateError(data_message("template.tool_format", name=tool_format, names=", ".join(TOOL_FORMATS)))
    return replace(tmpl, tool_format=tool_format)


def _tokens(tmpl: Template, info: TokenizerInfo) -> dict[str, str]:
    eos = tmpl.stop_words[0] if tmpl.replace_eos and tmpl.stop_words else info.eos
    return {"{bos}": info.special.get("bos_token", ""), "{eos}": eos}


def _fill(slot: str, content: str, tokens: dict[str, str]) -> str:
    for key, value in tokens.items():
        slot = slot.replace(key, value)
    return slot.replace("{content}", content, 1)


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
    """LF's encoding: prefix and system (+ tools) with the first turn, each turn through its formatter.
    ``last_only``: LF's one-turn encoding (DPO prompts): earlier answers lose their thoughts and only the last
    answer gets the empty-thought rule."""
    tok = _tokens(tmpl, info)
    system = system or tmpl.default_system
    tool_text = _tools_text(tmpl.tool_format, _tool_list(tools)) if tools else ""
    last_answer = max((i for i, m in enumerate(messages) if m["role"] in _ANSWER_ROLES), default=-1)
    segs: list[tuple[str, str]] = []
    prompt = ""
    for i, msg in enumerate(messages):
        role, content = msg["role"], msg["content"]
        if i == 0:
            prompt += _fill(tmpl.prefix, "", tok)
            if system or tool_text:
                sys_text = _fill(tmpl.system, system + tool_text, tok)
                if tmpl.system_in_user:
                    content = sys_text + content
                else:
                    prompt += sys_text
        if role == "user":
            prompt += _fill(tmpl.user, content, tok)
        elif role == "observation":
            prompt += _fill(tmpl.observation or tmpl.user, content, tok)
        elif role in _ANSWER_ROLES:
            thought = ""
            if tmpl.reasoning:
                if last_only and i != last_answer:
                    content = _strip_thought(content)
                else:
                    if not enable_thinking:
                        content = _strip_thought(content)
                    if not _has_thought(content):
                        if enable_thinking:
                            thought = _EMPTY_THOUGHT
                        else:
                            prompt += _EMPTY_THOUGHT
            if role == "function":
                text = _function_text(tmpl, content)
                response = _fill(tmpl.function if tmpl.function is not None else tmpl.assistant, text, tok)
            else:
                response = _fill(tmpl.assistant, content, tok)
            segs.append((prompt, thought + response))
            prompt = ""
        else:
            raise TemplateError(data_message("template.role", role=role))
    if tmpl.efficient_eos and segs:
        segs[-1] = (segs[-1][0], segs[-1][1] + info.eos)
    return segs


def _chat_template_segments(source: str, info: TokenizerInfo, system: str, messages: list[dict], tools: Any = None):
    tool_list = _tool_list(tools) if tools else []
    if tool_list and "tools" not in source:
        raise TemplateError(data_message("template.no_tool_support"))
    wrapped = [_wrap_tool(t) for t in tool_list] or None
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
    tmpl = _with_tool_format(resolve(name, info), tool_format)
    if isinstance(tmpl, str):
        wrapped = [_wrap_tool(t) for t in _tool_list(tools)] if tools else None
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


# ----------------------------------------------------------------------------------------------- tools
def _tool_list(tools: Any) -> list[dict]:
    """The tools column as a list of function schemas; raises TemplateError on text that is not a JSON list."""
    if isinstance(tools, str):
        if not tools.strip():
            return []
        try:
            tools = json.loads(tools)
        except ValueError:
            raise TemplateError(data_message("template.bad_tools")) from None
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise TemplateError(data_message("template.bad_tools"))
    return tools


def _unwrap_tool(tool: dict) -> dict:
    return tool["function"] if tool.get("type") == "function" and isinstance(tool.get("function"), dict) else tool


def _wrap_tool(tool: dict) -> dict:
    return tool if tool.get("type") == "function" else {"type": "function", "function": tool}


def _calls(content: str) -> list[tuple[str, Any]]:
    """A function message's calls: (name, arguments) from one JSON object or a list of them."""
    try:
        data = json.loads(content)
    except ValueError:
        raise TemplateError(data_message("template.bad_call")) from None
    items = data if isinstance(data, list) else [data]
    if not items or not all(isinstance(c, dict) and "name" in c and "arguments" in c for c in items):
        raise TemplateError(data_message("template.bad_call"))
    return [(str(c["name"]), c["arguments"]) for c in items]


def _dumps(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _function_text(tmpl: Template, content: str) -> str:
    """A tool call in the template's tool format, with any text around it (a thought) kept before the calls."""
    before = ""
    if not tmpl.system_in_user:  # LF's Llama2Template reads only plain JSON calls
        block = re.search(re.escape(TOOL_CALL[0]) + "(.*?)" + re.escape(TOOL_CALL[1]), content, flags=re.DOTALL)
        if block:
            before, content = content[: block.start()] + content[block.end() :], block.group(1)
        else:
            thought = re.search(re.escape(THOUGHT[0]) + "(.*?)" + re.escape(THOUGHT[1]), content, flags=re.DOTALL)
            if thought:
                before, content = thought.group(0), content[: thought.start()] + content[thought.end() :]
    return before + _TOOL_FORMATS[tmpl.tool_format][1](_calls(content))


def _default_tools(tools: list[dict]) -> str:
    text = ""
    for tool in map(_unwrap_tool, tools):
        params = tool.get("parameters") or {}
        required = params.get("required") or []
        args = ""
        for pname, p in (params.get("properties") or {}).items():
            enum = f", should be one of [{', '.join(map(str, p['enum']))}]" if p.get("enum") else ""
            items = f", where each item should be {p['items'].get('type', '')}" if p.get("items") else ""
            req = ", required" if pname in required else ""
            args += f"  - {pname} ({p.get('type', '')}{req}): {p.get('description', '')}{enum}{items}\n"
        head = f"> Tool Name: {tool.get('name', '')}\nTool Description: {tool.get('description', '')}\n"
        text += f"{head}Tool Args:\n{args}\n"
    names = ", ".join(str(t.get("name", "")) for t in map(_unwrap_tool, tools))
    return (
        f"You have access to the following tools:\n{text}Use the following format if using a tool:\n```\n"
        f"Action: tool name (one of [{names}])\nAction Input: the input to the tool, in a JSON format representing "
        'the kwargs (e.g. ```{"input": "hello world", "num_beams": 5}```)\n```\n'
    )


def _default_calls(calls: list[tuple[str, Any]]) -> str:
    return "\n".join(f"Action: {n}\nAction Input: {_dumps(a)}" for n, a in calls)


def _qwen_tools(tools: list[dict]) -> str:
    text = "".join("\n" + _dumps(_wrap_tool(t)) for t in tools)
    return (
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
        f"function signatures within <tools></tools> XML tags:\n<tools>{text}\n</tools>\n\nFor each function call, "
        "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def _qwen_calls(calls: list[tuple[str, Any]]) -> str:
    return "\n".join(f"<tool_call>\n{_dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)


def _llama3_tools(tools: list[dict]) -> str:
    import datetime

    text = "".join(_dumps(_wrap_tool(t), indent=4) + "\n\n" for t in tools)
    return (
        f"Cutting Knowledge Date: December 2023\nToday Date: {datetime.datetime.now().strftime('%d %b %Y')}\n\n"
        "You have access to the following functions. To call a function, please respond with JSON for a function "
        'call. Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
        f"value}}. Do not use variables.\n\n{text}"
    )


def _llama3_calls(calls: list[tuple[str, Any]]) -> str:
    out = [{"name": n, "parameters": a} for n, a in calls]
    return _dumps(out[0] if len(out) == 1 else out)


def _glm4_tools(tools: list[dict]) -> str:
    text = "".join(
        f"\n\n## {t.get('name', '')}\n\n{_dumps(t, indent=4)}\n\u5728\u8c03\u7528\u4e0a\u8ff0\u51fd\u6570\u65f6\uff0c"
        "\u8bf7\u4f7f\u7528 Json \u683c\u5f0f\u8868\u793a\u8c03\u7528\u7684\u53c2\u6570\u3002"
        for t in map(_unwrap_tool, tools)
    )
    return (
        "\u4f60\u662f\u4e00\u4e2a\u540d\u4e3a ChatGLM \u7684\u4eba\u5de5\u667a\u80fd\u52a9\u624b\u3002\u4f60\u662f"
        "\u57fa\u4e8e\u667a\u8c31 AI \u516c\u53f8\u8bad\u7ec3\u7684\u8bed\u8a00\u6a21\u578b GLM-4 \u6a21\u578b\u5f00"
        "\u53d1\u7684\uff0c\u4f60\u7684\u4efb\u52a1\u662f\u9488\u5bf9\u7528\u6237\u7684\u95ee\u9898\u548c\u8981\u6c42"
        "\u63d0\u4f9b\u9002\u5f53\u7684\u7b54\u590d\u548c\u652f\u6301\u3002\n\n# \u53ef\u7528\u5de5\u5177" + text
    )


def _glm4_calls(calls: list[tuple[str, Any]]) -> str:
    if len(calls) > 1:
        raise TemplateError(data_message("template.parallel_calls", name="glm4"))
    return f"{calls[0][0]}\n{_dumps(calls[0][1])}"


def _mistral_tools(tools: list[dict]) -> str:
    return f"[AVAILABLE_TOOLS] {_dumps([_wrap_tool(t) for t in tools])}[/AVAILABLE_TOOLS]"


def _mistral_calls(calls: list[tuple[str, Any]]) -> str:
    return _dumps([{"name": n, "arguments": a} for n, a in calls])


# LF's tool formats: (tools description appended to the system text, tool calls as the model writes them)
_TOOL_FORMATS = {
    "default": (_default_tools, _default_calls),
    "qwen": (_qwen_tools, _qwen_calls),
    "llama3": (_llama3_tools, _llama3_calls),
    "glm4": (_glm4_tools, _glm4_calls),
    "mistral": (_mistral_tools, _mistral_calls),
}


TOOL_FORMATS = list(_TOOL_FORMATS)  # the names data.tool_format takes


def _tools_text(tool_format: str, tools: list[dict]) -> str:
    return _TOOL_FORMATS[tool_format][0](tools) if tools else ""


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


# ----------------------------------------------------------------------------------------------- preview
def _settings(spec_or_template: Any) -> tuple[str, bool, str, dict]:
    """(template, train_on_prompt, stage, the data options that change rendering: enable_thinking, tool_format,
    mask_history)."""
    if isinstance(spec_or_template, str):
        return spec_or_template, False, "sft", {}
    d = spec_or_template.data
    options = {
        "enable_thinking": d.enable_thinking,
        "tool_format": None if d.tool_format == "template" else d.tool_format,
        "mask_history": d.mask_history,
    }
    return d.template, d.train_on_prompt, spec_or_template.method.stage, options


def render_sample(
    spec_or_template: Any, tokenizer: Any, row: dict, stage: str | None = None
) -> list[tuple[str, bool]]:
    """A canonical row as [(text, trained)] pieces, for the page's coloured masked-sample view. ``stage`` (sft, pt,
    dpo, kto, rm) replaces the spec's, or the default sft when only a template name is given. dpo and rm show the
    prompt and the chosen answer, kto the prompt and its last answer (the one its tag judges)."""
    name, train_on_prompt, spec_stage, options = _settings(spec_or_template)
    stage = stage or spec_stage
    info = tokenizer if isinstance(tokenizer, TokenizerInfo) else tokenizer_info(tokenizer)
    if stage == "pt":
        return [(pretrain_text(row, info), True)]
    tool_format = options.get("tool_format")
    if stage in ("dpo", "rm") or "chosen" in row:
        prompt = prompt_text(name, info, row.get("system", ""), row["messages"], row.get("tools"), tool_format)
        return [(prompt, False), (assistant_text(name, info, row.get("chosen", "")), True)]
    if stage == "kto" and row["messages"]:
        *history, answer = row["messages"]
        prompt = prompt_text(name, info, row.get("system", ""), history, row.get("tools"), tool_format)
        return [(prompt, False), (assistant_text(name, info, answer["content"]), True)]
    pieces: list[tuple[str, bool]] = []
    segs = conversation_segments(
        name,
        info,
        row.get("system", ""),
        row["messages"],
        row.get("tools"),
        enable_thinking=options.get("enable_thinking", True),
        tool_format=tool_format,
    )
    for i, (prompt, response) in enumerate(segs):
        # mask_history (LF): only the last answer is trained
        pieces += [(prompt, train_on_prompt), (response, not options.get("mask_history") or i == len(segs) - 1)]
    return pieces


def token_lengths(spec_or_template: Any, tokenizer: Any, rows: list[dict], stage: str | None = None) -> list[int]:
    """Tokens per canonical row before truncation (for the length histogram): the text the stage trains on (pt:
    the whole text with its EOS). ``tokenizer``: object or folder; ``stage`` as in ``render_sample``."""
    return [sum(n for n, _ in pieces) for pieces in piece_lengths(spec_or_template, tokenizer, rows, stage)]


def piece_lengths(
    spec_or_template: Any, tokenizer: Any, rows: list[dict], stage: str | None = None
) -> list[list[tuple[int, bool]]]:
    """Per canonical row, (tokens, trained) of each piece ``render_sample`` gives, each piece tokenised on its own
    as the trainer's encoder does (engine.trainer.dataset), for the plan's token and step counts."""
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

    return [
        [(count(t), trained) for t, trained in render_sample(spec_or_template, info, row, stage) if t] for row in rows
    ]
