#!/usr/bin/env bash
# GPU check (issue 4 item 8): on a CUDA machine, run the tests marked gpu, the planner calibration, and short bf16
# LoRA / QLoRA-4bit / full runs of a ~0.5B Llama built from config, recording tokens/s, MFU and peak memory.
# Usage: bash bench/gpu_check.sh      Results: bench/results/gpu_check.md and bench/results/plan_calibration.md
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p bench/results
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 2)" || { echo "gpu_check: no CUDA GPU"; exit 2; }
export OMP_NUM_THREADS=4 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
rc=0
# GPU_CHECK_OFFLINE=1: a machine with no package registry (bench/gpu_device.sh): gptqmodel cannot be rebuilt there,
# so the GPTQ / AWQ GPU test is left out and said so. GPU_CHECK_COPY=DIR: each result is copied there as it is
# written. GPU_CHECK_T_<STEP>: each step's time limit in seconds (a lease's minutes are few; default: none).
# GPU_CHECK_SKIP=STEP,...: steps left out (one measured already on that machine). GPU_CHECK_EFFICIENCY_RUNS: the
# efficiency step's runs, in order (bench/gpu_efficiency.py --runs; default lora,full).
copy() { [ -n "${GPU_CHECK_COPY:-}" ] && for f in "$@"; do [ -f "$f" ] && cp "$f" "$GPU_CHECK_COPY"/; done; return 0; }
step() {  # step NAME RESULT_FILE CMD...: CMD under NAME's time limit, then its result copied out
  local name=$1 result=$2 limit_var="GPU_CHECK_T_$1"; shift 2
  echo "== gpu_check: $name ($(date -u +%T))"
  skipped "$name" && return 0
  if [ -n "${!limit_var:-}" ]; then timeout "${!limit_var}" "$@"; else "$@"; fi
  local r=$?
  [ $r -eq 124 ] && echo "gpu_check: $name stopped at its ${!limit_var} s limit"
  copy "$result"
  return $r
}
skipped() { case ",${GPU_CHECK_SKIP:-}," in *",$1,"*) echo "gpu_check: $1 left out (GPU_CHECK_SKIP)"; return 0 ;; esac; return 1; }
deselect=()
if [ -n "${GPU_CHECK_OFFLINE:-}" ]; then
  echo "gptq: no package registry here; test_export_on_the_gpu left out (run bench/gpu_check.sh where pip works)"
  deselect=(--deselect tests/engine/test_gptq_export.py::test_export_on_the_gpu)
else
  # GPTQ / AWQ export (tests/engine/test_gptq_export.py, marked gpu) on CUDA: gptqmodel rebuilt here with its CUDA
  # kernels (scripts/bootstrap.sh --test installs its CPU build), with the same pins, torch and numpy held, into the
  # same folder of its own (engine.machine.kernels.gptq_folder), which the export's process has on its path first
  gptq_spec=$(sed -n 's/^gptq_spec="\(.*\)"$/\1/p' scripts/bootstrap.sh)
  gptq_deps=$(sed -n 's/^gptq_deps="\(.*\)"$/\1/p' scripts/bootstrap.sh)
  gptq_dir=$("$PY" -c 'from engine.machine.kernels import gptq_folder; print(gptq_folder())')
  held=$("$PY" -c 'import numpy, torch; print(f"numpy=={numpy.__version__} torch=={torch.__version__}")')
  # shellcheck disable=SC2086 # word splitting intended: the lists are package specs
  { "$PY" -m pip install -q --force-reinstall --upgrade --no-deps --no-build-isolation --target "$gptq_dir" "$gptq_spec" \
      && "$PY" -m pip install -q $gptq_deps $held; } || echo "gptq: gptqmodel did not install (the GPTQ test fails saying so)"
