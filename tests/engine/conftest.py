"""Fixtures of the merge and export tests (test_merge, test_gguf_export, test_gptq_export): the demo model they start
from, and their output folders allowed as an output root; gptqmodel's folder on this process's path."""

from __future__ import annotations

import sys

import pytest

from engine.machine.kernels import gptq_path

# test_gptq_export loads the quantized folders in this process (transformers -> optimum / gptqmodel), as runs and
# Chat's worker do with the folder on their PYTHONPATH (engine.machine.kernels.gptq_folder: the set-up keeps gptqmodel
# out of the venv). Added at collection, before anything imports optimum or peft: both note once whether gptqmodel is
# installed (optimum at its import, peft's is_gptqmodel_available is cached).
sys.path.extend(p for p in gptq_path() if p not in sys.path)


@pytest.fixture
def outputs_in_tmp(tmp_path, monkeypatch):
    """Merge and export targets here are test folders outside the session workspace: allowed as an output root, as a
    user would (STUDIO_OUTPUT_ROOTS; engine.core.folders). A module takes it with ``pytest.mark.usefixtures``."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))


@pytest.fixture(scope="module")
def base(demo_paths) -> str:
    """The demo model's folder: the base that merges and exports start from."""
    return demo_paths["model_dir"]
