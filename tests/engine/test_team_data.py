"""Team mode: datasets, uploads and imported models have owners (issue 46 item 2). Ann registers a dataset from her
upload; Bob does not list it, cannot train on it (his spec naming it is refused at submit, naming data.datasets),
cannot read or register her upload, and cannot replace the operator's shared dataset; an admin sees everything; the
operator's (the demo's, anything in the workspace before the accounts) is listed and used by both. Without accounts
nothing changes."""

from __future__ import annotations

import json
import shutil

import pytest

from engine.core import accounts, belongings, workspace
from engine.data import dataset_registry as reg
from engine.runs import owners
from engine.runs import registry as runs
from engine.spec.schema import SpecError
from tests.helpers import demo_spec


@pytest.fixture()
def team(run_registry, demo_paths):
    """A private data folder holding the demo's alpaca set (the operator's, there before the accounts), and the
    members ann and bob and the admin root."""
    ddir = run_registry / "data"
    ddir.mkdir(exist_ok=True)
    shutil.copy(workspace.ASSETS_DATA / "demo_alpaca.json", ddir / "demo_alpaca.json")
    reg.register_dataset(
        ddir, "demo_alpaca", "demo_alpaca.json", columns={"prompt": "instruction", "response": "output"}
    )
    accounts.add("ann", "ann's password")
    accounts.add("bob", "bob's password")
    accounts.add("root", "root's password", admin=True)
    who = {"name": None}
    accounts.set_viewer_source(lambda: who["name"])
    yield who, ddir, demo_paths
    accounts.set_viewer_source(None)


def _ann_uploads(who: dict, ddir) -> str:
    """Ann's upload in the workspace's uploads/, registered as ann_set (what the Datasets tab does)."""
    who["name"] = "ann"
    upload = workspace.uploads_dir() / "ann_rows.json"
    shutil.copy(workspace.ASSETS_DATA / "demo_alpaca.json", upload)
    belongings.record_path(upload)
    reg.register_dataset(ddir, "ann_set", str(upload), columns={"prompt": "instruction", "response": "output"})
    return str(upload)


def test_a_members_dataset_is_hers_and_the_operators_is_everyones(team):
    who, ddir, _ = team
    upload = _ann_uploads(who, ddir)
    info = reg.read_dataset_info(ddir)
    listed = {}
    for name in ("ann", "bob", "root", None):
        who["name"] = name
        listed[name] = belongings.usable_datasets(ddir, info)
    assert listed == {
        "ann": ["ann_set", "demo_alpaca"],
        "bob": ["demo_alpaca"],
        "root": ["ann_set", "demo_alpaca"],
        None: ["ann_set", "demo_alpaca"],
    }
    who["name"] = "bob"
    problems = reg.check_datasets(["ann_set"], ddir)
    said = str(problems[0])
    assert "'ann_set' is not registered" in said and "demo_alpaca" in said, said  # as unknown; known: his own
    assert reg.preview_rows("ann_set", ddir) == [] and reg.check_datasets(["demo_alpaca"], ddir) == []
    why = owners.path_problem(upload, field="dataset")
    assert why is not None and "another member's" in str(why) and str(why).startswith("dataset: "), why
    who["name"] = "ann"
    assert reg.check_datasets(["ann_set"], ddir) == [] and owners.path_problem(upload) is None
    assert json.loads((workspace.home() / belongings.FILE).read_text())["datasets"][str(ddir.resolve())] == {
        "ann_set": "ann"
    }  # the operator's demo_alpaca is not written: what the ledger does not name is the operator's


