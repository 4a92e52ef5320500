"""sft's token losses beside cross-entropy, ``train.loss`` (LLaMA-Factory's ``use_dft_loss`` / ``use_asft_loss`` /
``use_eaft_loss``), and the Trainer that trains with them.

- dft (dynamic fine-tuning): each answer token's cross-entropy times the model's probability of that token,
  detached, so confident tokens weigh more and the gradient never flows through the weight.
- eaft (entropy-aware): each token's cross-entropy times (H / 3) ** eaft_alpha, detached, where H is the entropy of
  the softmax over the token's 20 largest logits (LLaMA-Factory's approximation of the full entropy; 3 is its scale).
- asft: dft plus asft_alpha times, per token, the KL divergence sum_v q_v (log q_v - log p_v) of the policy p from
  the frozen reference q (the base model as training starts), the direction LLaMA-Factory's ``F.kl_div(log p, q)``
  computes.

Every sum runs over the trained tokens (label != -100) and is divided by ``num_items_in_batch``, the Trainer's count
of trained tokens over the whole accumulated batch (all processes with ``average_tokens_across_devices``), as
transformers' own causal-LM loss is, so gradient accumulation gives the loss of one large batch; without a count
(evaluation) it is the mean over the batch's trained tokens. LLaMA-Factory's asft takes that mean for each
micro-batch even when accumulating, which is the same loss with one micro-batch per step.

asft's reference: for LoRA and OFT the policy itself with its adapter off (``disable_adapter``, as TRL's DPO does:
the base weights are frozen, so this is the base exactly and costs no copy); for full and freeze a frozen deep copy
of the model taken before the first step (engine.plan.memory counts it). The spec refuses it with PiSSA (which
changes the base) and ZeRO-3 (which would partition the copy).

Heavy: torch and transformers inside functions. Built by ``engine.trainer.trainers`` for stage sft when
``train.loss`` is not cross_entropy; works with ``TrainedLogitsCollator``'s ``shift_labels`` (logits only at trained
positions), padded, packed and padding-free batches.
"""

from __future__ import annotations

IGNORE = -100
EAFT_TOP_K = 20  # LLaMA-Factory's top-k for the entropy
EAFT_SCALE = 3.0  # LLaMA-Factory's divisor of that entropy


def _reduce(weighted, num_items):
    """Sum over the trained tokens / the accumulated batch's token count (or the mean without one)."""
    import torch

    if weighted.numel() == 0:
        return weighted.sum()
    if num_items is None:
        return weighted.mean()
    if torch.is_tensor(num_items):
        num_items = num_items.to(weighted.device)
    return weighted.sum() / num_items


def _trained(logits, targets):
    """The logits rows of trained tokens in float32, and their targets: [n, vocab], [n]."""
    keep = targets != IGNORE
    return logits[keep].float(), targets[keep].to(logits.device)


def dft_loss(logits, targets, num_items=None):
    """``logits`` [..., vocab] aligned with ``targets`` [...] (each position's next token, -100 untrained)."""
    import torch.nn.functional as F

    flat, tgt = _trained(logits, targets)
    ce = F.cross_entropy(flat, tgt, reduction="none")
    return _reduce(ce * ce.detach().neg().exp(), num_items)


def eaft_loss(logits, targets, alpha: float = 1.0, num_items=None):
    import torch
    import torch.nn.functional as F

    flat, tgt = _trained(logits, targets)
    ce = F.cross_entropy(flat, tgt, reduction="none")
    with torch.no_grad():
        top = flat.topk(min(EAFT_TOP_K, flat.shape[-1]), dim=-1).values.log_softmax(dim=-1)
        entropy = -(top.exp() * top).sum(dim=-1)
        weight = (entropy / EAFT_SCALE).pow(alpha)
    return _reduce(ce * weight, num_items)


def asft_loss(logits, ref_logits, targets, alpha: float = 0.1, num_items=None):
    """dft plus ``alpha`` times KL(reference || policy) per trained token; ``ref_logits`` shaped like ``logits``."""
    import torch.nn.functional as F

    flat, tgt = _trained(logits, targets)
    ref = ref_logits[targets != IGNORE].float().to(flat.device)
    ce = F.cross_entropy(flat, tgt, reduction="none")
    log_p = flat.log_softmax(dim=-1)
    log_q = ref.log_softmax(dim=-1)
    kl = (log_q.exp() * (log_q - log_p)).sum(dim=-1)
    return _reduce(ce * ce.detach().neg().exp() + alpha * kl, num_items)


def next_token_targets(labels):
    """Each position's target: the next position's label, -100 after the last (what a causal LM's loss shifts)."""
    import torch

    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE)], dim=1)


def trainer_class():
    """transformers' Trainer with ``compute_loss`` taking the spec's token loss (a class made here so that this
    module imports transformers only when a run trains with one)."""
    import torch
    from transformers import Trainer

    class TokenLossTrainer(Trainer):
        def __init__(self, *args, loss: str, asft_alpha: float, eaft_alpha: float, **kwargs):
            super().__init__(*args, **kwargs)
            self.token_loss, self.asft_alpha, self.eaft_alpha = loss, asft_alpha, eaft_alpha
            # a compute_loss_func makes the Trainer count num_items_in_batch over the accumulated batch and take
            # the loss as already scaled for accumulation (its training_step); compute_loss below calls it
            self.compute_loss_func = self._token_loss
            self.reference = None
            if loss == "asft" and not hasattr(self.model, "disable_adapter"):
                import copy

                self.reference = copy.deepcopy(self.accelerator.unwrap_model(self.model)).eval()
                self.reference.requires_grad_(False)

        def _token_loss(self, logits, targets, ref_logits=None, num_items_in_batch=None):
            if self.token_loss == "dft":
                return dft_loss(logits, targets, num_items_in_batch)
            if self.token_loss == "eaft":
                return eaft_loss(logits, targets, self.eaft_alpha, num_items_in_batch)
            return asft_loss(logits, ref_logits, targets, self.asft_alpha, num_items_in_batch)

        def _reference_logits(self, model, inputs):
            # under the run's mixed precision, as accelerate runs the policy's forward (the copy is not prepared)
            with torch.no_grad(), self.accelerator.autocast():
                if self.reference is not None:
                    device = next(model.parameters()).device
                    if next(self.reference.parameters()).device != device:
                        self.reference.to(device)
                    return self.reference(**inputs).logits
                peft_model = self.accelerator.unwrap_model(model)  # outside DDP: no gradient to synchronise
                with peft_model.disable_adapter():
                    return peft_model(**inputs).logits

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs = dict(inputs)
            labels = inputs.pop("labels")
            shifted = inputs.pop("shift_labels", None)  # TrainedLogitsCollator's: logits only at those positions
            targets = shifted if shifted is not None else next_token_targets(labels)
            ref_logits = self._reference_logits(model, inputs) if self.token_loss == "asft" else None
            outputs = model(**inputs)
            loss = self._token_loss(outputs.logits, targets, ref_logits, num_items_in_batch=num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes  # the count is every process's; DDP averages
            return (loss, outputs) if return_outputs else loss

    return TokenLossTrainer
