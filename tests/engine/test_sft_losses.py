"""sft's token losses beside cross-entropy (``train.loss``: dft, asft, eaft; LLaMA-Factory's use_dft_loss /
use_asft_loss / use_eaft_loss): each formula against a computation written out token by token on fixed logits with
untrained (-100) positions; the spec's refusals, each naming its field; and a short training run on the demo model
with each loss (asft with full fine-tuning, whose reference is a frozen copy, and with LoRA, whose reference is the
base with the adapter off)."""

from __future__ import annotations

import math

import pytest

from engine.spec.schema import SpecError, parse_spec
from tests.helpers import demo_spec

torch = pytest.importorskip("torch")

# 2 rows x 4 positions x vocabulary 5; -100 marks untrained positions (prompt, padding)
LOGITS = [
    [[2.0, 0.5, -1.0, 0.0, 1.0], [0.1, 0.2, 0.3, 0.4, 0.5], [3.0, -2.0, 0.0, 1.0, -1.0], [0.0, 0.0, 0.0, 0.0, 0.0]],
    [[-1.0, 2.5, 0.5, 0.0, 1.5], [1.0, 1.0, -3.0, 2.0, 0.0], [0.5, -0.5, 1.5, -1.5, 0.0], [2.0, 2.0, 1.0, 0.0, -1.0]],
]
REF = [
    [[1.0, 1.0, 0.0, 0.0, 0.5], [0.0, 0.3, 0.3, 0.1, 0.2], [2.0, -1.0, 0.5, 0.5, -1.0], [1.0, 0.0, 0.0, 0.0, 0.0]],
    [[0.0, 2.0, 0.0, 0.0, 1.0], [0.5, 1.5, -2.0, 1.0, 0.0], [0.0, 0.0, 1.0, -1.0, 0.5], [1.0, 2.0, 1.0, 0.5, -1.0]],
]
TARGETS = [[4, -100, 0, -100], [1, 3, -100, 0]]


def probs(row: list[float]) -> list[float]:
    z = sum(math.exp(v) for v in row)
    return [math.exp(v) / z for v in row]


def trained():
    for i, row in enumerate(TARGETS):
        for j, target in enumerate(row):
            if target != -100:
                yield LOGITS[i][j], REF[i][j], target


def dft_by_hand(count: float) -> float:
    return sum(-math.log(probs(lg)[t]) * probs(lg)[t] for lg, _, t in trained()) / count


def eaft_by_hand(alpha: float, count: float) -> float:
    total = 0.0
    for lg, _, t in trained():
        top = probs(sorted(lg, reverse=True)[:20])  # vocabulary 5: the top 20 are all of them
        entropy = -sum(p * math.log(p) for p in top)
        total += -math.log(probs(lg)[t]) * (entropy / 3.0) ** alpha
    return total / count


def kl_by_hand(lg: list[float], ref: list[float]) -> float:
    p, q = probs(lg), probs(ref)
    return sum(qv * (math.log(qv) - math.log(pv)) for pv, qv in zip(p, q))


def tensors():
    return torch.tensor(LOGITS, requires_grad=True), torch.tensor(REF), torch.tensor(TARGETS)


def test_dft_is_cross_entropy_times_the_detached_probability():
    from engine.trainer.sft_losses import dft_loss

    logits, _, targets = tensors()
    assert dft_loss(logits, targets).item() == pytest.approx(dft_by_hand(5), rel=1e-6)  # 5 trained tokens
    loss = dft_loss(logits, targets, num_items=torch.tensor(10))  # the accumulated batch's count
    assert loss.item() == pytest.approx(dft_by_hand(10), rel=1e-6)
    loss.backward()
    # the weight is detached: d/dz of p_t * CE with p_t constant is p_t * (softmax - onehot) / count
    p = probs(LOGITS[0][0])
    expected = [p[4] * (pv - (k == 4)) / 10 for k, pv in enumerate(p)]
    assert logits.grad[0, 0].tolist() == pytest.approx(expected, rel=1e-5)
    assert logits.grad[0, 1].abs().sum().item() == 0  # an untrained position gets no gradient


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.0])
def test_eaft_weights_each_token_by_its_top_k_entropy(alpha):
    from engine.trainer.sft_losses import eaft_loss

    logits, _, targets = tensors()
    assert eaft_loss(logits, targets, alpha).item() == pytest.approx(eaft_by_hand(alpha, 5), rel=1e-6)
    assert eaft_loss(logits, targets, alpha, num_items=7).item() == pytest.approx(eaft_by_hand(alpha, 7), rel=1e-6)


