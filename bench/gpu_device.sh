#!/usr/bin/env bash
# bench/gpu_check.sh on a lent GPU machine that has its own python3 with CUDA torch and no package registry (this
# workplace's `device` tool): the packages that machine lacks travel as wheels in .whl/ (pydantic, datasets, trl,
# bitsandbytes: `bench/gpu_device.sh --fetch` downloads them here, for that machine's Python 3.12), are installed
# there without the network, and each result is copied to $OUT as it is written. Step limits keep the whole check
# inside one call: tests, calibration, efficiency, packed attention, throughput, in that order of value.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="pydantic pydantic-core annotated-types typing-inspection datasets dill multiprocess trl bitsandbytes"
if [ "${1:-}" = "--fetch" ]; then
  mkdir -p .whl
  # shellcheck disable=SC2086 # word splitting intended: a list of package names
  exec python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .whl $WHEELS
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 3
fi
python3 -c "import torch, transformers, peft, accelerate, datasets, pydantic, bitsandbytes, trl
print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__,
      'accelerate', accelerate.__version__, 'bitsandbytes', bitsandbytes.__version__, 'trl', trl.__version__)" || exit 3
export PY=python3 GPU_CHECK_OFFLINE=1 GPU_CHECK_COPY=${OUT:-}
export GPU_CHECK_T_TESTS=${GPU_CHECK_T_TESTS:-170} GPU_CHECK_T_CALIBRATION=${GPU_CHECK_T_CALIBRATION:-140}
export GPU_CHECK_T_EFFICIENCY=${GPU_CHECK_T_EFFICIENCY:-110} GPU_CHECK_T_PACKED=${GPU_CHECK_T_PACKED:-40}
export GPU_CHECK_T_THROUGHPUT=${GPU_CHECK_T_THROUGHPUT:-50}
exec bash bench/gpu_check.sh
