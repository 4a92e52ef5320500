"""Write a merged Hugging Face model folder as one GGUF file (F16 / BF16 / Q8_0), with its tokenizer and chat template.

Heavy: imports numpy, safetensors, gguf (the format's own library: its writer, tensor-name maps and quantizers) and,
for a SentencePiece-style tokenizer, transformers. Used by ``engine.trainer.convert`` (the export subprocess);
the light half (which architectures, formats and tokenizers convert; the size estimate) is
``engine.export.gguf_checks``, which this module follows so that a refusal there is never a surprise here.

What it writes, as llama.cpp's ``convert_hf_to_gguf.py`` does for the same architectures: the hyperparameters under
the architecture's keys; every tensor under its GGUF name (``gguf.get_tensor_name_map``), Llama / Mistral query and
key projections permuted to the rotary layout llama.cpp expects; 1-D tensors (norms, biases) in F32, 2-D ones in the
chosen type (Q8_0 only where a row is a whole number of 32-value blocks, else F16); the vocabulary in id order with
each token's type (control for special added tokens), the BPE merges, the special token ids, whether BOS / EOS are
added, and the chat template (``tokenizer.chat_template``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from engine.export import gguf_checks as gc
from engine.export import messages

Progress = Callable[[int, int, str], None]


def _gguf():
    import gguf

    return gguf


def load_state(model_dir: Path):
    """name -> float32 numpy array for every tensor of the folder's safetensors files."""
    import numpy as np
    from safetensors import safe_open

    state = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            for name in fh.keys():
                state[name] = fh.get_tensor(name).float().numpy().astype(np.float32, copy=False)
    return state


def permute_qk(w, n_head: int, n_head_kv: int | None):
    """llama.cpp's rotary layout for Llama q/k projections (convert_hf_to_gguf ``LlamaModel.permute``)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensor_type(name: str, shape: tuple, fmt: str):
    """The GGML type a tensor is stored in for ``fmt``."""
    g = _gguf()
    q = g.GGMLQuantizationType
    if len(shape) < 2:
        return q.F32
    if fmt == "gguf-f16":
        return q.F16
    if fmt == "gguf-bf16":
        return q.BF16
    if fmt == "gguf-q8_0":
        return q.Q8_0 if shape[-1] % 32 == 0 else q.F16
    raise ValueError(fmt)


def encode(data, qtype):
    """(array to write, raw_dtype for the writer or None) for float32 ``data`` stored as ``qtype``."""
    import numpy as np

    g = _gguf()
    q = g.GGMLQuantizationType
    if qtype == q.F32:
        return data.astype(np.float32), None
    if qtype == q.F16:
        return data.astype(np.float16), None
    return g.quants.quantize(data, qtype), qtype


FILE_TYPES = {"gguf-f16": 1, "gguf-bf16": 32, "gguf-q8_0": 7}  # llama_ftype: MOSTLY_F16, MOSTLY_BF16, MOSTLY_Q8_0


# ----------------------------------------------------------------------------------------------- tokenizer
def vocab_entries(model_dir: Path, n_vocab: int) -> tuple[str, list[bytes], list[float], list[int]]:
    """(tokenizer model, tokens, scores, token types) in id order, padded to the model's vocab size."""
    g = _gguf()
    tt = g.TokenType
    tj = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    kind = gc.tokenizer_kind(tj)
    vocab: dict[int, str] = {i: t for t, i in tj["model"]["vocab"].items()}
    special, added = set(), set()
    for item in tj.get("added_tokens") or []:
        vocab[item["id"]] = item["content"]
        (special if item.get("special") else added).add(item["id"])
    tokens, scores, types = [], [], []
    for i in range(n_vocab):
        text = vocab.get(i)
        if text is None:
            tokens.append(f"[PAD{i}]".encode())
            scores.append(-1000.0)
            types.append(int(tt.UNUSED))
            continue
        tokens.append(text.encode("utf-8"))
        if i in special:
            kind_i = tt.CONTROL
        elif i in added:
            kind_i = tt.USER_DEFINED
        elif kind == "llama" and len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            kind_i = tt.BYTE
        else:
            kind_i = tt.NORMAL
        types.append(int(kind_i))
        # SentencePiece BPE picks merges by score: a piece's rank (its id) is its priority; byte-level BPE uses merges
        scores.append(-float(i) if kind == "llama" and kind_i == tt.NORMAL else 0.0)
    return kind, tokens, scores, types


