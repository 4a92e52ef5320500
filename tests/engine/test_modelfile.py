"""Ollama Modelfile (issue 24, item 3): the Modelfile written beside a GGUF is parsed here and its TEMPLATE rendered
for multi-turn conversations by a small Go text/template interpreter written in this test (the subset Ollama
templates use: range over .Messages, if / else if / else, eq, len, slice, variables, assignment), and compared with
the tokenizer's own ``apply_chat_template``: the demo model's ChatML, a Llama 3-style template, and a template that
refuses system messages. Ollama itself cannot run here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "And of Italy?"},
    ],
    [
        {"role": "user", "content": "第一句"},
        {"role": "assistant", "content": "好的"},
        {"role": "user", "content": "第二句 {{ not an action }}"},
        {"role": "assistant", "content": "完"},
        {"role": "user", "content": "再来"},
    ],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
]
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
NO_SYSTEM = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ raise_exception('no system') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
    "{{ message['content'] + '</s>' }}{% endif %}{% endfor %}"
)


# ----------------------------------------------------------------------------------------------- a Go template subset
def tokenize(template: str) -> list[tuple[str, str]]:
    parts, pos = [], 0
    for m in re.finditer(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", template, re.S):
        text = template[pos : m.start()]
        if m.group(1):
            text = text.rstrip()
        if parts and parts[-1][0] == "trim_next":
            parts.pop()
            text = text.lstrip()
        parts.append(("text", text))
        parts.append(("action", m.group(2)))
        if m.group(3):
            parts.append(("trim_next", ""))
        pos = m.end()
    tail = template[pos:]
    if parts and parts[-1][0] == "trim_next":
        parts.pop()
        tail = tail.lstrip()
    parts.append(("text", tail))
    return [p for p in parts if p != ("text", "")]


def parse(tokens: list, i: int = 0, stop=("end",)):
    """A list of nodes until an action in ``stop``; returns (nodes, index of the stopping action)."""
    nodes = []
    while i < len(tokens):
        kind, body = tokens[i]
        if kind == "text":
            nodes.append(("text", body))
            i += 1
            continue
        head = body.split()[0]
        if head in stop or body.startswith("else"):
            return nodes, i
        if head == "range":
            m = re.fullmatch(r"range\s+\$(\w+),\s*\$(\w+)\s*:=\s*(.+)", body)
            inner, j = parse(tokens, i + 1)
            nodes.append(("range", m.group(1), m.group(2), m.group(3), inner))
            i = j + 1
        elif head == "if":
            branches, j = [], i
            cond = body[3:]
            while True:
                inner, j = parse(tokens, j + 1)
                branches.append((cond, inner))
                nxt = tokens[j][1]
                if nxt == "end":
                    break
                cond = nxt[8:] if nxt.startswith("else if") else "true"
            nodes.append(("if", branches))
            i = j + 1
        else:
            nodes.append(("action", body))
            i += 1
    return nodes, i


def sexpr(text: str):
    toks = re.findall(r'"(?:[^"\\]|\\.)*"|\(|\)|[^\s()]+', text)

    def read(pos):
        items = []
        while pos < len(toks) and toks[pos] != ")":
            if toks[pos] == "(":
                sub, pos = read(pos + 1)
                items.append(sub)
                pos += 1
            else:
                items.append(toks[pos])
                pos += 1
        return items, pos

    return read(0)[0]


def evaluate(expr, scope: dict, dot):
    if isinstance(expr, list):
        if len(expr) == 1:
            return evaluate(expr[0], scope, dot)
        fn, args = expr[0], [evaluate(a, scope, dot) for a in expr[1:]]
        if fn == "eq":
            return args[0] == args[1]
        if fn == "len":
            return len(args[0])
        if fn == "slice":
            return args[0][args[1] :]
        raise AssertionError(f"function {fn} is not in the subset")
    if expr.startswith('"'):
        return expr[1:-1].replace('\\"', '"')
    if expr == "true":
        return True
    if re.fullmatch(r"-?\d+", expr):
        return int(expr)
    if expr.startswith("$."):
        return scope["$root"][expr[2:]]
    if expr.startswith("$"):
        return scope[expr[1:]]
    if expr.startswith("."):
        return dot[expr[1:]]
    raise AssertionError(f"{expr} is not in the subset")


def execute(nodes, scope: dict, dot, out: list) -> None:
    for node in nodes:
        if node[0] == "text":
            out.append(node[1])
        elif node[0] == "action":
            body = node[1]
            m = re.fullmatch(r"\$(\w+)\s*(:?=)\s*(.+)", body)
            if m:
                if m.group(2) == "=":
                    assert m.group(1) in scope, f"${m.group(1)} assigned before it is declared"
                scope[m.group(1)] = evaluate(sexpr(m.group(3)), scope, dot)
            else:
                out.append(str(evaluate(sexpr(body), scope, dot)))
        elif node[0] == "range":
            _, iname, vname, src, inner = node
            for i, item in enumerate(evaluate(sexpr(src), scope, dot)):
                declared = set(scope)
                scope[iname], scope[vname] = i, item
                execute(inner, scope, item, out)
                for k in set(scope) - declared:  # variables declared in the body end with the iteration
                    del scope[k]
        elif node[0] == "if":
            for cond, inner in node[1]:
                if evaluate(sexpr(cond), scope, dot):
                    execute(inner, scope, dot, out)
                    break


def go_render(template: str, messages: list[dict]) -> str:
    nodes, _ = parse(tokenize(template))
    root = {"Messages": [{"Role": m["role"], "Content": m["content"]} for m in messages]}
    out: list[str] = []
    execute(nodes, {"$root": root}, root, out)
    return "".join(out)


def parse_modelfile(text: str) -> dict:
    found = {"parameters": []}
    m = re.search(r'^TEMPLATE """(.*?)"""$', text, re.S | re.M)
    found["template"] = m.group(1)
    rest = text[: m.start()] + text[m.end() :]
    for line in rest.splitlines():
        if line.startswith("FROM "):
            found["from"] = line[5:]
        elif line.startswith("PARAMETER "):
            _, key, value = line.split(" ", 2)
            found["parameters"].append((key, value))
    return found


# ----------------------------------------------------------------------------------------------- tests
def tokenizer_with(base: str, folder: Path, template: str | None) -> Path:
    shutil.copytree(base, folder)
    if template is not None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(folder))
        tok.chat_template = template
        tok.save_pretrained(str(folder))
    return folder


def check_against_tokenizer(model_dir: Path, tmp: Path, convs=CONVERSATIONS) -> dict:
    from transformers import AutoTokenizer

    from engine.trainer import convert

    tmp.mkdir()
    info = convert.write_modelfile(model_dir, tmp, "m.gguf", str(tmp))
    assert info["written"] and info["template_checked"]
    mf = parse_modelfile((tmp / "Modelfile").read_text())
    assert mf["from"] == "./m.gguf"
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    for conv in convs:
        generation = conv[-1]["role"] == "user"
        want = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=generation)
        assert go_render(mf["template"], conv) == want, conv
    return {**info, "modelfile": mf}


def test_demo_chatml_modelfile_renders_like_the_tokenizer(demo_paths, tmp_path):
    model = tokenizer_with(demo_paths["model_dir"], tmp_path / "demo", None)
    info = check_against_tokenizer(model, tmp_path / "out")
    params = info["modelfile"]["parameters"]
    assert ("stop", '"<|im_end|>"') in params
    assert ("temperature", "0") in params  # the demo's generation_config decodes greedily
    assert info["command"] == f"cd {tmp_path / 'out'} && ollama create out -f Modelfile"


def test_llama3_style_template(demo_paths, tmp_path):
    model = tokenizer_with(demo_paths["model_dir"], tmp_path / "l3", LLAMA3)
    info = check_against_tokenizer(model, tmp_path / "out")
    assert info["modelfile"]["template"].startswith('{{ $prev := "" }}')
    assert ("stop", '"<|im_end|>"') in info["modelfile"]["parameters"]  # the eos token


def test_template_without_system_messages(demo_paths, tmp_path):
    model = tokenizer_with(demo_paths["model_dir"], tmp_path / "ns", NO_SYSTEM)
    convs = [c for c in CONVERSATIONS if c[0]["role"] != "system"]
    check_against_tokenizer(model, tmp_path / "out", convs)


def test_renderer_is_strict():
    """The interpreter used above refuses what it does not know, so a template outside the subset cannot pass."""
    with pytest.raises(AssertionError):
        go_render("{{ range $i, $m := .Messages }}{{ printf .Content }}{{ end }}", [{"role": "user", "content": "x"}])
    assert go_render('{{ "{{" }}x', []) == "{{x"
