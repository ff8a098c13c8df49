#!/usr/bin/env bash
# The wheels the GPU run carries (issue 42), fetched here, where the package index is reached:
#   tools/gpu_wheels.sh DIR [--python 3.12] [--limit-mib 60]
# Builds dtype-explorer's wheel, resolves its closure for the GPU machine's Python, drops what
# that machine holds (tools/gpu_machine.txt) and jax/torch/numpy/CUDA, downloads the rest, and
# fails over 60 MiB. See tools/gpu_wheels.py.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
exec "${PYTHON:-$here/.venv/bin/python}" "$here/tools/gpu_wheels.py" "$@"
