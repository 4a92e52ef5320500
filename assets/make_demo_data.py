"""Write the bundled demo datasets into assets/data/ (deterministic: a fixed seed, content generated here).

Run ``python assets/make_demo_data.py [OUT_DIR]``; the output is committed, so a fresh clone needs no generation step.
Stdlib only. The facts are templated (arithmetic, unit conversions, colour names, capital cities) in English
and Chinese, so a tiny model can visibly learn them and every row is our own.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data"
SEED = 20240601

CAPITALS = [
    ("France", "Paris", "法国", "巴黎"),
    ("Germany", "Berlin", "德国", "柏林"),
    ("Japan", "Tokyo", "日本", "东京"),
    ("Italy", "Rome", "意大利", "罗马"),
    ("Spain", "Madrid", "西班牙", "马德里"),
    ("China", "Beijing", "中国", "北京"),
    ("Egypt", "Cairo", "埃及", "开罗"),
    ("Canada", "Ottawa", "加拿大", "渥太华"),
    ("Russia", "Moscow", "俄罗斯", "莫斯科"),
    ("Brazil", "Brasilia", "巴西", "巴西利亚"),
    ("India", "New Delhi", "印度", "新德里"),
    ("Australia", "Canberra", "澳大利亚", "堪培拉"),
    ("Kenya", "Nairobi", "肯尼亚", "内罗毕"),
    ("Mexico", "Mexico City", "墨西哥", "墨西哥城"),
    ("Greece", "Athens", "希腊", "雅典"),
    ("Thailand", "Bangkok", "泰国", "曼谷"),
    ("Portugal", "Lisbon", "葡萄牙", "里斯本"),
    ("Norway", "Oslo", "挪威", "奥斯陆"),
    ("Peru", "Lima", "秘鲁", "利马"),
    ("Vietnam", "Hanoi", "越南", "河内"),
]
COLOURS = [
    ("red", "红色"),
    ("green", "绿色"),
    ("blue", "蓝色"),
    ("yellow", "黄色"),
    ("black", "黑色"),
    ("white", "白色"),
    ("purple", "紫色"),
    ("orange", "橙色"),
    ("pink", "粉色"),
    ("grey", "灰色"),
    ("brown", "棕色"),
    ("gold", "金色"),
]
UNITS = [  # (en unit, en target, zh unit, zh target, factor)
    ("kilometres", "metres", "千米", "米", 1000),
    ("kilograms", "grams", "千克", "克", 1000),
    ("hours", "minutes", "小时", "分钟", 60),
    ("minutes", "seconds", "分钟", "秒", 60),
    ("metres", "centimetres", "米", "厘米", 100),
    ("days", "hours", "天", "小时", 24),
]
SYSTEMS_EN = ["You are a helpful assistant.", "You are a concise assistant. Answer in one sentence."]
SYSTEMS_ZH = ["你是一个乐于助人的助手。", "你是一个简洁的助手，请用一句话回答。"]


def arithmetic(rng: random.Random, zh: bool) -> tuple[str, str, str]:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    op = rng.choice(["+", "-", "*"])
    val = {"+": a + b, "-": a - b, "*": a * b}[op]
    if zh:
        word = {"+": "加", "-": "减", "*": "乘以"}[op]
        if rng.random() < 0.4:
            return "计算下面的算式。", f"{a} {op} {b}", f"{a} {word} {b} 等于 {val}。"
        return f"{a} {word} {b} 等于多少？", "", f"{a} {word} {b} 等于 {val}。"
    word = {"+": "plus", "-": "minus", "*": "times"}[op]
    if rng.random() < 0.4:
        return "Compute the expression.", f"{a} {op} {b}", f"{a} {word} {b} is {val}."
    return f"What is {a} {word} {b}?", "", f"{a} {word} {b} is {val}."


def conversion(rng: random.Random, zh: bool) -> tuple[str, str, str]:
    src, dst, zsrc, zdst, factor = rng.choice(UNITS)
    n = rng.randint(1, 40)
    if zh:
        return f"{n} {zsrc}等于多少{zdst}？", "", f"{n} {zsrc}等于 {n * factor} {zdst}。"
    return f"How many {dst} are in {n} {src}?", "", f"{n} {src} is {n * factor} {dst}."


def colour(rng: random.Random, zh: bool) -> tuple[str, str, str]:
    en, cn = rng.choice(COLOURS)
    if zh:
        return "把这个颜色翻译成英文。", cn, f"“{cn}”的英文是 {en}。"
    return "Translate this colour name into Chinese.", en, f'The Chinese for "{en}" is {cn}.'


def capital(rng: random.Random, zh: bool) -> tuple[str, str, str]:
    country, city, zcountry, zcity = rng.choice(CAPITALS)
    if zh:
        return f"{zcountry}的首都是哪里？", "", f"{zcountry}的首都是{zcity}。"
    return f"What is the capital of {country}?", "", f"The capital of {country} is {city}."


MAKERS = [arithmetic, conversion, colour, capital]


def alpaca_rows(rng: random.Random, n: int = 360) -> list[dict]:
    rows = []
    for i in range(n):
        zh = i % 2 == 1
        instruction, inp, output = MAKERS[(i // 2) % len(MAKERS)](rng, zh)
        row = {"instruction": instruction, "input": inp, "output": output}
        if i % 5 == 0:
            row["system"] = rng.choice(SYSTEMS_ZH if zh else SYSTEMS_EN)
        if i % 17 == 0:  # a few rows carry earlier turns (LLaMA-Factory's history: [[prompt, response], ...])
            q, _, a = capital(rng, zh)
            row["history"] = [[q, a]]
        rows.append(row)
    return rows


def sharegpt_rows(rng: random.Random, n: int = 60) -> list[dict]:
    rows = []
    for i in range(n):
        zh = i % 2 == 1
        turns = []
        for _ in range(2 + i % 3):
            q, inp, a = rng.choice(MAKERS)(rng, zh)
            turns += [{"from": "human", "value": f"{q}\n{inp}" if inp else q}, {"from": "gpt", "value": a}]
        row = {"conversations": turns}
        if i % 4 == 0:
            row["system"] = rng.choice(SYSTEMS_ZH if zh else SYSTEMS_EN)
        rows.append(row)
    return rows


def messages_rows(rng: random.Random, n: int = 80) -> list[dict]:
    rows = []
    for i in range(n):
        zh = i % 2 == 1
        msgs = [{"role": "system", "content": rng.choice(SYSTEMS_ZH if zh else SYSTEMS_EN)}] if i % 3 == 0 else []
        for _ in range(1 + i % 2):
            q, inp, a = rng.choice(MAKERS)(rng, zh)
            msgs += [{"role": "user", "content": f"{q}\n{inp}" if inp else q}, {"role": "assistant", "content": a}]
        rows.append({"messages": msgs})
    return rows


def dpo_rows(rng: random.Random, n: int = 120) -> list[dict]:
    rows = []
    for i in range(n):
        zh = i % 2 == 1
        country, city, zcountry, zcity = CAPITALS[i % len(CAPITALS)]
        wrong = CAPITALS[(i + 7) % len(CAPITALS)]
        if i % 4 < 2:
            rows.append(
                {
                    "instruction": f"{zcountry}的首都是哪里？" if zh else f"What is the capital of {country}?",
                    "input": "",
                    "chosen": f"{zcountry}的首都是{zcity}。" if zh else f"The capital of {country} is {city}.",
                    "rejected": f"{zcountry}的首都是{wrong[3]}。"
                    if zh
                    else f"The capital of {country} is {wrong[1]}.",
                }
            )
        else:
            a, b = rng.randint(2, 60), rng.randint(2, 60)
            off = rng.choice([-3, -1, 1, 2, 10])
            rows.append(
                {
                    "instruction": "计算下面的算式。" if zh else "Compute the expression.",
                    "input": f"{a} + {b}",
                    "chosen": f"{a} 加 {b} 等于 {a + b}。" if zh else f"{a} plus {b} is {a + b}.",
                    "rejected": f"{a} 加 {b} 等于 {a + b + off}。" if zh else f"{a} plus {b} is {a + b + off}.",
                }
            )
    return rows


def kto_rows(pairs: list[dict]) -> list[dict]:
    """KTO's data from the preference pairs: each answer on its own, tagged desirable (the chosen one) or not."""
    rows = []
    for pair in pairs:
        for answer, good in ((pair["chosen"], True), (pair["rejected"], False)):
            rows.append({"instruction": pair["instruction"], "input": pair["input"], "output": answer, "label": good})
    return rows