def add_tokenizer(w, model_dir: Path, n_vocab: int) -> dict:
    """Vocabulary, merges, special ids, add-BOS/EOS flags and the chat template into the writer; what was added."""
    g = _gguf()
    tj = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    kind, tokens, scores, types = vocab_entries(model_dir, n_vocab)
    w.add_tokenizer_model(kind)
    pre = gc.pre_tokenizer_name(tj) if kind == "gpt2" else "default"
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    special = g.SpecialVocab(model_dir, load_merges=(kind == "gpt2"), n_vocab=n_vocab)
    template = gc.chat_template_of(model_dir)
    special.chat_template = template or None
    special.add_to_gguf(w, quiet=True)
    return {
        "tokenizer_model": kind,
        "pre_tokenizer": pre,
        "tokens": n_vocab,
        "merges": len(special.merges),
        "special_token_ids": dict(special.special_token_ids),
        "chat_template": bool(template),
    }


# ----------------------------------------------------------------------------------------------- hyperparameters
def add_hparams(w, cfg: dict, arch: str) -> None:
    g = _gguf()
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    hidden = int(cfg["hidden_size"])
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    w.add_context_length(int(cfg.get("max_position_embeddings") or 2048))
    w.add_embedding_length(hidden)
    w.add_block_count(int(cfg["num_hidden_layers"]))
    w.add_feed_forward_length(int(cfg["intermediate_size"]))
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps") or 1e-6))
    w.add_rope_freq_base(float(gc.rope_theta(cfg)))
    w.add_rope_dimension_count(head_dim)
    if head_dim != hidden // heads or arch in ("qwen3",):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_vocab_size(int(cfg["vocab_size"]))
    scaling = gc.rope_scaling(cfg)
    if scaling and scaling.get("rope_type", scaling.get("type")) == "linear":
        w.add_rope_scaling_type(g.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(scaling["factor"]))


def llama3_rope_freqs(cfg: dict):
    """The ``rope_freqs`` tensor of Llama 3.1-style rope scaling, as convert_hf_to_gguf computes it."""
    import numpy as np

    sc = gc.rope_scaling(cfg)
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    dim = int(cfg.get("head_dim") or hidden // heads)
    base = float(gc.rope_theta(cfg))
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = (
        float(sc.get("factor", 8.0)),
        float(sc.get("low_freq_factor", 1.0)),
        float(sc.get("high_freq_factor", 4.0)),
    )
    old_ctx = int(sc.get("original_max_position_embeddings", 8192))
    low_wl, high_wl = old_ctx / low, old_ctx / high
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old_ctx / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# ----------------------------------------------------------------------------------------------- the file
def write_gguf(model_dir: Path, out_file: Path, fmt: str, progress: Progress | None = None) -> dict:
    """Convert ``model_dir`` (config.json, safetensors, tokenizer.json) to ``out_file``; a report of what was written.
    Raises ``engine.export.gguf_checks.GgufError`` for what cannot be converted (checked before any tensor)."""
    g = _gguf()
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    arch = gc.check_convertible(model_dir)  # raises, naming the architecture or the tokenizer
    gguf_arch = gc.GGUF_ARCH[arch]
    n_layers = int(cfg["num_hidden_layers"])
    tmap = g.get_tensor_name_map(getattr(g.MODEL_ARCH, gguf_arch.upper()), n_layers)
    w = g.GGUFWriter(str(out_file), gguf_arch)
    w.add_name(model_dir.name)
    add_hparams(w, cfg, arch)
    w.add_file_type(FILE_TYPES[fmt])
    w.add_quantization_version(g.GGML_QUANT_VERSION)
    tok = add_tokenizer(w, model_dir, int(cfg["vocab_size"]))
    state = load_state(model_dir)
    tied = bool(cfg.get("tie_word_embeddings")) or "lm_head.weight" not in state
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    names = [n for n in state if not (tied and n == "lm_head.weight") and not n.endswith("rotary_emb.inv_freq")]
    delay = float(os.environ.get("STUDIO_EXPORT_TENSOR_DELAY", "0") or 0)  # tests use it to cancel mid-convert
    types: dict[str, str] = {}
    extra = 1 if gc.rope_kind(cfg) == "llama3" else 0
    for i, name in enumerate(names, start=1):
        data = state.pop(name)
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise gc.GgufError(messages.message("export.gguf_unmapped_tensor", name=name, arch=arch))
        if gguf_arch == "llama" and name.endswith("q_proj.weight"):
            data = permute_qk(data, heads, heads)
        elif gguf_arch == "llama" and name.endswith("k_proj.weight"):
            data = permute_qk(data, heads, kv)
        qtype = tensor_type(new, data.shape, fmt)
        arr, raw = encode(data, qtype)
        w.add_tensor(new, arr, raw_dtype=raw)
        types[new] = qtype.name
        if progress:
            progress(i, len(names) + extra, new)
        if delay:
            time.sleep(delay)
    if extra:
        w.add_tensor(g.TENSOR_NAMES[g.MODEL_TENSOR.ROPE_FREQS] + ".weight", llama3_rope_freqs(cfg))
        types["rope_freqs.weight"] = "F32"
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    counts: dict[str, int] = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    return {"arch": gguf_arch, "tensors": len(types), "tensor_types": counts, "tokenizer": tok}