def test_another_members_dataset_is_refused_at_submit_naming_the_field(team):
    who, ddir, demo_paths = team
    _ann_uploads(who, ddir)
    who["name"] = "bob"
    spec = demo_spec(demo_paths, data={"datasets": ["ann_set"], "dataset_dir": str(ddir)})
    with pytest.raises(SpecError) as caught:
        runs.submit(spec, start=False)
    fields = [field for field, _ in caught.value.problems]
    assert "data.datasets" in fields, caught.value.problems
    said = str(dict(caught.value.problems)["data.datasets"])
    assert "ann_set" in said and "\n" not in said, said
    spec = demo_spec(
        demo_paths, data={"datasets": ["demo_alpaca"], "eval_datasets": ["ann_set"], "dataset_dir": str(ddir)}
    )
    with pytest.raises(SpecError, match="ann_set") as caught:
        runs.submit(spec, start=False)
    assert "data.eval_datasets" in [field for field, _ in caught.value.problems]
    bobs = runs.submit(
        demo_spec(demo_paths, data={"datasets": ["demo_alpaca"], "dataset_dir": str(ddir)}), start=False
    )
    who["name"] = "ann"
    anns = runs.submit(demo_spec(demo_paths, data={"datasets": ["ann_set"], "dataset_dir": str(ddir)}), start=False)
    who["name"] = "root"
    roots = runs.submit(demo_spec(demo_paths, data={"datasets": ["ann_set"], "dataset_dir": str(ddir)}), start=False)
    assert len({bobs, anns, roots}) == 3


def test_registering_over_anothers_dataset(team):
    who, ddir, _ = team
    upload = _ann_uploads(who, ddir)
    columns = {"prompt": "instruction", "response": "output"}
    who["name"] = "bob"
    mine = workspace.uploads_dir() / "bob_rows.json"
    shutil.copy(workspace.ASSETS_DATA / "demo_alpaca.json", mine)
    with pytest.raises(ValueError, match="'ann_set' is already registered"):  # hers: taken, nothing more said
        reg.register_dataset(ddir, "ann_set", str(mine), columns=columns, overwrite=True)
    with pytest.raises(ValueError, match="'demo_alpaca' is the operator's, shared with the team read-only"):
        reg.register_dataset(ddir, "demo_alpaca", str(mine), columns=columns, overwrite=True)
    reg.register_dataset(ddir, "bob_set", str(mine), columns=columns)
    reg.register_dataset(ddir, "bob_set", str(mine), columns={"prompt": "instruction"}, overwrite=True)  # his own
    assert reg.read_dataset_info(ddir)["ann_set"]["file_name"] == upload
    who["name"] = "root"  # an admin fixes ann's mapping: it stays hers
    reg.register_dataset(ddir, "ann_set", upload, columns=columns, overwrite=True)
    assert belongings.dataset_owner(ddir, "ann_set") == "ann" and belongings.dataset_owner(ddir, "bob_set") == "bob"
    reg.register_dataset(ddir, "root_set", upload, columns=columns)  # an admin's: shared with the team
    who["name"] = "bob"
    assert belongings.usable_datasets(ddir, reg.read_dataset_info(ddir)) == ["bob_set", "demo_alpaca", "root_set"]


def test_an_imported_model_is_its_importers(team):
    from engine.jobs import downloads

    who, _, _ = team
    model = workspace.models_dir() / "ann-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    shared = workspace.models_dir() / "operators-model"
    shared.mkdir()
    (shared / "config.json").write_text("{}")
    who["name"] = "ann"
    belongings.record_path(model)  # what the GGUF import records for the folder it writes
    who["name"] = "bob"
    assert "another member's" in str(owners.path_problem(model / "config.json", field="model.name_or_path"))
    assert owners.path_problem(shared) is None
    with pytest.raises(downloads.DownloadError, match="no local model models/ann-model"):
        downloads.delete_local("models/ann-model")
    with pytest.raises(downloads.DownloadError, match="shared with the team read-only"):
        downloads.delete_local("models/operators-model")
    who["name"] = "ann"
    downloads.delete_local("models/ann-model")
    assert not model.exists() and belongings.path_owner(model) == accounts.OPERATOR  # a new folder there: unowned


