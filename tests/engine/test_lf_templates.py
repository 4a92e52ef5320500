# ruff: noqa: E501  (the expected renderings are long single-line strings, kept as LF prints them)
"""Template names LLaMA-Factory's examples and README use render the same text as LF 0.9.5 for the same
conversation: system, multi-turn, reasoning (empty <think> blocks, enable_thinking) and tool calls.

The expected renderings are written from LF's template definitions (format_prefix / system / user / assistant /
function / observation slots, default_system, Llama2Template's system folding, ReasoningTemplate, efficient_eos,
tool formats); ``<BOS>`` / ``<EOS>`` stand for the tokenizer's tokens. Conversations: A = no system, Hi -> Hello!;
B = system "You are a bot.", Hi -> Hello!, 2+2? -> 4; C = 2+2? -> an answer with a thought.
"""

from __future__ import annotations

import datetime
import json

import pytest

from engine.data import templates as T
from engine.data.masked_samples import render_sample
from engine.data.template_table import NAMED, TEMPLATE_NAMES, TemplateError

BOS, EOS = "<s>", "</s>"
INFO = T.TokenizerInfo(special={"bos_token": BOS, "eos_token": EOS})

CONVERSATIONS = {
    "A": ("", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]),
    "B": (
        "You are a bot.",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
        ],
    ),
    "C": ("", [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4"}]),
}

LF_RENDERINGS = {
    "llama3": {
        "A": [
            (
                "<BOS><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                "Hello!<|eot_id|>",
            )
        ],
        "B": [
            (
                "<BOS><|start_header_id|>system<|end_header_id|>\n\nYou are a bot.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                "Hello!<|eot_id|>",
            ),
            (
                "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                "4<|eot_id|>",
            ),
        ],
    },
    "llama2": {
        "A": [("<BOS>[INST] Hi [/INST]", "Hello!<EOS>")],
        "B": [
            ("<BOS>[INST] <<SYS>>\nYou are a bot.\n<</SYS>>\n\nHi [/INST]", "Hello!<EOS>"),
            ("<BOS>[INST] 2+2? [/INST]", "4<EOS>"),
        ],
    },
    "qwen": {
        "A": [
            (
                "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            )
        ],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "qwen3": {
        "A": [
            ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>\n\nHello!<|im_end|>\n")
        ],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "<think>\n\n</think>\n\nHello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>\n\n4<|im_end|>\n"),
        ],
        "A_nothinking": [
            ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", "Hello!<|im_end|>\n")
        ],
        "C": [
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "<think>\nadd\n</think>\n\n4<|im_end|>\n")
        ],
        "C_nothinking": [
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", "4<|im_end|>\n")
        ],
    },
    "qwen3_nothink": {
        "A": [("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "Hello!<|im_end|>\n")],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "qwen2_vl": {
        "A": [
            (
                "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            )
        ],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "qwen3_vl": {
        "A": [
            ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>\n\nHello!<|im_end|>\n")
        ],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "<think>\n\n</think>\n\nHello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>\n\n4<|im_end|>\n"),
        ],
        "A_nothinking": [
            ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", "Hello!<|im_end|>\n")
        ],
        "C": [
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "<think>\nadd\n</think>\n\n4<|im_end|>\n")
        ],
        "C_nothinking": [
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", "4<|im_end|>\n")
        ],
    },
    "qwen3_vl_nothink": {
        "A": [("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "Hello!<|im_end|>\n")],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "gemma": {
        "A": [("<BOS><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "Hello!<end_of_turn>\n")],
        "B": [
            (
                "<BOS><start_of_turn>user\nYou are a bot.\n\nHi<end_of_turn>\n<start_of_turn>model\n",
                "Hello!<end_of_turn>\n",
            ),
            ("<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n", "4<end_of_turn>\n"),
        ],
    },
    "gemma3": {
        "A": [("<BOS><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "Hello!<end_of_turn>\n")],
        "B": [
            (
                "<BOS><start_of_turn>user\nYou are a bot.\n\nHi<end_of_turn>\n<start_of_turn>model\n",
                "Hello!<end_of_turn>\n",
            ),
            ("<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n", "4<end_of_turn>\n"),
        ],
    },
    "deepseek3": {
        "A": [("<BOS><｜User｜>Hi<｜Assistant｜>", "Hello!<EOS>")],
        "B": [
            ("<BOS>You are a bot.<｜User｜>Hi<｜Assistant｜>", "Hello!<EOS>"),
            ("<｜User｜>2+2?<｜Assistant｜>", "4<EOS>"),
        ],
    },
    "deepseekr1": {
        "A": [("<BOS><｜User｜>Hi<｜Assistant｜>", "<think>\n\n</think>\n\nHello!<EOS>")],
        "B": [
            ("<BOS>You are a bot.<｜User｜>Hi<｜Assistant｜>", "<think>\n\n</think>\n\nHello!<EOS>"),
            ("<｜User｜>2+2?<｜Assistant｜>", "<think>\n\n</think>\n\n4<EOS>"),
        ],
        "A_nothinking": [("<BOS><｜User｜>Hi<｜Assistant｜><think>\n\n</think>\n\n", "Hello!<EOS>")],
        "C": [("<BOS><｜User｜>2+2?<｜Assistant｜>", "<think>\nadd\n</think>\n\n4<EOS>")],
        "C_nothinking": [("<BOS><｜User｜>2+2?<｜Assistant｜><think>\n\n</think>\n\n", "4<EOS>")],
    },
    "glm4": {
        "A": [("[gMASK]<sop><|user|>\nHi<|assistant|>", "\nHello!")],
        "B": [
            ("[gMASK]<sop><|system|>\nYou are a bot.<|user|>\nHi<|assistant|>", "\nHello!"),
            ("<|user|>\n2+2?<|assistant|>", "\n4"),
        ],
    },
    "phi4": {
        "A": [("<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>", "Hello!<|im_end|>")],
        "B": [
            (
                "<|im_start|>system<|im_sep|>You are a bot.<|im_end|><|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>",
                "Hello!<|im_end|>",
            ),
            ("<|im_start|>user<|im_sep|>2+2?<|im_end|><|im_start|>assistant<|im_sep|>", "4<|im_end|>"),
        ],
    },
    "mistral": {
        "A": [("<BOS>[INST] Hi[/INST]", " Hello!<EOS>")],
        "B": [("<BOS>[INST] You are a bot.\n\nHi[/INST]", " Hello!<EOS>"), ("[INST] 2+2?[/INST]", " 4<EOS>")],
    },
    "chatml": {
        "A": [("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "Hello!<|im_end|>\n")],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "alpaca": {
        "A": [
            (
                "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n### Instruction:\nHi\n\n### Response:\n",
                "Hello!<EOS>\n\n",
            )
        ],
        "B": [
            ("You are a bot.### Instruction:\nHi\n\n### Response:\n", "Hello!<EOS>\n\n"),
            ("### Instruction:\n2+2?\n\n### Response:\n", "4<EOS>\n\n"),
        ],
    },
    "default": {
        "A": [("Human: Hi<EOS>\nAssistant:", "Hello!<EOS>\n")],
        "B": [
            ("System: You are a bot.<EOS>\nHuman: Hi<EOS>\nAssistant:", "Hello!<EOS>\n"),
            ("Human: 2+2?<EOS>\nAssistant:", "4<EOS>\n"),
        ],
    },
    "empty": {
        "A": [("Hi", "Hello!")],
        "B": [("You are a bot.Hi", "Hello!"), ("2+2?", "4")],
    },
    "vicuna": {
        "A": [
            (
                "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the user's questions.USER: Hi ASSISTANT:",
                "Hello!<EOS>",
            )
        ],
        "B": [("You are a bot.USER: Hi ASSISTANT:", "Hello!<EOS>"), ("USER: 2+2? ASSISTANT:", "4<EOS>")],
    },
    "yi": {
        "A": [("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "Hello!<|im_end|>\n")],
        "B": [
            (
                "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "intern2": {
        "A": [
            (
                "<BOS><|im_start|>system\nYou are an AI assistant whose name is InternLM (书生·浦语).\n- InternLM (书生·浦语) is a conversational language model that is developed by Shanghai AI Laboratory (上海人工智能实验室). It is designed to be helpful, honest, and harmless.\n- InternLM (书生·浦语) can understand and communicate fluently in the language chosen by the user such as English and 中文.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            )
        ],
        "B": [
            (
                "<BOS><|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                "Hello!<|im_end|>\n",
            ),
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", "4<|im_end|>\n"),
        ],
    },
    "llama4": {
        "A": [
            (
                "<BOS><|header_start|>user<|header_end|>\n\nHi<|eot|><|header_start|>assistant<|header_end|>\n\n",
                "Hello!<|eot|>",
            )
        ],
        "B": [
            (
                "<BOS><|header_start|>system<|header_end|>\n\nYou are a bot.<|eot|><|header_start|>user<|header_end|>\n\nHi<|eot|><|header_start|>assistant<|header_end|>\n\n",
                "Hello!<|eot|>",
            ),
            (
                "<|header_start|>user<|header_end|>\n\n2+2?<|eot|><|header_start|>assistant<|header_end|>\n\n",
                "4<|eot|>",
            ),
        ],
    },
    "cohere": {
        "A": [
            (
                "<BOS><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
                "Hello!<EOS>",
            )
        ],
        "B": [
            (
                "<BOS><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a bot.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
                "Hello!<EOS>",
            ),
            (
                "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
                "4<EOS>",
            ),
        ],
    },
    "llava": {
        "A": [
            (
                "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the user's questions.USER: Hi ASSISTANT:",
                "Hello!<EOS>",
            )
        ],
        "B": [("You are a bot.USER: Hi ASSISTANT:", "Hello!<EOS>"), ("USER: 2+2? ASSISTANT:", "4<EOS>")],
    },
    "fewshot": {
        "A": [("Hi", "Hello!\n\n")],
        "B": [("You are a bot.Hi", "Hello!\n\n"), ("2+2?", "4\n\n")],
    },
}


TOOL_RENDERINGS = {
    "template `default` (tool_format `default`)": [
        (
            'System: You have access to the following tools:\n> Tool Name: get_weather\nTool Description: Get the current weather\nTool Args:\n  - city (string, required): City name\n  - unit (string): Temperature unit, should be one of [celsius, fahrenheit]\n  - days (array): Days, where each item should be integer\n\nUse the following format if using a tool:\n```\nAction: tool name (one of [get_weather])\nAction Input: the input to the tool, in a JSON format representing the kwargs (e.g. ```{"input": "hello world", "num_beams": 5}```)\n```\n<EOS>\nHuman: Weather in Paris?<EOS>\nAssistant:',
            'Action: get_weather\nAction Input: {"city": "Paris", "unit": "celsius"}<EOS>\n',
        ),
        ('Human: {"temp": 21}<EOS>\nAssistant:', "It is 21°C.<EOS>\n"),
    ],
    "template `qwen` (tool_format `qwen`)": [
        (
            '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "array", "description": "Days", "items": {"type": "integer"}}}, "required": ["city"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call><|im_end|>\n',
        ),
        (
            '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
            "It is 21°C.<|im_end|>\n",
        ),
    ],
    "template `qwen3_nothink` (tool_format `qwen`)": [
        (
            '<|im_start|>system\n\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "array", "description": "Days", "items": {"type": "integer"}}}, "required": ["city"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call><|im_end|>\n',
        ),
        (
            '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
            "It is 21°C.<|im_end|>\n",
        ),
    ],
    "template `qwen3` (tool_format `qwen`)": [
        (
            '<|im_start|>system\n\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "array", "description": "Days", "items": {"type": "integer"}}}, "required": ["city"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
            '<think>\n\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call><|im_end|>\n',
        ),
        (
            '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
            "<think>\n\n</think>\n\nIt is 21°C.<|im_end|>\n",
        ),
    ],
    "template `llama3` (tool_format `llama3`)": [
        (
            '<BOS><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: <DD Mon YYYY>\n\nYou have access to the following functions. To call a function, please respond with JSON for a function call. Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\n\n{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n        "description": "Get the current weather",\n        "parameters": {\n            "type": "object",\n            "properties": {\n                "city": {\n                    "type": "string",\n                    "description": "City name"\n                },\n                "unit": {\n                    "type": "string",\n                    "description": "Temperature unit",\n                    "enum": [\n                        "celsius",\n                        "fahrenheit"\n                    ]\n                },\n                "days": {\n                    "type": "array",\n                    "description": "Days",\n                    "items": {\n                        "type": "integer"\n                    }\n                }\n            },\n            "required": [\n                "city"\n            ]\n        }\n    }\n}\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
            '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|>',
        ),
        (
            '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
            "It is 21°C.<|eot_id|>",
        ),
    ],
    "template `glm4` (tool_format `glm4`)": [
        (
            '[gMASK]<sop><|system|>\n你是一个名为 ChatGLM 的人工智能助手。你是基于智谱 AI 公司训练的语言模型 GLM-4 模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具\n\n## get_weather\n\n{\n    "name": "get_weather",\n    "description": "Get the current weather",\n    "parameters": {\n        "type": "object",\n        "properties": {\n            "city": {\n                "type": "string",\n                "description": "City name"\n            },\n            "unit": {\n                "type": "string",\n                "description": "Temperature unit",\n                "enum": [\n                    "celsius",\n                    "fahrenheit"\n                ]\n            },\n            "days": {\n                "type": "array",\n                "description": "Days",\n                "items": {\n                    "type": "integer"\n                }\n            }\n        },\n        "required": [\n            "city"\n        ]\n    }\n}\n在调用上述函数时，请使用 Json 格式表示调用的参数。<|user|>\nWeather in Paris?<|assistant|>',
            'get_weather\n{"city": "Paris", "unit": "celsius"}',
        ),
        ('<|observation|>\n{"temp": 21}<|assistant|>', "\nIt is 21°C."),
    ],
    "template `mistral` (tool_format `mistral`)": [
        (
            '<BOS>[INST] [AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "array", "description": "Days", "items": {"type": "integer"}}}, "required": ["city"]}}}][/AVAILABLE_TOOLS]\n\nWeather in Paris?[/INST]',
            '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]<EOS>',
        ),
        ('[TOOL_RESULTS] {"content": {"temp": 21}}[/TOOL_RESULTS]', " It is 21°C.<EOS>"),
    ],
    "template `chatml` (tool_format `default`)": [
        (
            '<|im_start|>system\nYou have access to the following tools:\n> Tool Name: get_weather\nTool Description: Get the current weather\nTool Args:\n  - city (string, required): City name\n  - unit (string): Temperature unit, should be one of [celsius, fahrenheit]\n  - days (array): Days, where each item should be integer\n\nUse the following format if using a tool:\n```\nAction: tool name (one of [get_weather])\nAction Input: the input to the tool, in a JSON format representing the kwargs (e.g. ```{"input": "hello world", "num_beams": 5}```)\n```\n<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
            'Action: get_weather\nAction Input: {"city": "Paris", "unit": "celsius"}<|im_end|>\n',
        ),
        ('<|im_start|>tool\n{"temp": 21}<|im_end|>\n<|im_start|>assistant\n', "It is 21°C.<|im_end|>\n"),
    ],
    "template `llama2` (tool_format `default`)": [
        (
            '<BOS>[INST] <<SYS>>\nYou have access to the following tools:\n> Tool Name: get_weather\nTool Description: Get the current weather\nTool Args:\n  - city (string, required): City name\n  - unit (string): Temperature unit, should be one of [celsius, fahrenheit]\n  - days (array): Days, where each item should be integer\n\nUse the following format if using a tool:\n```\nAction: tool name (one of [get_weather])\nAction Input: the input to the tool, in a JSON format representing the kwargs (e.g. ```{"input": "hello world", "num_beams": 5}```)\n```\n\n<</SYS>>\n\nWeather in Paris? [/INST]',
            'Action: get_weather\nAction Input: {"city": "Paris", "unit": "celsius"}<EOS>',
        ),
        ('<BOS>[INST] {"temp": 21} [/INST]', "It is 21°C.<EOS>"),
    ],
    "template `qwen` with a sample system `You are a weather bot.` (first pair only)": [
        (
            '<|im_start|>system\nYou are a weather bot.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "array", "description": "Days", "items": {"type": "integer"}}}, "required": ["city"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call><|im_end|>\n',
        )
    ],
    "Function message that carries a thought (template `qwen3`, no tools)": [
        (
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n",
            '<think>\nI should call the tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call><|im_end|>\n',
        )
    ],
    "Function message using `<tool_call>` words (template `qwen`)": [
        (
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n",
            'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call><|im_end|>\n',
        )
    ],
    "Parallel calls (list JSON) with template `default`": [
        (
            "Human: Weather in Paris and Rome?<EOS>\nAssistant:",
            'Action: get_weather\nAction Input: {"city": "Paris"}\nAction: get_weather\nAction Input: {"city": "Rome"}<EOS>\n',
        )
    ],
    "Parallel calls (list JSON) with template `qwen`": [
        (
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n<|im_start|>assistant\n",
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n',
        )
    ],
    "Parallel calls (list JSON) with template `llama3`": [
        (
            "<BOS><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris and Rome?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
            '[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_weather", "parameters": {"city": "Rome"}}]<|eot_id|>',
        )
    ],
}


# The template names LF 0.9.5's examples (train_lora, train_full, extras, merge_lora, the llama3-era files) and its
# README's model table use for text models, and the ones Studio had before under the same name.
LF_EXAMPLE_NAMES = [
    "llama3", "llama2", "llama4", "qwen", "qwen2_vl", "qwen3", "qwen3_nothink", "qwen3_vl", "qwen3_vl_nothink",
    "gemma", "gemma2", "gemma3", "deepseek3", "deepseekr1", "glm4", "phi4", "mistral", "chatml", "alpaca",
    "default", "empty", "vicuna", "yi", "intern2", "cohere", "llava", "fewshot",
]  # fmt: skip


def _tokens(text: str) -> str:
    return text.replace("<BOS>", BOS).replace("<EOS>", EOS)


def _expected(name: str, case: str) -> list[tuple[str, str]]:
    pairs = [(_tokens(p), _tokens(r)) for p, r in LF_RENDERINGS[name][case]]
    if NAMED[name].efficient_eos:  # LF appends one EOS after the last answer of a sample (input and label)
        pairs[-1] = (pairs[-1][0], pairs[-1][1] + EOS)
    return pairs


CASES = [(name, case) for name, cases in LF_RENDERINGS.items() for case in cases]


@pytest.mark.parametrize(("name", "case"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_named_template_renders_like_llamafactory(name, case):
    conv = case.split("_")[0]
    system, messages = CONVERSATIONS[conv]
    segs = T.conversation_segments(name, INFO, system, messages, enable_thinking=not case.endswith("_nothinking"))
    assert segs == _expected(name, case)


def test_every_lf_example_name_resolves():
    assert not [n for n in LF_EXAMPLE_NAMES if n not in TEMPLATE_NAMES]
    assert set(LF_RENDERINGS) <= set(NAMED)
    assert all(T.template_problem(n) is None for n in LF_EXAMPLE_NAMES)
    problem = T.template_problem("qwen4")
    assert problem is not None and "qwen3_nothink" in str(problem) and "'qwen4'" in str(problem)


def test_a_tokenizer_without_bos_gets_no_bos():
    info = T.TokenizerInfo(special={"eos_token": EOS})
    assert T.conversation_segments("llama2", info, "", CONVERSATIONS["A"][1]) == [("[INST] Hi [/INST]", "Hello!</s>")]


def test_nothink_variants_keep_thoughts_verbatim_and_add_none():
    system, messages = CONVERSATIONS["C"]
    for name in ("qwen3_nothink", "qwen3_vl_nothink"):
        segs = T.conversation_segments(name, INFO, system, messages)
        assert segs == [
            ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", f"{messages[1]['content']}<|im_end|>\n")
        ]


def test_reasoning_dpo_pieces_follow_lf_one_turn_encoding():
    # history answers lose their thoughts, no empty thought in the prompt; chosen/rejected get the empty thought
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello!"},
        {"role": "user", "content": "2+2?"},
    ]
    assert T.prompt_text("qwen3", INFO, "", messages) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert T.assistant_text("qwen3", INFO, "4") == "<think>\n\n</think>\n\n4<|im_end|>\n"
    assert T.assistant_text("qwen3_nothink", INFO, "4") == "4<|im_end|>\n"
    assert T.assistant_text("glm4", INFO, "4") == "\n4</s>"  # efficient_eos: one EOS after the answer


def test_stop_words():
    assert T.stop_words("llama3", INFO) == ["<|eot_id|>", "<|eom_id|>"]  # replace_eos: the first stop word is EOS
    assert T.stop_words("glm4", INFO) == ["</s>", "<|user|>", "<|observation|>"]
    assert T.stop_words("llama2", INFO) == ["</s>"]


# ----------------------------------------------------------------------------------------------- tool calls
TOOLS = json.dumps(
    [
        {
            "name": "get_weather",
            "description": "Get the current weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "array", "description": "Days", "items": {"type": "integer"}},
                },
                "required": ["city"],
            },
        }
    ]
)
CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})
TOOL_TURNS = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "function", "content": CALL},
    {"role": "observation", "content": '{"temp": 21}'},
    {"role": "assistant", "content": "It is 21°C."},
]
PARALLEL = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "function",
        "content": json.dumps(
            [
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "arguments": {"city": "Rome"}},
            ]
        ),
    },
]
TOOL_CASES = {  # title in TOOL_RENDERINGS -> (template, system, messages, tools, pairs compared)
    **{
        f"template `{n}` (tool_format `{f}`)": (n, "", TOOL_TURNS, TOOLS, None)
        for n, f in [
            ("default", "default"),
            ("qwen", "qwen"),
            ("qwen3_nothink", "qwen"),
            ("qwen3", "qwen"),
            ("llama3", "llama3"),
            ("glm4", "glm4"),
            ("mistral", "mistral"),
            ("chatml", "default"),
            ("llama2", "default"),
        ]
    },
    "template `qwen` with a sample system `You are a weather bot.` (first pair only)": (
        "qwen",
        "You are a weather bot.",
        TOOL_TURNS,
        TOOLS,
        1,
    ),
    "Function message that carries a thought (template `qwen3`, no tools)": (
        "qwen3",
        "",
        [TOOL_TURNS[0], {"role": "function", "content": "<think>\nI should call the tool.\n</think>\n\n" + CALL}],
        None,
        None,
    ),
    "Function message using `<tool_call>` words (template `qwen`)": (
        "qwen",
        "",
        [TOOL_TURNS[0], {"role": "function", "content": f"Let me check.<tool_call>{CALL}</tool_call>"}],
        None,
        None,
    ),
    "Parallel calls (list JSON) with template `default`": ("default", "", PARALLEL, None, None),
    "Parallel calls (list JSON) with template `qwen`": ("qwen", "", PARALLEL, None, None),
    "Parallel calls (list JSON) with template `llama3`": ("llama3", "", PARALLEL, None, None),
}


@pytest.mark.parametrize("title", list(TOOL_CASES))
def test_tool_calls_render_like_llamafactory(title):
    name, system, messages, tools, first = TOOL_CASES[title]
    today = datetime.datetime.now().strftime("%d %b %Y")  # LF's llama3 tool prompt carries the date of the run
    want = [(_tokens(p).replace("<DD Mon YYYY>", today), _tokens(r)) for p, r in TOOL_RENDERINGS[title]]
    if NAMED[name].efficient_eos:
        want[-1] = (want[-1][0], want[-1][1] + EOS)
    segs = T.conversation_segments(name, INFO, system, messages, tools)
    assert segs[:first] == want


def test_tool_problems_are_named():
    with pytest.raises(TemplateError, match="not JSON"):
        T.conversation_segments("qwen", INFO, "", [TOOL_TURNS[0], {"role": "function", "content": "get_weather()"}])
    with pytest.raises(TemplateError, match="JSON list"):
        T.conversation_segments("qwen", INFO, "", TOOL_TURNS, "[not json")
    with pytest.raises(TemplateError, match="several tool calls"):
        T.conversation_segments("glm4", INFO, "", PARALLEL)


# ----------------------------------------------------------------------------------------------- the model's own
CHATML_JINJA = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_a_name_that_agrees_with_the_tokenizer_template_gets_no_note_and_one_that_differs_does():
    info = T.TokenizerInfo(chat_template=CHATML_JINJA, special={"eos_token": "<|im_end|>"})
    assert T.differs_from_tokenizer("chatml", info) is None and T.template_warning("chatml", info) is None
    note = T.differs_from_tokenizer("qwen", info)  # qwen adds its default system prompt; the model's does not
    assert note and "You are Qwen" in note and "'auto'" in note and T.template_warning("qwen", info) == note


def test_auto_passes_tools_and_calls_to_the_models_template():
    jinja = (
        "{% if tools %}<tools>{{ tools | tojson }}</tools>\n{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}{% for c in m.tool_calls %}"
        "CALL {{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}{% else %}{{ m.content }}{% endif %}"
        "</{{ m.role }}>\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    info = T.TokenizerInfo(chat_template=jinja, special={"eos_token": EOS})
    segs = T.conversation_segments("auto", info, "", TOOL_TURNS, TOOLS)
    assert segs[0][0].startswith('<tools>[{"type": "function", "function": {"name": "get_weather"')
    assert segs[0][1] == 'CALL get_weather {"city": "Paris", "unit": "celsius"}</assistant>\n'
    assert segs[1] == ('<tool>{"temp": 21}</tool>\n<assistant>', "It is 21°C.</assistant>\n")
    with pytest.raises(TemplateError, match="no tool support"):
        T.conversation_segments("auto", T.TokenizerInfo(chat_template=CHATML_JINJA), "", TOOL_TURNS, TOOLS)


def test_tool_format_replaces_the_templates_own():
    """LF's tool_format: template `chatml` with tool_format `qwen` writes tools and calls as template `qwen` does
    (the turns themselves stay chatml's, which qwen shares)."""
    ours = T.conversation_segments("chatml", INFO, "", TOOL_TURNS, TOOLS, tool_format="qwen")
    qwen = T.conversation_segments("qwen", INFO, "", TOOL_TURNS, TOOLS)
    plain = T.conversation_segments("chatml", INFO, "", TOOL_TURNS, TOOLS)
    assert ours != plain and "<tools>" in ours[0][0] and "<tool_call>" in ours[0][1]
    assert [r for _, r in ours] == [r for _, r in qwen]
    with pytest.raises(TemplateError, match="unknown tool format"):
        T.conversation_segments("chatml", INFO, "", TOOL_TURNS, TOOLS, tool_format="nope")


def test_spec_data_options_reach_the_rendering():
    """data.enable_thinking, data.tool_format and data.mask_history of a spec change what the masked sample (and the
    trainer, which renders through the same functions) trains."""
    from engine.spec.schema import RunSpec

    def spec(**data):
        return RunSpec.model_validate(
            {"model": {"name_or_path": "m"}, "data": {"datasets": ["d"], "template": "qwen3", **data}}
        )

    _, messages = CONVERSATIONS["B"]
    row = {"system": "", "messages": messages}
    thinking = render_sample(spec(), INFO, row)
    assert all(t.startswith("<think>\n\n</think>\n\n") for t, trained in thinking if trained)
    nothink = render_sample(spec(enable_thinking=False), INFO, row)
    assert all("<think>" not in t for t, trained in nothink if trained)
    assert all("<think>" in t for t, trained in nothink if not trained)
    masked = render_sample(spec(mask_history=True), INFO, row)
    assert [trained for _, trained in masked] == [False, False, False, True]
    tools = render_sample(spec(tool_format="default"), INFO, {"system": "", "messages": TOOL_TURNS, "tools": TOOLS})
    assert "<tools>" not in tools[0][0] and tools != render_sample(
        spec(), INFO, {"system": "", "messages": TOOL_TURNS, "tools": TOOLS}
    )
