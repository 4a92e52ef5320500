"""One parameter tensor as the planner sees it (engine.plan.model_shape for the language model,
engine.plan.vision_shape for a vision tower and projector). Light: stdlib only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Shape:
    """One parameter tensor: full name (as in the HF module tree), shape, and whether it belongs to a Linear."""

    name: str
    shape: tuple[int, ...]
    linear: str = ""  # the Linear's short name (q_proj, ...) for weights of linear layers, else ""
    layer: int | None = None  # decoder layer index, None outside the layers
    part: str = ""  # "" the language model; "vision" the vision tower, "projector" the multimodal projector

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n
