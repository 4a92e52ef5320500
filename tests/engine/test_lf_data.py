"""LLaMA-Factory's data/ folder: ``studio data check`` gives the right verdict for every kind of entry in
tests/fixtures/lf/data/dataset_info.json (our own small files in LF's formats), and dataset_info's options (subset,
split, folder, num_samples, hf_hub_url / ms_hub_url / script_url) work on LF's semantics. Hub entries are checked
against tests/hub_standin.py through the real client; huggingface_hub reads HF_ENDPOINT / HF_HUB_CACHE when
imported, so everything that talks to the hub runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from engine.data import dataset_registry as R
from tests.hub_standin import HubStandin

ROOT = Path(__file__).resolve().parents[2]
LF_DATA = ROOT / "tests" / "fixtures" / "lf" / "data"

# entry -> "OK <rows> <stage>", or a piece of the one problem `studio data check` prints for it
VERDICTS = {
    "identity": "OK 6 sft",
    "alpaca_en_demo": "OK 12 sft",
    "alpaca_zh_demo": "OK 6 sft",
    "glaive_toolcall_en_demo": "OK 5 sft",
    "openai_demo": "OK 5 sft",
    "dpo_en_demo": "OK 8 dpo",
    "orca_pairs_demo": "OK 5 dpo",
    "c4_demo": "OK 12 pt",
    "wiki_demo": "OK 8 pt",
    "splits_demo_test": "OK 2 sft",
    "splits_demo_sampled": "OK 6 sft",  # num_samples is the run's sampling; the check reads every row
    "splits_demo_bad_split": "no split 'validation' (splits there: test, train)",
    "mllm_demo": "OK 6 sft 6 images",  # LF's layout: placeholders in some rows, none in others (all images first)
    "rlhf_v": "OK 3 dpo 3 images",  # LF's multimodal preference layout (its hub set, in miniature)
    "mllm_video_demo": "has a videos column ('videos')",
    "mllm_audio_demo": "has a audios column ('audios')",
    "alpaca_en": "dataset 'alpaca_en' is on the hub (llamafactory/alpaca_en) and not in the Hugging Face cache, and "
    "the hub is offline (HF_HUB_OFFLINE)",
    "starcoder_python": "dataset 'starcoder_python' is on the hub (bigcode/starcoderdata)",
    "dpo_mix_en": "dataset 'dpo_mix_en' is on the hub (hiyouga/DPO-En-Zh-20k)",
    "deepctrl": "dataset 'deepctrl': ModelScope (http://127.0.0.1:9) cannot give deepctrl/deepctrl-sft-data",
    "belle_multiturn": "entry 'belle_multiturn' is a dataset loading script (belle_multiturn.py), which datasets",
}


def _studio(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _verdicts(output: str) -> dict[str, str]:
    """name -> "OK rows stage" or the text of its problems, from `studio data check`'s output."""
    out: dict[str, str] = {}
    name = None
    for line in output.splitlines():
        head = re.match(r"^(\S+): (.*)$", line)
        if head and not line.startswith(" "):
            name, rest = head.groups()
            ok = re.match(r"OK \((\d+) rows, stage (\w+)(?:, (\d+) images)?\)", rest)
            out[name] = (
                (f"OK {ok.group(1)} {ok.group(2)}" + (f" {ok.group(3)} images" if ok.group(3) else "")) if ok else rest
            )
        elif name:
            out[name] += "\n" + line.strip()
    return out


