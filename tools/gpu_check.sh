#!/usr/bin/env bash
# The prepared GPU run (issue 28), for a machine with an NVIDIA GPU and the CUDA builds of jax
# and torch already installed (benchmarks/README.md, "On a GPU", lists the wheels):
#   tools/gpu_check.sh WHEELS_DIR [OUT_DIR] [gpu_check.py options]
# installs dtype-explorer without dependencies plus any missing pure-Python dependency from the
# wheels in WHEELS_DIR (no index), then runs the CPU and GPU halves and their diff.
set -euo pipefail
wheels=${1:?usage: tools/gpu_check.sh WHEELS_DIR [OUT_DIR] [options]}
out=${2:-gpu-check}
shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python}
# No index: what is installed already (jax, torch, their CUDA plugins) stays; only the missing
# pure-Python dependencies come from WHEELS_DIR (and the build backend, hatchling).
# dtype-explorer itself: its wheel from WHEELS_DIR (built where node is: the widget's bundle is
# in it), else this checkout.
if compgen -G "$wheels/dtype_explorer-*.whl" >/dev/null; then target=dtype-explorer; else target=$here; fi
"$python" -m pip install --no-index --find-links "$wheels" "$target"
exec timeout 480 "$python" "$here/tools/gpu_check.py" --device both --out "$out" "$@"
