# Studio on a CUDA machine. torch comes with the official PyTorch runtime image; the rest from PyPI.
# docker build -t studio . && docker run --gpus all -p 7860:7860 -e STUDIO_AUTH=admin:change-me studio
FROM pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime

ENV PYTHONUNBUFFERED=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_DISABLE_TELEMETRY=1 \
    DS_BUILD_OPS=0 \
    STUDIO_HOME=/data/studio \
    STUDIO_PORT=7860

RUN apt-get update && apt-get install -y --no-install-recommends curl git && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/studio
COPY pyproject.toml README.md ./
COPY engine ./engine
COPY studio ./studio
COPY assets ./assets
RUN pip install --no-cache-dir -e .

RUN useradd --create-home --uid 1000 studio && mkdir -p /data/studio && chown -R studio:studio /data /opt/studio
USER studio
VOLUME ["/data/studio"]
EXPOSE 7860

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD curl -fsS -o /dev/null "http://127.0.0.1:${STUDIO_PORT}/" || exit 1

# A non-loopback bind requires credentials: pass STUDIO_AUTH=user:password (the studio refuses to start without).
CMD ["sh", "-c", "studio demo && exec studio webui --host 0.0.0.0 --port ${STUDIO_PORT}"]