fi
tests_out=bench/results/gpu_tests.txt
# only the files that hold gpu tests: the others need the browser and UI packages a GPU machine may lack
mapfile -t gpu_files < <(grep -rlE "pytest\.mark\.gpu" tests --include='test_*.py' | sort)
step TESTS "$tests_out" bash -c 'out=$1; shift; "$0" -m pytest -q -p no:cacheprovider -m gpu "$@" 2>&1 | tee "$out"' \
  "$PY" "$tests_out" "${deselect[@]}" "${gpu_files[@]}" || rc=1
step CALIBRATION bench/results/plan_calibration.md "$PY" bench/plan_calibration.py || rc=1
# the time estimate's GPU efficiency (engine.plan.estimate.GPU_EFFICIENCY): real runs, LoRA and full, 10 vs 40 steps
step EFFICIENCY bench/results/gpu_efficiency.md "$PY" bench/gpu_efficiency.py \
  --runs "${GPU_CHECK_EFFICIENCY_RUNS:-lora,full}" || rc=1
# per-sample sdpa vs the block-diagonal mask (model.packed_attention auto keeps the mask on GPUs until this has
# measured per-sample speed there: long rows, then many short samples)
step PACKED bench/results/packed_attention_cuda.md "$PY" bench/packed_attention.py --device cuda --hidden 2048 \
  --layers 8 --vocab 32000 --samples 8 --min-len 128 --max-len 1024 --steps 20 \
  --out bench/results/packed_attention_cuda.md || rc=1
step PACKED bench/results/packed_attention_cuda_short.md "$PY" bench/packed_attention.py --device cuda \
  --hidden 2048 --layers 8 --vocab 32000 --samples 64 --min-len 16 --max-len 96 --steps 20 \
  --out bench/results/packed_attention_cuda_short.md || rc=1
echo "== gpu_check: THROUGHPUT ($(date -u +%T))"
skipped THROUGHPUT && exit $rc
timeout "${GPU_CHECK_T_THROUGHPUT:-0}" "$PY" - <<'PY' || rc=1
import json, subprocess, sys, time
sys.path.insert(0, "bench")
import plan_calibration as cal
from pathlib import Path
import tempfile, torch
rows = []
peak_tflops = {"H100": 989e12, "H200": 989e12, "A100": 312e12}.get(
    next((k for k in ("H100", "H200", "A100") if k in torch.cuda.get_device_name(0)), ""), 312e12)
with tempfile.TemporaryDirectory() as tmp:
    d = Path(tmp) / "m"; cal.build_model(d)
    for name, method in (("lora r16", {"finetuning": "lora", "lora": {"rank": 16}}),
                         ("qlora 4bit r16", {"finetuning": "lora", "lora": {"rank": 16}, "quantization": {"bits": 4}}),
                         ("full", {"finetuning": "full"})):
        spec = cal.spec_for(str(d), method, 4, 1024, False)
        t0 = time.time()
        r = subprocess.run([sys.executable, "bench/plan_calibration.py", "--measure",
                            json.dumps(spec.model_dump(mode="json"))], capture_output=True, text=True, check=False)
        dt = time.time() - t0
        line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
        tokens = 4 * 1024 * 2 * 3
        from engine.plan.planner import plan
        p = plan(spec, gpu_mem_gib=80).details["params_total"]
        tps = tokens / dt  # includes model load: a lower bound
        mfu = 6 * p * tps / peak_tflops
        peak = json.loads(line[7:])["allocated"] / 2**30 if line else float("nan")
        rows.append(f"| {name} | {tps:.0f} | {100 * mfu:.1f} | {peak:.2f} |")
        print(rows[-1], flush=True)
        Path("bench/results/gpu_check.md").write_text(
            f"# GPU check on {torch.cuda.get_device_name(0)}\n\nbf16, batch 4 x 1024, 3 steps x 2 accumulation; "
            "tokens/s includes model load (lower bound)\n\n| run | tokens/s | MFU % | peak alloc GiB |\n"
            "|---|---|---|---|\n" + "\n".join(rows) + "\n")
PY
copy bench/results/gpu_check.md
exit $rc