def test_every_entry_of_lf_data_gets_its_verdict(tmp_path):
    info = json.loads((LF_DATA / "dataset_info.json").read_text(encoding="utf-8"))
    left_to_h_l = {"kto_en_demo"}  # kto_tag (KTO data) is another branch's
    assert set(info) - left_to_h_l == set(VERDICTS), "an entry of the fixture without its expected verdict"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
        "HF_HOME": str(tmp_path / "hf-home"),
        "MODELSCOPE_ENDPOINT": "http://127.0.0.1:9",  # nothing answers (ModelScope: tests/engine/test_modelscope.py)
        "MODELSCOPE_CACHE": str(tmp_path / "ms-cache"),
    }
    done = _studio(["data", "check", "--dataset-dir", str(LF_DATA), *VERDICTS], env)
    got = _verdicts(done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr  # some entries are refused
    for name, want in VERDICTS.items():
        if want.startswith("OK "):
            assert got.get(name) == want, f"{name}: {got.get(name)}"
        else:
            assert got.get(name, "").startswith("1 problem"), f"{name}: {got.get(name)}"
            assert want in got[name], f"{name}: {got[name]}"


def test_split_folder_and_num_samples_follow_lf(tmp_path):
    """folder + split choose the files as datasets does; num_samples samples as LF's loader (with replacement past
    the rows there are), seeded; a file entry refuses subset / folder naming the key."""
    rows = R.load_rows("splits_demo_test", LF_DATA)
    assert [r["messages"][0]["content"] for r in rows] == ["test question 0", "test question 1"]
    from engine.trainer.dataset import sample_rows

    train = R.load_rows("splits_demo_sampled", LF_DATA)
    picked = sample_rows(train, 10, seed=3)
    assert len(picked) == 10 and {r["messages"][0]["content"] for r in picked[:6]} == {
        f"train question {i}" for i in range(6)
    }  # a permutation of all 6 first, then 4 drawn again
    assert picked == sample_rows(train, 10, seed=3) and picked[:6] != sample_rows(train, 10, seed=4)[:6]
    assert len(sample_rows(train, 4, seed=0)) == 4
    (tmp_path / "a.json").write_text(json.dumps([{"instruction": "q", "output": "a"}]), encoding="utf-8")
    R.save_dataset_info(
        tmp_path, {"d": {"file_name": "a.json", "subset": "en"}, "n": {"file_name": "a.json", "num_samples": 0}}
    )
    (problem,) = R.check_datasets(["d"], tmp_path)
    assert problem.column == "subset" and "subset applies to a folder or a hub dataset" in str(problem)
    (problem,) = R.check_datasets(["n"], tmp_path)
    assert problem.column == "num_samples" and "num_samples 0 is not a whole number of rows above 0" in str(problem)


HUB_SCRIPT = r"""
import json, sys
from engine.data import dataset_registry as R, hub
ddir = sys.argv[1]
out = {}
def check(name):
    return [str(p) for p in R.check_datasets([name], ddir, "dpo" if name.startswith("pairs") else "sft")]
out["pending"] = [e.name for e in R.hub_pending(["pairs", "missing", "gated"], ddir)]
out["before"] = check("pairs")
out["missing"] = check("missing")
out["gated"] = check("gated")
hub.download("studio-test/pairs")
out["after_pending"] = [e.name for e in R.hub_pending(["pairs"], ddir)]
out["rows"] = [r["chosen"] for r in R.load_rows("pairs", ddir, "dpo")]
out["zh"] = check("pairs_zh")
out["bad_subset"] = check("pairs_fr")
print(json.dumps(out))
"""


def test_hub_entries_through_the_standin(tmp_path, monkeypatch):
    """Online: a hub entry not in the cache is fine before launch (the run downloads it), a missing or gated one is
    refused in one line naming the entry; once downloaded its subset's split is read from the cache snapshot."""
    pairs = lambda lang: "".join(  # noqa: E731
        json.dumps(
            {
                "conversations": [{"from": "human", "value": f"{lang} q{i}"}],
                "chosen": f"{lang} good {i}",
                "rejected": "bad",
            }
        )
        + "\n"
        for i in range(3)
    )
    card = (
        "---\nconfigs:\n- config_name: en\n  data_files:\n  - split: train\n    path: en/train-*.jsonl\n"
        "- config_name: zh\n  data_files:\n  - split: train\n    path: zh/train-*.jsonl\n---\n# pairs\n"
    )
    entry = {
        "formatting": "sharegpt",
        "ranking": True,
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"},
    }
    R.save_dataset_info(
        tmp_path,
        {
            "pairs": {"hf_hub_url": "studio-test/pairs", "subset": "en", **entry},
            "pairs_zh": {"hf_hub_url": "studio-test/pairs", "subset": "zh", **entry},
            "pairs_fr": {"hf_hub_url": "studio-test/pairs", "subset": "fr", **entry},
            "missing": {"hf_hub_url": "studio-test/nothing-here"},
            "gated": {"hf_hub_url": "studio-test/gated"},
        },
    )
    with HubStandin() as standin:
        standin.datasets["studio-test/pairs"] = {
            "README.md": card.encode(),
            "en/train-00000.jsonl": pairs("en").encode(),
            "zh/train-00000.jsonl": pairs("zh").encode(),
        }
        standin.datasets["studio-test/gated"] = {"data.json": b"[]"}
        standin.gated.add("studio-test/gated")
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN")
        }
        env |= {
            "PYTHONPATH": str(ROOT),
            "HF_ENDPOINT": standin.url,
            "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
            "HF_HOME": str(tmp_path / "hf-home"),
        }
        done = subprocess.run(
            [sys.executable, "-c", HUB_SCRIPT, str(tmp_path)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout.splitlines()[-1])
        pending = _studio(["data", "check", "--dataset-dir", str(tmp_path), "pairs_zh"], env)
    assert out["pending"] == ["pairs", "missing", "gated"] and out["before"] == []
    assert (
        len(out["missing"]) == 1
        and "dataset 'missing': studio-test/nothing-here is not a dataset on the hub" in (out["missing"][0])
    )
    assert len(out["gated"]) == 1 and "dataset 'gated': studio-test/gated is gated on the hub" in out["gated"][0]
    assert out["after_pending"] == [] and out["rows"] == ["en good 0", "en good 1", "en good 2"]
    assert out["zh"] == [] and "no subset 'fr' (subsets there: en, zh)" in out["bad_subset"][0]
    assert pending.returncode == 0 and "pairs_zh: OK (3 rows, stage dpo)" in pending.stdout, pending.stdout


def test_eval_datasets_are_checked_before_launch_by_name():
    """A spec's evaluation datasets go through the same registry rules as its datasets, each problem under
    data.eval_datasets."""
    from engine.spec.schema import validate_spec

    spec = {
        "model": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct"},
        "data": {
            "datasets": ["alpaca_en_demo"],
            "dataset_dir": str(LF_DATA),
            "eval_datasets": ["nope", "dpo_en_demo"],
        },
    }
    _, errors, _ = validate_spec(spec)
    on_eval = [str(m) for path, m in errors if path == "data.eval_datasets"]
    assert any("'nope'" in m for m in on_eval) and any("'dpo_en_demo' holds preference pairs" in m for m in on_eval)
    assert not [m for path, m in errors if path == "data.datasets"]
