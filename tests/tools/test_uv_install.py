"""``tools/uv_install.py`` installs with uv under pip's settings, into a real fresh virtual
environment: a constraint given to pip only (a pip configuration file) binds uv's install, and
a setting it cannot pass on leaves the install to pip (exit status 3, nothing installed). The
uv is the one ``./dev.sh setup`` installed beside this Python: without it the test fails."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_a_constraint_given_to_pip_binds_uvs_install_and_a_setting_it_cannot_pass_is_refused(
    tmp_path,
):
    assert (BIN / "uv").is_file(), f"no uv beside {sys.executable}: ./dev.sh setup installs it"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    (tmp_path / "pins.txt").write_text("six==1.16.0\n")
    (tmp_path / "pip.conf").write_text(f"[global]\nconstraint = {tmp_path / 'pins.txt'}\n")
    env = {
        **os.environ,
        "PIP_CONFIG_FILE": str(tmp_path / "pip.conf"),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    install = [python, str(ROOT / "tools" / "uv_install.py"), "-q", "six"]

    refused = subprocess.run(
        install, env=env | {"PIP_PREFER_BINARY": "1"}, capture_output=True, text=True
    )
    assert refused.returncode == 3, refused.stderr
    assert "prefer-binary='1'" in refused.stderr
    absent = subprocess.run([python, "-c", "import six"], capture_output=True)
    assert absent.returncode != 0

    done = subprocess.run(install, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    version = subprocess.run(
        [python, "-c", "import six; print(six.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version == "1.16.0"  # the newest six is later: pip's constraint held
    (installer,) = (venv / "lib").glob("python3*/site-packages/six-1.16.0.dist-info/INSTALLER")
    assert installer.read_text().strip() == "uv"
