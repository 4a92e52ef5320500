"""The catalog of merge and export messages: every ``ExportError`` of ``engine.export.checks`` / ``merge_jobs`` /
``merge`` (input checks, disk and memory refusals), the merge subprocess's progress details and verification
results, and the clean-up note of a killed merge. A stable key and an English template, made into
``engine.core.messages.Message`` by ``message``; the CLI and the tests read the English, the Export tab shows
them in its language (``studio.i18n``). Light: stdlib only.

The merge subprocess writes its messages into events as JSON (``engine.core.messages.to_json``); ``payload_message``
reads one back, so a reloaded page or a restarted studio still has the key.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # sources
    "export.no_source": "{path}: no such file or folder",
    "export.is_file": "{path} is a file: give a run folder or a PEFT adapter folder (with adapter_config.json)",
    "export.full_model_folder": "no adapter_config.json in {path}: it is a full model folder, not a PEFT adapter "
    "(give the run folder or the adapter folder that was trained on it)",
    "export.not_adapter": "no adapter_config.json in {path}: not a PEFT adapter folder (adapter_config.json + "
    "adapter_model.safetensors) nor a run folder (spec.yaml)",
    "export.spec_unreadable": "cannot read {path}: {error}",
    "export.run_no_adapter": "run {run} has no adapter yet ({wanted} is missing; {state}): wait for it to finish, "
    "or give an adapter folder",
    "export.run_no_model": "run {run} has no model yet ({wanted} is missing; {state}): wait for it to finish, "
    "or give an adapter folder",
    "export.run_unfinished": "it has not finished",
    "export.run_finished": "it finished",
    "export.run_failed": "it failed",
    "export.run_stopped": "it stopped",
    "export.adapter_config_bad_json": "{path} is not valid JSON: {error}",
    "export.adapter_not_saved": "{path} has adapter_config.json but no adapter_model.safetensors: the adapter was "
    "not saved",
    "export.no_base_name": "{path} names no base_model_name_or_path",
    "export.base_not_local": "base model {base} of adapter {adapter} is not a local model folder with config.json "
    "(merging needs the base weights on this machine)",
    "export.adapter_where": "adapter {path} (trained on {trained_on})",
    "export.module_missing": "{where} does not fit base {base} ({arch}): the adapter targets {module}, which the "
    "base does not have",
    "export.shape_mismatch": "{where} does not fit base {base} ({arch}): {module} is {a_out}x{a_in} in the adapter "
    "but {b_out}x{b_in} in the base",
    # the plan
    "export.no_sources": "give at least one run folder or adapter folder",
    "export.bad_dtype": "--dtype {dtype!r}: choose one of {choices}",
    "export.bad_device": "--device {device!r}: choose cpu or cuda",
    "export.model_alone": "a full fine-tune's model cannot be combined with other sources: export it alone",
    "export.reward_alone": "{first} is a reward model (stage rm, a score head): merge it alone, not with other "
    "sources",
    "export.adapter_only_one": "--adapter-only exports exactly one adapter (a LoRA run or an adapter folder)",
    "export.different_bases": "adapters have different bases: {first} is on {base} but {other} is on "
    "{other_base}: merge adapters of one base only",
    "export.would_replace": "output folder {out} would replace {path}: choose another --out",
    "export.out_exists": "output folder {out} already exists: choose another --out or pass --overwrite",
    "export.serve_vision": "{source} is a vision-language model ({model_type}): the server answers text models only; "
    "chat with it, images included, in the Chat tab",
    "export.overwrite_not_folder": "--overwrite: {out} is not a folder: Studio replaces only a folder an earlier "
    "merge or export wrote",
    "export.overwrite_not_ours": "--overwrite refused: {out} was not written by a Studio merge or export (it holds "
    "{what}): choose another --out, or move it away yourself",
    "export.overwrite_added": "--overwrite refused: {out} holds {count} file(s) the earlier merge or export did not "
    "write ({what}): move them away first, or choose another --out",
    "export.overwrite_removes": "--overwrite: replacing {out}, written by an earlier merge or export: removes {count} "
    "file(s) ({what})",
    "export.no_disk": "not enough disk space for {out}: the export needs about {need} ({dtype}) but only {free} is "
    "free there: free space or choose another --out",
    "export.bad_size": "{what} {text!r}: give a size like 2GB, 500MB or 1GiB",
    "export.no_meminfo": "cannot read the available memory from /proc/meminfo: set STUDIO_MEM_AVAILABLE",
    "export.no_memory_cpu": "not enough memory for this merge: it needs about {need} of RAM (on cpu: the base in "
    "float32 and the adapters) but only {available} is available ({source}): {fixes}. If you know it fits, merge "
    "anyway (--force / 'merge anyway')",
    "export.no_memory_cuda": "not enough memory for this merge: it needs about {need} of RAM (on cuda: the process "
    "and one shard) but only {available} is available ({source}): {fixes}. If you know it fits, merge anyway "
    "(--force / 'merge anyway')",
    "export.fixes": "free memory (stop other runs or programs); or use a machine with more RAM",
    "export.fixes_gpu": "merge on a GPU (--device cuda: about {ram} of RAM); or free memory (stop other runs or "
    "programs); or use a machine with more RAM",
    "export.mem_given": "STUDIO_MEM_AVAILABLE",
    # the Export and Chat tabs (studio.tabs.export.inside_workspace)
    "export.outside_workspace": "{path}: only folders inside the workspace ({root}) can be used here",
    # studio merge --lf-yaml (a LLaMA-Factory export YAML, engine.lf.merge_yaml.lf_export_to_merge)
    "export.lf_yaml_unreadable": "cannot read the LLaMA-Factory export YAML {path}: {error}",
    "export.lf_yaml_refused": "{path} (LLaMA-Factory export YAML) cannot be merged:\n{problems}",
    "export.lf_gptq_flags": "{flags}: not taken by the GPTQ export an export_quantization_bit YAML runs (it keeps the "
    "model's dtype and writes gptqmodel's own shards)",
    "export.lf_yaml_with_sources": "--lf-yaml names the model and the adapters itself (model_name_or_path, "
    "adapter_name_or_path): give no RUN_OR_ADAPTER beside it",
    "export.no_out": "--out is required (or --lf-yaml FILE with export_dir)",
    "export.push_offline": "export_hub_model_id {repo}: the hub cannot be reached (HF_HUB_OFFLINE is set): the model "
    "is merged into {out} but not pushed; push it later with `hf upload {repo} {out}`",
    "export.push_no_token": "export_hub_model_id {repo}: no Hugging Face token (set HF_TOKEN or run `hf auth "
    "login`): the model is merged into {out} but not pushed",
    # following a merge (engine.export.merge_jobs)
    "export.not_merge": "run {id} is not a merge",
    "export.cleaned": "removed the partial output {path}",
    # the merge subprocess (engine.trainer.merge): progress details, failures, verification
    "export.detail_base": "base {path} in float32",
    "export.detail_adapter": "adapter {path}",
    "export.detail_merging": "{n} adapter(s) into {base}",
    "export.detail_verifying": "reloading the saved folder and comparing logits",
    "export.detail_copying": "copying adapter {path}",
    "export.no_cuda": "--device cuda but no CUDA GPU is visible to this process: use --device cpu",
    "export.cancelled": "cancelled (SIGTERM)",
    "export.fp32_mismatch": "the float32 merge differs from base + adapters by {diff:.3g} (> {tol:.3g}): the "
    "adapters cannot be merged exactly (e.g. several DoRA adapters, whose merge depends on the order)",
    "export.verify_summary": "max |logit diff| {diff:.3g} {op} {tol:.3g} ({dtype})",
    "export.verify_failed": "verification failed: {summary}",
    "export.adapter_copied": "adapter copied; its A/B shapes were checked against the base's safetensors headers",
    # studio export: GGUF and quantized formats (engine.export.gguf_checks / convert_jobs, engine.trainer.convert)
    "export.bad_format": "--format {fmt!r}: choose one of {choices}",
    "export.gguf_arch": "architecture {arch!r} cannot be converted to GGUF here: Studio converts {known}",
    "export.gguf_head": "{archs} is not a causal language model: only a ...ForCausalLM converts to GGUF",
    "export.gguf_rope": "{arch} with rope scaling {rope!r} cannot be converted to GGUF here (default, linear and "
    "llama3 rope only)",
    "export.gguf_no_tokenizer": "{path} is missing: a GGUF carries the tokenizer, and only a fast tokenizer's "
    "tokenizer.json converts",
    "export.gguf_tokenizer": "tokenizer {kind} cannot be converted to GGUF here: byte-level BPE (Llama 3, Qwen) and "
    "SentencePiece BPE with byte fallback (Llama 2, Mistral) only",
    "export.gguf_unmapped_tensor": "tensor {name} of this {arch} model has no GGUF name (gguf's tensor map)",
    "export.no_quantizer": "--format {fmt} needs llama.cpp: `pip install llama-cpp-python` (it builds llama.cpp), "
    "or build llama.cpp's llama-quantize (https://github.com/ggml-org/llama.cpp, `cmake -B build && cmake --build "
    "build --target llama-quantize`) and put it on PATH or set STUDIO_LLAMA_QUANTIZE=/path/to/llama-quantize; "
    "gguf-q8_0, gguf-f16 and gguf-bf16 need nothing",
    "export.no_gguf_disk": "not enough disk space for {out}: the {fmt} export needs about {need} (the file {file}"
    "{merge}) but only {free} is free there: free space or choose another --out",
    "export.merge_part": " and a float32 merge of {merged} while it runs",
    "export.detail_converting": "tensor {name}",
    "export.detail_gguf_verify": "loading the GGUF back and comparing logits and greedy text",
    "export.gguf_summary": "max |logit diff| {diff:.3g} {op} {tol:.3g} ({fmt}, transformers' GGUF reader vs the "
    "merged model); greedy text same on {same}/{n} prompts",
    "export.no_gptq_gptqmodel": "--format {fmt} needs the gptqmodel package (it quantizes GPTQ and AWQ, on an "
    "NVIDIA GPU or the CPU): `pip install --no-deps --target {folder} gptqmodel==7.6.0` (a folder of its own, which "
    "Studio puts on its processes' path: its pins would replace torch and numpy and fail `pip check`), then "
    "`pip install device-smi logbar tokenicer pypcre defuser optimum`; bnb-4bit, bnb-8bit and the gguf formats need "
    "none of it",
    "export.no_gptq_optimum": "--format {fmt} needs optimum, through which transformers reads a GPTQ folder: "
    "`pip install optimum`",
    "export.gptq_no_rows": "--format {fmt} calibrates on the run's own training rows: {source} is a model folder, not "
    "a run; export the run it was trained in (its adapter is merged first), or name a text file to calibrate on with "
    "--calibration FILE (rows with a 'text' field, as LLaMA-Factory's export_quantization_dataset)",
    "export.calibration_not_used": "--calibration is for the calibrated formats (gptq-4bit, gptq-8bit, awq-4bit), not "
    "{fmt}",
    "export.calibration_count": "calibration {what} must be a whole number of at least 1 (got {value!r})",
    "export.calibration_missing": "calibration file {path}: not found",
    "export.calibration_type": "calibration file {path}: not a type it is read from ({types})",
    "export.calibration_bad": "calibration file: {problem}",
    "export.calibration_no_text": "calibration file {path}, row {row}: needs a non-empty 'text' string (rows as in "
    'LLaMA-Factory\'s c4_demo.jsonl: {{"text": "..."}})',
    "export.calibration_empty": "calibration file {path}: no rows",
    "export.detail_gptq_file": "{method} {bits}-bit on the {device}, calibrated on {rows} windows of up to {maxlen} "
    "tokens from {file}",
    "export.detail_gptq": "{method} {bits}-bit on the {device}, calibrated on {rows} of the run's training rows",
    "export.gptq_summary": "{fmt}: the saved folder reads the same in transformers and in gptqmodel, max |logit "
    "diff| {diff:.3g} {op} {tol:.3g}; quantization moved the logits by up to {qerr:.3g}; greedy text same as the "
    "float model on {same}/{n} prompts",
    "export.gguf_llama_cpp": "llama.cpp: max |logit diff| {diff:.3g}; greedy text same on {same}/{n} prompts",
    "export.gguf_no_llama_cpp": "llama.cpp was not available here (pip install llama-cpp-python): the GGUF was read "
    "back with transformers' GGUF loader and the gguf package only",
    "export.not_export": "run {id} is not an export",
    "export.quantizing": "quantizing to {fmt} with llama-quantize",
    "export.quantize_failed": "llama-quantize failed ({code}): {tail}",
    "export.not_serve": "run {id} is not a server",
    "export.port_busy": "port {port} on {host} is in use: choose another --port (0: any free port)",
    "export.serve_bad_port": "--port {port}: choose a port from 0 to 65535 (0: any free port)",
    "export.serve_bad_host": "--host {host}: cannot listen there ({error})",
    "export.serve_needs_key": "refusing to serve on {host} without a key: anyone who reaches it could use the model; "
    "put a key in an environment variable and name it with --api-key-env NAME (or bind to 127.0.0.1)",
    "export.serve_bad_key_env": "--api-key-env {name!r}: give the name of an environment variable (letters, digits "
    "and _)",
    "export.serve_key_unset": "--api-key-env {name}: the environment variable {name} is not set or empty: export the "
    "key in it first",
    "export.serve_bad_setting": "{name}={value!r}: give a positive number",
    "export.push_bad_repo": "--repo {repo!r}: give the hub repo as owner/name",
    "export.push_no_output": "run {run} has no output folder {path} to push (it did not finish)",
    "export.push_offline_refused": "cannot push to {repo}: the hub cannot be reached (HF_HUB_OFFLINE or "
    "TRANSFORMERS_OFFLINE is set)",
    "export.push_no_token_refused": "cannot push to {repo}: no Hugging Face token (set HF_TOKEN, type one in the "
    "token field, or run `hf auth login`)",
    "export.not_push": "run {id} is not a push",
    "export.detail_bnb": "quantizing to {fmt} with bitsandbytes, saving and reloading",
    "export.bnb_summary": "the saved {fmt} folder reloads with max |logit diff| {diff:.3g} {op} {tol:.3g} against "
    "the quantized model; quantizing moved the logits by up to {qerr:.3g} from float32",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)


class ExportError(Exception):
    """An input that cannot be merged or exported; the message names the file or folder and the fix."""
