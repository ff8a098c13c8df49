#!/usr/bin/env bash
# One entry point for people and CI.
#   ./dev.sh explore   set up, then open the explorer notebook in JupyterLab (extra args go to it)
#   ./dev.sh check     the daily check (under a minute): ruff, lint-imports, the fast tier
#   ./dev.sh test      set up (Python deps, JS build, Chromium), then run every test: the fast
#                      tier first (it stops at the first failure), then the rest
#   ./dev.sh bench     run the benchmarks in benchmarks/ (--check: rerun benchmarks/README.md's
#                      headline figures, claim vs now; exit 1 if one is over its goal or 25 % off)
#   ./dev.sh docs      build the documentation site into site/ (strict: a warning fails it)
#   ./dev.sh setup     only set up (.venv with every backend)
set -euo pipefail
cd "$(dirname "$0")"

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}
export PIP_DISABLE_PIP_VERSION_CHECK=1

STAMP="$VENV/.dev-setup-stamp"

# What the set-up environment depends on: the Python, the dependencies, the JS sources.
setup_inputs() {
  {
    "$PY" -c 'import sys; print(sys.version)'
    cat pyproject.toml constraints.txt
    find js -path js/node_modules -prune -o -type f -print | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1
}

setup() {
  if [ ! -x "$PY" ]; then python3 -m venv "$VENV"; fi
  # The editable install builds js/ into dtype_explorer/static/ (hatch-jupyter-builder runs npm).
  # uv installs it under pip's own settings, in parallel (tools/uv_install.py: 37-45 s against
  # pip's 116-148 s on 2 cores); pip does when uv cannot be installed, or cannot be told a
  # setting of pip's, or fails.
  local install=(-q -c constraints.txt -e ".[all,test]")
  if ! { "$PY" -m pip install -q -c constraints.txt uv && "$PY" tools/uv_install.py "${install[@]}"; }; then
    echo "installing with pip instead of uv" >&2
    "$PY" -m pip install "${install[@]}"
  fi
  setup_inputs >"$STAMP"
}

# setup, unless the last one was of these very inputs and its outputs are still there.
setup_if_needed() {
  if [ -x "$PY" ] && [ -f "$STAMP" ] && [ -d dtype_explorer/static ] \
    && [ "$(cat "$STAMP")" = "$(setup_inputs)" ]; then
    return
  fi
  setup
}

need_chromium() {
  if command -v chromium >/dev/null 2>&1; then return; fi
  echo "installing Debian's chromium for the browser tests" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
}

lint() {
  "$PY" -m ruff check dtype_explorer tests benchmarks tools
  "$PY" -m ruff format --check dtype_explorer tests benchmarks tools
  "$VENV/bin/lint-imports"
}

# The tiers: tests/conftest.py marks each test by what it uses (workers, engine, browser,
# notebook...); --tier=fast is the pure ones and tests/test_architecture.py, --tier=rest all
# the others: together, every test, each once. The rest runs in DX_TEST_PROCESSES pytest
# processes (pytest-xdist, 2 by default: most of it waits on real workers, kernels and
# browsers), a test file to a process (its module fixtures made once), the tests that read the
# lessons' one execution together (tests/scheduling.py); DX_TEST_PROCESSES=0
# runs it in this one process. The 30 longest tests are listed at the end, so that a slow run
# says where its time went.
run_tests() {
  lint
  tier fast -x "$@"
  local processes=${DX_TEST_PROCESSES:-2}
  if [ "$processes" = 0 ]; then
    tier rest --durations=30 "$@"
  else
    tier rest -n "$processes" --dist loadfile --no-loadscope-reorder --durations=30 "$@"
  fi
}

# The check and the tests let Python cache byte-code (__pycache__/, which git ignores): where a
# machine sets PYTHONDONTWRITEBYTECODE, every process of a run compiled the package's modules
# again, and each pytest process rewrote every test module's asserts again (its collection:
# 14.5 -> 9.6 CPU-s once cached). Engines compile their own files when made (runtime/_site.py).
with_bytecode() {
  unset PYTHONDONTWRITEBYTECODE
}

# pytest on one tier; a tier with no test among those asked (pytest's 5) is not a failure.
tier() {
  local name=$1
  shift
  "$PY" -m pytest --tier="$name" "$@" || [ $? -eq 5 ]
}

case "${1:-}" in
  setup) setup ;;
  explore)
    shift
    setup
    as_root=()
    [ "$(id -u)" -ne 0 ] || as_root=(--allow-root)  # containers, Binder-like machines
    exec "$VENV/bin/jupyter" lab "${as_root[@]}" "$@" notebooks/01_explorer.ipynb
    ;;
  check)
    shift
    setup_if_needed
    with_bytecode
    lint
    tier fast -q -x -p no:cacheprovider "$@"
    ;;
  test)
    shift
    # Debian's chromium (apt: network and dpkg, one core) installs beside the Python set-up.
    need_chromium &
    chromium=$!
    setup_if_needed
    wait "$chromium"
    with_bytecode
    run_tests "$@"
    ;;
  docs)
    shift
    setup
    NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict "$@"
    ;;
  bench)
    setup
    if [ "${2:-}" = "--check" ]; then shift 2; exec "$PY" benchmarks/check.py "$@"; fi
    for script in benchmarks/*.py; do
      # check.py is --check's; run_timeline.py runs the whole rest tier (run it on its own)
      case "$script" in benchmarks/check.py | benchmarks/run_timeline.py) continue ;; esac
      "$PY" "$script"
    done
    ;;
  *)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac
