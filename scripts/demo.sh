#!/usr/bin/env bash
# Start the studio on the bundled demo: set up .venv if needed, build the demo workspace, serve the page.
# Extra arguments go to `studio webui` (e.g. --port 7861, --host 0.0.0.0 --auth user:pass).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
.venv/bin/studio demo
exec .venv/bin/studio webui "$@"