def test_a_member_shares_her_dataset_and_model_read_only(team, capsys):
    """Issue 46 item 2: Ann shares her dataset with Bob (the command line's `studio data share` acting for her, as a
    member's page does): he lists it, trains on it, cannot replace or re-share it; Root and the operator saw it all
    along; `none` takes it back; `*` gives it to every account. Her model folder the same way through `studio models
    share`. Sharing the operator's, an unknown account, someone else's or a thing that is not there is refused in one
    line; the audit log records each share."""
    from engine.cli import main as studio
    from engine.core import audit
    from engine.jobs import downloads

    who, ddir, demo_paths = team
    upload = _ann_uploads(who, ddir)
    spec = demo_spec(demo_paths, data={"datasets": ["ann_set"], "dataset_dir": str(ddir)})
    assert reg.share_dataset(ddir, "ann_set", ["bob"]) == ["bob"]
    who["name"] = "bob"
    assert belongings.usable_datasets(ddir, reg.read_dataset_info(ddir)) == ["ann_set", "demo_alpaca"]
    assert reg.check_datasets(["ann_set"], ddir) == [] and runs.submit(spec, start=False)
    with pytest.raises(ValueError, match="'ann_set' is already registered"):  # read-only: hers to replace
        reg.register_dataset(ddir, "ann_set", upload, columns={"prompt": "instruction"}, overwrite=True)
    with pytest.raises(belongings.ShareError, match="dataset 'ann_set' is ann's: only they"):
        reg.share_dataset(ddir, "ann_set", ["*"])
    with pytest.raises(belongings.ShareError, match="'demo_alpaca' is shared with the whole team already"):
        reg.share_dataset(ddir, "demo_alpaca", ["bob"])  # the operator's is everyone's already
    with pytest.raises(belongings.ShareError, match="no dataset 'nope' of yours"):
        reg.share_dataset(ddir, "nope", ["ann"])
    who["name"] = "ann"
    with pytest.raises(belongings.ShareError, match="'carl' is no account"):
        reg.share_dataset(ddir, "ann_set", ["bob", "carl"])
    assert reg.share_dataset(ddir, "ann_set", []) == []
    who["name"] = "bob"
    assert belongings.usable_datasets(ddir, reg.read_dataset_info(ddir)) == ["demo_alpaca"]
    with pytest.raises(SpecError, match="ann_set"):
        runs.submit(spec, start=False)
    who["name"] = "ann"
    assert studio(["data", "share", "ann_set", "*", "--dataset-dir", str(ddir)]) == 0
    assert "ann_set: shared read-only with *" in capsys.readouterr().out
    who["name"] = "bob"
    assert "ann_set" in belongings.usable_datasets(ddir, reg.read_dataset_info(ddir))

    model = workspace.models_dir() / "ann-model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    who["name"] = "ann"
    belongings.record_path(model)
    who["name"] = "bob"
    assert owners.path_problem(model / "sub") is not None
    assert studio(["models", "share", "models/ann-model", "bob"]) == 1
    assert "no local model models/ann-model" in capsys.readouterr().err  # hers is unknown to him
    who["name"] = "ann"
    assert downloads.share_local("models/ann-model", ["bob"]) == ["bob"]
    who["name"] = "bob"
    assert owners.path_problem(model / "sub") is None and owners.path_problem(model) is None
    with pytest.raises(downloads.DownloadError, match="shared with the team read-only"):
        downloads.delete_local("models/ann-model")
    who["name"] = "root"
    assert studio(["models", "share", "models/ann-model", "none"]) == 0
    assert "models/ann-model: shared read-only with nobody" in capsys.readouterr().out
    who["name"] = "bob"
    assert owners.path_problem(model) is not None
    who["name"] = "root"
    shares = [(e["who"], e["detail"]["shared"]) for e in reversed(audit.entries(action="share"))]
    assert shares == [("ann", "bob"), ("ann", "-"), ("ann", "*"), ("ann", "bob"), ("root", "-")], shares


def test_single_user_mode_writes_no_ledger(run_registry):
    ddir = run_registry / "data"
    ddir.mkdir()
    shutil.copy(workspace.ASSETS_DATA / "demo_alpaca.json", ddir / "a.json")
    reg.register_dataset(ddir, "a", "a.json")
    belongings.record_path(ddir / "a.json")
    assert not (workspace.home() / belongings.FILE).exists()
    assert belongings.usable_datasets(ddir, reg.read_dataset_info(ddir)) == ["a"]

    with pytest.raises(belongings.ShareError, match="sharing is for team mode"):
        reg.share_dataset(ddir, "a", ["*"])
