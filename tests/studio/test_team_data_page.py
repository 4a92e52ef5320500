"""Team mode on the Datasets, Train, Evaluate and Models tabs: Ann uploads and registers a dataset through the page's
handlers; Bob's pickers do not offer it, its mapping does not open for him, and registering her upload under a name
of his is refused in one line; the operator's datasets and models are offered to both. The handlers are called as
the page calls them, with the logged-in user installed as the engine's viewer (studio.team does this from gradio's
request)."""

from __future__ import annotations

import shutil

import pytest

from engine.core import accounts, workspace

MAPPING = {"prompt": "instruction", "query": "input", "response": "output"}


@pytest.fixture()
def team(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path))
    from engine.data import dataset_registry as reg

    shutil.copy(workspace.ASSETS_DATA / "demo_alpaca.json", workspace.data_dir() / "demo_alpaca.json")
    reg.register_dataset(workspace.data_dir(), "demo_alpaca", "demo_alpaca.json", columns=MAPPING)  # the operator's
    for name in ("demo-model", "ann-model"):
        (workspace.models_dir() / name).mkdir()
        (workspace.models_dir() / name / "config.json").write_text("{}")
    accounts.add("ann", "ann's password")
    accounts.add("bob", "bob's password")
    who = {"name": "ann"}
    accounts.set_viewer_source(lambda: who["name"])
    yield who
    accounts.set_viewer_source(None)


def test_bob_is_not_offered_anns_upload(team):
    from engine.core import belongings
    from studio import backend
    from studio.tabs import data_register, eval, models

    who = team
    stored = data_register.store_upload(workspace.ASSETS_DATA / "demo_alpaca.json", "ann rows.json")
    said = data_register.register(str(stored), "ann_set", "alpaca", MAPPING)
    assert said.startswith("✅"), said
    belongings.record_path(workspace.models_dir() / "ann-model")  # as her GGUF import does
    assert backend.registered_datasets() == ["ann_set", "demo_alpaca"]
    assert data_register.picked_mapping("ann_set")["path"] == str(stored)
    who["name"] = "bob"
    assert backend.registered_datasets() == ["demo_alpaca"]
    assert [n for _, n in eval.data_choices()] == ["", "demo_alpaca"]
    assert data_register.registered_entry("ann_set") is None and data_register.picked_mapping("ann_set")["path"] == ""
    assert data_register.registered_entry("demo_alpaca") is not None  # the operator's: shared read-only
    said = data_register.register(str(stored), "bobs_copy", "alpaca", MAPPING)
    assert said.startswith("❌") and "not an upload of yours" in said and "\n" not in said, said
    said = data_register.register(
        str(workspace.data_dir() / "demo_alpaca.json"), "demo_alpaca", "alpaca", {}, replace=True
    )
    assert "shared with the team read-only" in said, said
    assert [p.rsplit("/", 1)[-1] for p in backend.local_models()] == ["demo-model"]
    assert "ann-model" not in models.models_frame().to_string() and "demo-model" in models.models_frame().to_string()
    who["name"] = None  # the operator sees everything
    assert backend.registered_datasets() == ["ann_set", "demo_alpaca"]
    assert sorted(p.rsplit("/", 1)[-1] for p in backend.local_models()) == ["ann-model", "demo-model"]
