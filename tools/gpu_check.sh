#!/usr/bin/env bash
# The prepared GPU run (issues 28, 42), for a machine with an NVIDIA GPU, CUDA builds of jax and
# torch already installed, and no network:
#   tools/gpu_check.sh WHEELS_DIR OUT_DIR [gpu_check.py options: --budget S, --device, --quick]
# installs the wheels that tools/gpu_wheels.sh fetched (keras, dtype-explorer with its widget
# bundle, the pure-Python dependencies the machine lacks) into a folder of their own with
# `pip install --no-index --no-deps --target`, puts it first on PYTHONPATH (the machine's jax,
# torch and numpy stay as they are), then runs both halves, their diff and the report into
# OUT_DIR (at most 8 files). TensorFlow is used only where it is installed.
set -euo pipefail
wheels=${1:?usage: tools/gpu_check.sh WHEELS_DIR OUT_DIR [options]}
out=${2:?usage: tools/gpu_check.sh WHEELS_DIR OUT_DIR [options]}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
site=${GPU_CHECK_SITE:-$(mktemp -d)/site}
"$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --target "$site" "$wheels"/*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export TF_CPP_MIN_LOG_LEVEL=3
exec timeout 420 "$python" "$here/tools/gpu_check.py" --out "$out" "$@"
