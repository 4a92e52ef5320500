"""Fixtures of the merge and export tests (test_merge, test_gguf_export, test_gptq_export): the demo model they start
from, and their output folders allowed as an output root."""

from __future__ import annotations

import pytest


@pytest.fixture
def outputs_in_tmp(tmp_path, monkeypatch):
    """Merge and export targets here are test folders outside the session workspace: allowed as an output root, as a
    user would (STUDIO_OUTPUT_ROOTS; engine.core.folders). A module takes it with ``pytest.mark.usefixtures``."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))


@pytest.fixture(scope="module")
def base(demo_paths) -> str:
    """The demo model's folder: the base that merges and exports start from."""
    return demo_paths["model_dir"]
