"""Ollama ``Modelfile`` beside a GGUF: the model's chat template in Ollama's Go-template syntax, its stop tokens and
its sampling defaults. Light: stdlib only.

The Jinja chat template is not translated statement by statement (Jinja is far larger than what Ollama templates
do); it is measured. ``engine.trainer.convert`` renders it with the model's own tokenizer on conversations whose
contents are sentinels and cuts the text around them (``pieces_from``): what comes before a system message, between a
system and a user message, a user and an assistant message, an assistant and a user message, after the last user
message (the generation prompt) and after a closing assistant message. ``go_template`` writes those pieces into a Go
template that walks ``.Messages`` and chooses each piece by the previous message's role; ``render`` is the same walk
in Python, which the export uses to check the pieces against the tokenizer on other conversations before it writes
the file (a template that does not decompose this way is reported, not hidden).
"""

from __future__ import annotations

import json

SENTINELS = {"system": "\x01SYS\x01", "user1": "\x01U1\x01", "assistant1": "\x01A1\x01", "user2": "\x01U2\x01"}
PIECES = ("pre_system", "system_user", "pre_user", "user_assistant", "assistant_user", "tail", "end_assistant")


def pieces_from(with_system: str | None, without_system: str, closed: str) -> dict:
    """The template's pieces from three renders of the sentinel conversations: system + user + assistant + user (with
    the generation prompt; None when the template refuses a system message), the same without the system message,
    and user + assistant without the generation prompt."""
    s = SENTINELS
    pieces = {"system": with_system is not None}
    if with_system is not None:
        a, b = with_system.split(s["system"], 1)
        pieces["pre_system"], pieces["system_user"] = a, b.split(s["user1"], 1)[0]
    else:
        pieces["pre_system"] = pieces["system_user"] = ""
    before, rest = without_system.split(s["user1"], 1)
    ua, rest = rest.split(s["assistant1"], 1)
    au, tail = rest.split(s["user2"], 1)
    pieces.update(pre_user=before, user_assistant=ua, assistant_user=au, tail=tail)
    pieces["end_assistant"] = closed.split(s["assistant1"], 1)[1]
    return pieces


def render(pieces: dict, messages: list[dict]) -> str:
    """The conversation as the Go template renders it (Python twin of ``go_template``'s walk)."""
    out, prev = [], ""
    for i, m in enumerate(messages):
        last = i == len(messages) - 1
        if m["role"] == "system":
            out.append(pieces["pre_system"] + m["content"])
        elif m["role"] == "user":
            lead = {"": "pre_user", "system": "system_user"}.get(prev, "assistant_user")
            out.append(pieces[lead] + m["content"] + (pieces["tail"] if last else ""))
        elif m["role"] == "assistant":
            out.append(pieces["user_assistant"] + m["content"] + (pieces["end_assistant"] if last else ""))
        prev = m["role"]
    return "".join(out)


def _lit(text: str) -> str:
    """Literal text inside a Go template: ``{{`` would open an action, so it is written as an action printing it."""
    return text.replace("{{", '{{ "{{" }}')


def go_template(pieces: dict) -> str:
    p = {k: _lit(pieces[k]) for k in PIECES}
    return (
        '{{ $prev := "" }}{{ range $i, $m := .Messages }}{{ $last := eq (len (slice $.Messages $i)) 1 }}'
        f'{{{{ if eq .Role "system" }}}}{p["pre_system"]}{{{{ .Content }}}}'
        f'{{{{ else if eq .Role "user" }}}}{{{{ if eq $prev "" }}}}{p["pre_user"]}'
        f'{{{{ else if eq $prev "system" }}}}{p["system_user"]}{{{{ else }}}}{p["assistant_user"]}{{{{ end }}}}'
        f"{{{{ .Content }}}}{{{{ if $last }}}}{p['tail']}{{{{ end }}}}"
        f'{{{{ else if eq .Role "assistant" }}}}{p["user_assistant"]}{{{{ .Content }}}}'
        f"{{{{ if $last }}}}{p['end_assistant']}{{{{ end }}}}"
        "{{ end }}{{ $prev = .Role }}{{ end }}"
    )


def stop_tokens(pieces: dict, special_tokens: list[str], eos: str | None) -> list[str]:
    """The special tokens the template writes at a turn's end, and the end-of-sequence token."""
    ends = pieces["end_assistant"] + pieces["assistant_user"]
    found = [t for t in special_tokens if t and t in ends]
    if eos and eos not in found:
        found.append(eos)
    return found


SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "repetition_penalty": "repeat_penalty"}


def sampling(generation: dict) -> dict:
    """Ollama parameters from generation_config.json: greedy (no ``do_sample``) is temperature 0, as transformers
    decodes it; a sampling config carries its temperature / top_p / top_k; a repetition penalty always."""
    out = {}
    if not generation.get("do_sample"):
        out["temperature"] = 0
    else:
        keys = [k for k in SAMPLING if k != "repetition_penalty" and k in generation]
        out.update({SAMPLING[k]: generation[k] for k in keys})
    if generation.get("repetition_penalty") not in (None, 1.0):
        out["repeat_penalty"] = generation["repetition_penalty"]
    return out


def modelfile_text(gguf_name: str, pieces: dict, stops: list[str], generation: dict, system: str = "") -> str:
    lines = [f"FROM ./{gguf_name}", "", f'TEMPLATE """{go_template(pieces)}"""', ""]
    for stop in stops:
        lines.append(f"PARAMETER stop {json.dumps(stop, ensure_ascii=False)}")
    for key, value in sampling(generation).items():
        lines.append(f"PARAMETER {key} {value}")
    if system:
        lines.append(f'SYSTEM """{system}"""')
    return "\n".join(lines) + "\n"


def create_command(out_dir: str, name: str) -> str:
    return f"cd {out_dir} && ollama create {name} -f Modelfile"
