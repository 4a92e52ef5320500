"""Per-sample sdpa (engine.trainer.attention): the same logits and gradients as transformers' block-diagonal mask
for rows holding several samples, on tiny models of every supported architecture; plain sdpa where a batch has a
padding mask; and when a run takes it (the choice and its reason)."""

from __future__ import annotations

import pytest

from engine.machine.kernels import PER_SAMPLE_ARCHS, packed_attention_decision
from engine.trainer import attention

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TINY = dict(
    vocab_size=211,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention, as real checkpoints have
    max_position_embeddings=256,
    sliding_window=None,  # Mistral v0.2 on and Qwen's full-attention layers; a window is refused (test_choose)
)


def _tiny(model_type: str, impl: str, seed: int = 0):
    from transformers import AutoConfig, AutoModelForCausalLM

    attention.register()
    config = AutoConfig.for_model(model_type, **TINY)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=impl, dtype=torch.float32)
    model.config.use_cache = False
    return model


def _grads(model, batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    out = model(**batch)
    out.loss.backward()
    return out.logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def _features(lengths, seed=1):
    g = torch.Generator().manual_seed(seed)
    feats = []
    for n in lengths:
        ids = torch.randint(3, TINY["vocab_size"], (n,), generator=g).tolist()
        feats.append({"input_ids": ids, "labels": [-100] * (n // 3) + ids[n // 3 :]})
    return feats


@pytest.mark.parametrize("model_type", PER_SAMPLE_ARCHS)
def test_per_sample_equals_the_block_diagonal_mask(model_type):
    """A padding-free row (one row, five samples of uneven length) and packed rows (two rows, a pad block at the
    end of the shorter): every logit and every gradient agrees with transformers' masked sdpa, and each sample's
    logits equal the sample run alone (no attention across samples)."""
    from engine.trainer.collators import FlatteningCollator, PackingCollator

    masked, per_sample = _tiny(model_type, "sdpa"), _tiny(model_type, attention.NAME)
    assert per_sample.config._attn_implementation == attention.NAME
    feats = _features((7, 19, 1, 12, 30))
    packed_rows = [
        {"input_ids": feats[0]["input_ids"] + feats[1]["input_ids"], "labels": feats[0]["labels"] + feats[1]["labels"],
         "position_ids": list(range(7)) + list(range(19))},
        {"input_ids": feats[3]["input_ids"], "labels": feats[3]["labels"]},
    ]  # fmt: skip
    for batch in (FlatteningCollator()(feats), PackingCollator(0)(packed_rows)):
        logits_m, grads_m = _grads(masked, batch)
        logits_p, grads_p = _grads(per_sample, batch)
        assert (logits_m - logits_p).abs().max().item() < 1e-5
        assert len(grads_m) == len(grads_p) > 0
        assert max((a - b).abs().max().item() for a, b in zip(grads_m, grads_p)) < 1e-5
    flat = FlatteningCollator()(feats)
    with torch.no_grad():
        row = per_sample(input_ids=flat["input_ids"], position_ids=flat["position_ids"], use_cache=False).logits[0]
        alone = torch.cat([per_sample(input_ids=torch.tensor([f["input_ids"]])).logits[0] for f in feats])
    assert (row - alone).abs().max().item() < 1e-5


def test_spans_found_on_the_host_reach_every_layer(monkeypatch):
    """SampleSpansCollator's batches carry their spans through the model's forward to each attention layer: the same
    logits and gradients as transformers' mask, and the device's position ids are never read back for them."""
    from engine.trainer.collators import FlatteningCollator, PackingCollator

    masked, per_sample = _tiny("llama", "sdpa"), _tiny("llama", attention.NAME)
    feats = _features((7, 19, 1, 12, 30))
    rows = [{"input_ids": f["input_ids"], "labels": f["labels"]} for f in feats[:2]]
    for inner in (FlatteningCollator(), PackingCollator(0)):
        features = feats if isinstance(inner, FlatteningCollator) else rows
        plain, batch = inner(features), attention.SampleSpansCollator(inner)(features)
        assert batch[attention.SPANS] == attention.host_spans(plain["position_ids"])
        logits_m, grads_m = _grads(masked, plain)
        with monkeypatch.context() as m:
            m.setattr(attention, "spans", lambda *a: pytest.fail("spans read from the model's position ids"))
            logits_p, grads_p = _grads(per_sample, batch)
        assert (logits_m - logits_p).abs().max().item() < 1e-5
        assert max((a - b).abs().max().item() for a, b in zip(grads_m, grads_p)) < 1e-5
    padded = attention.SampleSpansCollator(lambda f: {"input_ids": 0, "attention_mask": 1, "position_ids": 0})([])
    assert attention.SPANS not in padded  # a padded batch goes to plain sdpa with its mask


def test_a_padded_batch_keeps_its_padding_mask():
    """Padded batches (an attention_mask with zeros) go to plain sdpa with transformers' mask: the same logits."""
    from engine.trainer.collators import PadCollator

    masked, per_sample = _tiny("llama", "sdpa"), _tiny("llama", attention.NAME)
    batch = PadCollator(0)(_features((9, 4, 15)))
    assert (batch["attention_mask"] == 0).any()
    logits_m, grads_m = _grads(masked, batch)
    logits_p, grads_p = _grads(per_sample, batch)
    keep = batch["attention_mask"].bool()
    assert (logits_m[keep] - logits_p[keep]).abs().max().item() < 1e-5
    assert max((a - b).abs().max().item() for a, b in zip(grads_m, grads_p)) < 1e-5


def test_spans_follow_transformers_packed_sequence_rule():
    from transformers.masking_utils import find_packed_sequence_indices

    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5, 0, 1, 0, 1]])
    spans = attention.spans(pos, 2)
    assert spans == (((0, 3), (3, 5), (5, 6), (6, 10)), ((0, 6), (6, 8), (8, 10)))
    assert attention.host_spans(pos) == spans  # what SampleSpansCollator hands the model with a batch
    ids = find_packed_sequence_indices(pos)
    for row, row_spans in zip(ids.tolist(), spans):
        assert [row[s] for s, _ in row_spans] == sorted(set(row))  # one transformers sequence id per span
        assert all(len(set(row[s:e])) == 1 for s, e in row_spans)
    assert attention.spans(pos, 2) is spans  # one computation per forward, shared by the layers


LLAMA = {"model_type": "llama"}


@pytest.mark.parametrize(
    ("mode", "attn", "config", "device", "row", "expected", "why"),
    [
        ("auto", "sdpa", LLAMA, "cpu", 512, True, "per sample"),
        ("auto", "sdpa", LLAMA, "cuda", 16384, False, "not measured on GPUs"),
        ("per_sample", "sdpa", LLAMA, "cuda", 512, True, "per sample"),
        ("mask", "sdpa", LLAMA, "cpu", 512, False, "packed_attention: mask"),
        ("auto", "sdpa", LLAMA, "cpu", 0, False, "one sample per row"),
        ("auto", "flash_attention_2", LLAMA, "cuda", 16384, False, "flash_attention_2 attention"),
        ("auto", "sdpa", {"model_type": "gemma2"}, "cpu", 512, False, "model type gemma2"),
        ("auto", "sdpa", {"model_type": "mistral", "sliding_window": 4096}, "cpu", 512, False, "sliding-window"),
        ("auto", "sdpa", {"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False}, "cpu", 512,
         True, "per sample"),
        ("auto", "sdpa", {"model_type": "qwen3", "layer_types": ["full_attention", "sliding_attention"]}, "cpu",
         512, False, "sliding-window"),
    ],
)  # fmt: skip
def test_decision(mode, attn, config, device, row, expected, why):
    chosen, reason = packed_attention_decision(mode, attn, config, device, row)
    assert chosen is expected and why in reason


def test_row_tokens_by_batch_layout():
    from engine.machine.kernels import packed_row_tokens
    from engine.spec.schema import parse_spec

    def spec(**groups):
        base = {"model": {"name_or_path": "m"}, "data": {"datasets": ["d"], "cutoff_len": 1024}}
        for k, v in groups.items():
            base[k] = {**base.get(k, {}), **v}
        return parse_spec(base, context=False)

    batch = {"train": {"per_device_batch_size": 4}}
    assert packed_row_tokens(spec(**batch)) == 4096  # padding-free: the micro-batch in one row
    assert packed_row_tokens(spec(data={"datasets": ["d"], "cutoff_len": 1024, "packing": True}, **batch)) == 1024
    assert packed_row_tokens(spec(data={"datasets": ["d"], "cutoff_len": 1024, "padding_free": "off"}, **batch)) == 0
    assert packed_row_tokens(spec(method={"stage": "dpo"}, **batch)) == 0


@pytest.mark.gpu
def test_per_sample_equals_the_mask_on_cuda_in_bf16():
    """The same check on a GPU in bf16 (where sdpa picks its flash kernel for the per-sample spans): logits agree to
    bf16 precision."""
    from engine.trainer.collators import FlatteningCollator

    masked = _tiny("llama", "sdpa").to("cuda", torch.bfloat16)
    per_sample = _tiny("llama", attention.NAME).to("cuda", torch.bfloat16)
    batch = {
        k: v.to("cuda") if hasattr(v, "to") else v for k, v in FlatteningCollator()(_features((40, 7, 90, 3))).items()
    }
    logits_m, _ = _grads(masked, batch)
    logits_p, _ = _grads(per_sample, batch)
    assert (logits_m.float() - logits_p.float()).abs().max().item() < 5e-2
