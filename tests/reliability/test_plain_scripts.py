"""The README's first example as people run it: a plain script without an
``if __name__ == "__main__":`` guard, the same with the guard, and ``python -c``. Workers must
not run the user's script (spawn would re-import it in each worker, which starts probes again
while the worker starts, and every worker died). A custom layer defined in the script still
reaches the workers (by value).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE = """
import keras
import dtype_explorer as dx

class Doubles(keras.layers.Layer):
    def call(self, x):
        return x * 2

rs = dx.probe("Conv1D", input_dtype="uint8", backend={backends},
              kwargs={{"filters": 2, "kernel_size": 3}})
print(rs.summary())
mine = dx.probe(Doubles, input_dtype="float16", backend={backends})
print(mine.summary())
print("statuses", *[r.status for r in rs] + [r.status for r in mine])
"""


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path / "cache"),
        "KERAS_BACKEND": "numpy",
    }
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )


def statuses(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WorkerCrashed" not in done.stdout, done.stdout
    return done.stdout.split("statuses", 1)[1].split()


def test_a_script_without_a_main_guard_works_on_two_backends(tmp_path):
    script = tmp_path / "try.py"
    script.write_text(textwrap.dedent(EXAMPLE.format(backends='["jax", "numpy"]')))
    done = run([str(script)], tmp_path)
    # Conv1D on uint8: jax answers float32, numpy raises Keras's TypeError; the layer: ok, ok
    assert statuses(done) == ["ok", "error", "ok", "ok"], done.stdout
    assert "TypeError" in done.stdout
    assert done.stdout.count("across backends") == 2  # the script ran once, not per worker


def test_a_script_with_a_main_guard_works(tmp_path):
    body = textwrap.indent(textwrap.dedent(EXAMPLE.format(backends='["numpy"]')), "    ")
    script = tmp_path / "guarded.py"
    script.write_text(f"if __name__ == '__main__':\n{body}")
    assert statuses(run([str(script)], tmp_path)) == ["error", "ok"]


def test_python_dash_c_works(tmp_path):
    code = textwrap.dedent(EXAMPLE.format(backends='["numpy"]'))
    assert statuses(run(["-c", code], tmp_path)) == ["error", "ok"]


def test_a_module_run_with_dash_m_without_a_guard_works(tmp_path):
    package = tmp_path / "mine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "example.py").write_text(textwrap.dedent(EXAMPLE.format(backends='["numpy"]')))
    assert statuses(run(["-m", "mine.example"], tmp_path)) == ["error", "ok"]


def test_an_in_process_op_probe_on_tensorflow_runs_the_script_once(tmp_path):
    """Issue 43: an op probed in this process on tensorflow starts the TensorFlow reference
    process; with plain spawn it re-ran the script's top level (two pids printed the line)."""
    script = tmp_path / "plain_tf.py"
    script.write_text(
        textwrap.dedent(
            """
            import os
            print("top level in", os.getpid(), flush=True)
            import dtype_explorer as dx
            r = dx.probe("ops.maximum", ["float32", "float64"])
            print("statuses", r.status)
            print("tnp", r.expectation("tensorflow").shown)
            """
        )
    )
    env_backend = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**env_backend, "PYTHONPATH": str(ROOT), "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert statuses(done)[0] == "ok"
    assert done.stdout.count("top level in") == 1, done.stdout
    assert "tnp float64" in done.stdout, done.stdout  # the reference process did answer
