#!/usr/bin/env bash
# The GPU path in one run, for a machine with CUDA (#18): the FM embedding bench under bf16 autocast on the
# device, against the FM's plain batched forward on ready tensors in the same run (bench_embed.py), then one
# hourly precompute through Airflow with device cuda (`solaris main` on the tiny world, in a scratch
# SOLARIS_HOME, so nothing of this checkout's var/ or mlflow/ is touched).
# Where torch sees no CUDA device it refuses before running anything, saying why.
# Usage: bash bench/gpu_check.sh [bench_embed.py options, e.g. --quick]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SOLARIS_VENV:-.venv}/bin

"$bin/python" - <<'PY'
import sys

import torch

if not torch.cuda.is_available():
    build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    sys.exit(
        f"gpu_check: no CUDA device: torch {torch.__version__} ({build}) sees none, so there is nothing to check "
        "here. Run it on a machine with an NVIDIA GPU and a CUDA build of torch (the compose file's "
        "TORCH_GPU_INDEX_URL)."
    )
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
PY

echo "== FM embedding throughput on cuda (bf16 autocast) against the plain forward on ready tensors"
"$bin/python" bench/bench_embed.py --device cuda "$@"

echo "== one hourly precompute through Airflow with device cuda (tiny world, scratch home)"
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
SOLARIS_HOME="$home" SOLARIS_DEVICE=cuda "$bin/solaris" main --preset tiny --hours 1
