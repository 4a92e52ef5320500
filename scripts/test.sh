#!/usr/bin/env bash
# Run the whole test suite: set up .venv with the test tools and Debian's Chromium if needed, then pytest.
# Extra arguments go to pytest (e.g. -k merge, -x, tests/engine/test_merge.py). STUDIO_SOAK=1 runs the long soak
# variants. --under-load first starts two processes that keep both cores busy (scripts/busy.py) and stops them at
# the end: the suite must pass on a busy machine too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 HF_DATASETS_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# DeepSpeed compiles its CPU ops on first use; keep them in the repo's venv so CI's second run reuses them.
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$PWD/.venv/torch_extensions}"
# Two worker processes (pytest-xdist) by default, whole test files per worker, longest first (tests/xdist_groups.py):
# STUDIO_TEST_WORKERS=0 runs everything in one process; -n N on the command line overrides it too. The 25 slowest
# tests are listed at the end: where the suite's time goes.
args=()
under_load=0
for a in "$@"; do
  if [ "$a" = "--under-load" ]; then under_load=1; else args+=("$a"); fi
done
if [ "$under_load" = 1 ]; then
  .venv/bin/python scripts/busy.py "${STUDIO_BUSY_PROCS:-2}" &
  busy=$!
  trap 'kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null' EXIT
  .venv/bin/python -m pytest -q -p no:cacheprovider -n "${STUDIO_TEST_WORKERS:-2}" --dist loadfile --durations=25 ${args[@]+"${args[@]}"}
else
  exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "${STUDIO_TEST_WORKERS:-2}" --dist loadfile --durations=25 ${args[@]+"${args[@]}"}
fi