def test_eaft_entropy_is_over_the_20_largest_logits():
    """A vocabulary of 30: the entropy is the renormalised softmax of the 20 largest logits, not of all 30."""
    from engine.trainer.sft_losses import eaft_loss

    row = [float(k % 7) - 0.1 * k for k in range(30)]
    logits, targets = torch.tensor([[row]]), torch.tensor([[3]])
    top = probs(sorted(row, reverse=True)[:20])
    entropy = -sum(p * math.log(p) for p in top)
    expected = -math.log(probs(row)[3]) * entropy / 3.0
    assert eaft_loss(logits, targets, 1.0).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_asft_is_dft_plus_alpha_kl_from_the_reference(alpha):
    from engine.trainer.sft_losses import asft_loss

    logits, ref, targets = tensors()
    kl = sum(kl_by_hand(lg, r) for lg, r, _ in trained())
    expected = dft_by_hand(5) + alpha * kl / 5
    assert asft_loss(logits, ref, targets, alpha).item() == pytest.approx(expected, rel=1e-6)
    # the same logits as the reference: no KL, dft alone
    assert asft_loss(logits, logits.detach(), targets, alpha).item() == pytest.approx(dft_by_hand(5), rel=1e-6)


def test_targets_are_the_next_positions_labels():
    from engine.trainer.sft_losses import next_token_targets

    labels = torch.tensor([[-100, -100, 7, 8], [-100, 5, 6, -100]])
    assert next_token_targets(labels).tolist() == [[-100, 7, 8, -100], [5, 6, -100, -100]]


# ----------------------------------------------------------------------------------------------- the spec's rules
def spec_dict(demo_paths, method: dict | None = None, train: dict | None = None, launch: dict | None = None):
    spec = demo_spec(demo_paths, method={"stage": "sft", **(method or {})}, train=train or {}, launch=launch or {})
    return spec.model_dump(mode="json")


@pytest.mark.parametrize(
    ("method", "train", "launch", "field", "words"),
    [
        ({"stage": "pt"}, {"loss": "dft"}, {}, "train.loss", "set method.stage to sft"),
        ({"stage": "dpo"}, {"loss": "eaft"}, {}, "train.loss", "stage dpo"),
        ({}, {"loss": "eaft", "liger_kernel": "on"}, {"device": "cuda"}, "train.liger_kernel", "fused"),
        ({"lora": {"pissa_init": True}}, {"loss": "asft"}, {}, "train.loss", "PiSSA"),
        (
            {"finetuning": "full"},
            {"loss": "asft"},
            {"backend": "deepspeed", "deepspeed": {"zero_stage": 3}, "device": "cuda"},
            "train.loss",
            "ZeRO-3",
        ),
    ],
)
def test_refusal_names_the_field(demo_paths, method, train, launch, field, words):
    data = spec_dict(demo_paths)
    for group, values in (("method", method), ("train", train), ("launch", launch)):
        for key, value in values.items():
            if isinstance(value, dict):
                data[group][key] = {**data[group][key], **value}
            else:
                data[group][key] = value
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert any(p == field and words in str(m) for p, m in info.value.problems), info.value.problems