def pretrain_rows(rng: random.Random, n: int = 200) -> list[dict]:
    rows = []
    for i in range(n):
        zh = i % 2 == 1
        facts = []
        for _ in range(3 + i % 4):
            _, _, a = rng.choice(MAKERS)(rng, zh)
            facts.append(a)
        rows.append({"text": ("" if zh else " ").join(facts)})
    return rows


DATASET_INFO = {
    "demo_alpaca": {
        "file_name": "demo_alpaca.json",
        "formatting": "alpaca",
        "columns": {
            "prompt": "instruction",
            "query": "input",
            "response": "output",
            "system": "system",
            "history": "history",
        },
    },
    "demo_sharegpt": {
        "file_name": "demo_sharegpt.json",
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "system": "system"},
        "tags": {
            "role_tag": "from",
            "content_tag": "value",
            "user_tag": "human",
            "assistant_tag": "gpt",
            "system_tag": "system",
        },
    },
    "demo_messages": {
        "file_name": "demo_messages.jsonl",
        "formatting": "sharegpt",
        "columns": {"messages": "messages"},
        "tags": {
            "role_tag": "role",
            "content_tag": "content",
            "user_tag": "user",
            "assistant_tag": "assistant",
            "system_tag": "system",
        },
    },
    "demo_dpo": {
        "file_name": "demo_dpo.json",
        "formatting": "alpaca",
        "ranking": True,
        "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"},
    },
    "demo_pretrain": {
        "file_name": "demo_pretrain.jsonl",
        "columns": {"prompt": "text"},
    },
    "demo_kto": {
        "file_name": "demo_kto.json",
        "formatting": "alpaca",
        "columns": {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "label"},
    },
    "grpo_arith": {
        "file_name": "grpo_arith.json",
        "formatting": "alpaca",
        "columns": {"prompt": "instruction", "response": "output"},
    },
    # the real model's examples (assets/examples/grpo_smollm2_format.yaml, dpo_smollm2_concise.yaml)
    "grpo_add_format": {
        "file_name": "grpo_add_format.json",
        "formatting": "alpaca",
        "columns": {"prompt": "instruction", "response": "output"},
    },
    "demo_dpo_concise": {
        "file_name": "demo_dpo_concise.json",
        "formatting": "alpaca",
        "ranking": True,
        "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"},
    },
    # written by `studio demo` from identity.json / identity_heldout.json with {{name}} and {{author}} filled
    "demo_identity": {
        "file_name": "demo_identity.json",
        "formatting": "alpaca",
        "columns": {"prompt": "instruction", "query": "input", "response": "output"},
    },
    "demo_identity_heldout": {
        "file_name": "demo_identity_heldout.json",
        "formatting": "alpaca",
        "columns": {"prompt": "instruction", "query": "input", "response": "output"},
    },
}


def write_json(path: Path, rows: list[dict]) -> None:
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def main(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    write_json(out / "demo_alpaca.json", alpaca_rows(rng))
    write_json(out / "demo_sharegpt.json", sharegpt_rows(rng))
    write_jsonl(out / "demo_messages.jsonl", messages_rows(rng))
    pairs = dpo_rows(rng)
    write_json(out / "demo_dpo.json", pairs)
    write_jsonl(out / "demo_pretrain.jsonl", pretrain_rows(rng))
    write_json(out / "demo_kto.json", kto_rows(pairs))
    from make_grpo_data import main as write_grpo_data  # beside this script: GRPO's arithmetic prompts

    write_grpo_data([str(out)])
    from make_preference_data import concise_rows  # the real model's DPO pairs

    (out / "demo_dpo_concise.json").write_text(
        json.dumps(concise_rows(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    from make_identity_data import main as write_identity_data  # the identity rows, {{name}} / {{author}} to fill

    write_identity_data([str(out)])
    (out / "dataset_info.json").write_text(
        json.dumps(DATASET_INFO, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    print(f"wrote demo datasets to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
