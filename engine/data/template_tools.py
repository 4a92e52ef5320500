"""LLaMA-Factory's tool formats (default, qwen, llama3, glm4, mistral): the tools column described in the system
text, and a function turn's tool calls written as the model writes them; ``data.tool_format`` replaces a named
template's own format (``with_tool_format``), as LF's tool_format does.

Light: stdlib only. engine.data.templates renders function / observation turns and the tools text with these.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from engine.data.messages import message as data_message
from engine.data.template_table import THOUGHT, Template, TemplateError

TOOL_CALL = ("<tool_call>", "</tool_call>")


def tool_schemas(tools: Any) -> list[dict]:
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


def wrap_tool(tool: dict) -> dict:
    """A function schema in the OpenAI form chat templates take: {"type": "function", "function": ...}."""
    return tool if tool.get("type") == "function" else {"type": "function", "function": tool}


def parse_calls(content: str) -> list[tuple[str, Any]]:
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


def function_text(tmpl: Template, content: str) -> str:
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
    return before + _TOOL_FORMATS[tmpl.tool_format][1](parse_calls(content))


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
    text = "".join("\n" + _dumps(wrap_tool(t)) for t in tools)
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

    text = "".join(_dumps(wrap_tool(t), indent=4) + "\n\n" for t in tools)
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
    return f"[AVAILABLE_TOOLS] {_dumps([wrap_tool(t) for t in tools])}[/AVAILABLE_TOOLS]"


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


def tools_text(tool_format: str, tools: list[dict]) -> str:
    """The tools described in ``tool_format``, appended to the system text ("" without tools)."""
    return _TOOL_FORMATS[tool_format][0](tools) if tools else ""


def with_tool_format(tmpl: Template | str, tool_format: str | None) -> Template | str:
    """The named template with ``tool_format`` in place of its own (None keeps it; ``auto``'s source is kept)."""
    if not tool_format or isinstance(tmpl, str):
        return tmpl
    if tool_format not in _TOOL_FORMATS:
        raise TemplateError(data_message("template.tool_format", name=tool_format, names=", ".join(TOOL_FORMATS)))
    return replace(tmpl, tool_format=tool_format)