def test_asft_with_lora_and_zero3_is_accepted(demo_paths):
    """LoRA's reference is the base with the adapter off: nothing to partition."""
    data = spec_dict(demo_paths)
    data["train"]["loss"] = "asft"
    data["launch"].update(backend="deepspeed", device="cuda", num_processes=2)
    data["launch"]["deepspeed"] = {**data["launch"]["deepspeed"], "zero_stage": 3}
    assert parse_spec(data).train.loss == "asft"


def test_plan_counts_asft_reference_copy_for_full_only(demo_paths):
    from engine.plan.planner import plan

    def planned(finetuning, loss):
        data = spec_dict(demo_paths, method={"finetuning": finetuning}, train={"loss": loss})
        return plan(parse_spec(data), gpu_mem_gib=80)

    full_ce, full_asft = planned("full", "cross_entropy"), planned("full", "asft")
    assert full_ce.components["reference_model"] == 0 < full_asft.components["reference_model"]
    assert full_asft.total_bytes - full_ce.total_bytes >= full_asft.components["reference_model"]
    lora_ce, lora_asft = planned("lora", "cross_entropy"), planned("lora", "asft")
    assert lora_asft.components["reference_model"] == 0 and lora_asft.total_bytes == lora_ce.total_bytes


# ----------------------------------------------------------------------------------------------- trained
@pytest.mark.parametrize(
    ("loss", "method", "trained_logits"),
    [("dft", "lora", True), ("eaft", "lora", False), ("asft", "lora", True), ("asft", "full", False)],
)
def test_short_run_with_each_loss_ends_with_finite_losses(demo_paths, tmp_path, loss, method, trained_logits):
    """Two steps of two accumulated batches; logits at trained positions only (TrainedLogitsCollator's
    shift_labels) or at every position (the labels shifted here)."""
    from tests.engine.test_train_methods import finished_with_finite_losses, method_spec, train_keeping_trainer

    train = {"loss": loss, "gradient_accumulation": 2, "trained_logits_only": trained_logits}
    spec = method_spec(demo_paths, {"finetuning": method}, train)
    events, trainer = train_keeping_trainer(spec, tmp_path / "run")
    finished_with_finite_losses(events)
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["trained_logits_only"] is trained_logits
    assert type(trainer).__name__ == "TokenLossTrainer" and trainer.token_loss == loss
    if loss == "asft":
        # full: a frozen copy, untouched by the steps; LoRA: the base with the adapter off, no copy
        assert (trainer.reference is not None) == (method == "full")
        if method == "full":
            ref = dict(trainer.reference.named_parameters())
            moved = [n for n, p in trainer.model.named_parameters() if not torch.equal(p.detach().cpu(), ref[n].cpu())]
            assert moved and not any(p.requires_grad for p in ref.values())


def test_asft_evaluates_with_its_own_loss(demo_paths, tmp_path):
    """The validation split's loss is the run's loss (the reference's KL included), finite at each evaluation."""
    from tests.engine.test_train_methods import method_spec, train_keeping_trainer

    spec = method_spec(demo_paths, {}, {"loss": "asft", "eval_steps": 2, "eval_strategy": "steps"})
    spec = spec.model_copy(update={"data": spec.data.model_copy(update={"val_size": 0.25})})
    events, _ = train_keeping_trainer(spec, tmp_path / "run")
    evals = [e["payload"]["eval_loss"] for e in events if e["type"] == "eval"]
    assert evals and all(math.isfinite(v) and v > 0 for v in evals), evals


def test_dft_run_logs_less_than_the_same_run_with_cross_entropy(demo_paths, tmp_path):
    """The same rows and seed: dft's first loss is each token's cross-entropy times a probability below 1."""
    from tests.engine.test_train_methods import method_spec, train_keeping_trainer

    first = {}
    for loss in ("cross_entropy", "dft"):
        events, _ = train_keeping_trainer(method_spec(demo_paths, {}, {"loss": loss}), tmp_path / loss)
        first[loss] = next(e["payload"]["loss"] for e in events if e["type"] == "log")
    assert 0 < first["dft"] < first["cross_entropy"], first
