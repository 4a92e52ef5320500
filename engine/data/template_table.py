"""The named chat templates: LLaMA-Factory's template names and their formats (LF 0.9.5's template definitions),
as ``Template`` records in ``NAMED``; ``TEMPLATE_NAMES`` adds ``auto`` (the tokenizer's own chat template). Also
``TemplateError``, the refusal every part of the templates raises, and LF's thought words.

Light: stdlib only. engine.data.templates renders these (engine.data.template_tools writes their tool formats);
tests/engine/test_lf_templates.py holds the renderings they must give.
"""

from __future__ import annotations

from dataclasses import dataclass


class TemplateError(ValueError):
    """A template that cannot render this conversation, or an unknown template name."""


THOUGHT = ("<think>\n", "\n</think>\n\n")  # LF's thought words; the empty thought is their concatenation


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
