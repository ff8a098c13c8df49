"""``pip install`` into this virtual environment, done by uv, under pip's own configuration.

``./dev.sh setup`` installs the development environment (every backend, JupyterLab, the docs
toolchain: about 215 packages, 5 GB) with this script when it can. uv resolves, downloads,
unpacks and byte-compiles in parallel where pip does one package at a time: on this project's
2-core machine the whole setup takes 37-45 s with uv against 116-148 s with pip (the
commands are in ``benchmarks/README.md``, "Setting up, and the whole test run"). It installs
the same releases: the project's pins (``constraints.txt``) and whatever the machine's pip is
told.

uv reads none of pip's configuration, so the settings pip would use (its configuration files
and ``PIP_*`` variables, as ``pip config list`` gives them) are passed on as uv's options: the
indexes (``--index-strategy unsafe-best-match``: as pip, the best release on any of them),
the local wheel folders, constraint files, a certificate bundle, trusted hosts, binary-only
rules, pre-releases, a proxy and the timeout. A setting that would change what is installed
and that this script cannot pass on makes it exit with status 3 before it installs anything,
naming the setting; ``./dev.sh`` then installs with pip, as it also does when uv cannot be
installed or fails.

Run (the arguments are ``pip install``'s; uv's ``pip install`` takes them)::

    .venv/bin/python tools/uv_install.py -q -c constraints.txt -e ".[all,test]"

uv itself is installed into the same environment first (``pip install uv``, pinned by
``constraints.txt``): nothing is installed outside the project's virtual environment. The uv
beside this Python is used, else one on ``PATH``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

#: pip settings that change nothing in what is installed.
HARMLESS = frozenset(
    {
        "disable-pip-version-check",
        "no-cache-dir",
        "cache-dir",
        "progress-bar",
        "quiet",
        "verbose",
        "no-input",
        "no-color",
        "root-user-action",
        "require-virtualenv",
        "break-system-packages",
        "retries",
        "no-warn-script-location",
        "no-python-version-warning",
        "log",
        "user-agent",
        "config-file",  # where settings come from: what it sets is listed on its own
        "no-compile",  # byte-code only: uv always compiles (--compile-bytecode)
        "compile",
    }
)
#: pip settings given to uv as one option per value (pip separates several with spaces).
REPEATED = {
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "trusted-host": "--allow-insecure-host",
}
#: pip settings given to uv as one option with the same value.
SINGLE = {"index-url": "--index-url", "only-binary": "--only-binary", "no-binary": "--no-binary"}
#: pip's switches, and uv's options when one is on.
SWITCHES = {"no-index": ["--no-index"], "pre": ["--prerelease", "allow"]}
#: pip settings uv reads from its environment instead.
ENVIRONMENT = {
    "cert": "SSL_CERT_FILE",
    "timeout": "UV_HTTP_TIMEOUT",
    "default-timeout": "UV_HTTP_TIMEOUT",
}
EXIT_UNTRANSLATED = 3


def pip_settings(python: str) -> dict[str, str]:
    """pip's settings for ``pip install``, as ``pip config list`` gives them: a ``global``
    value, overridden by an ``install`` one, overridden by a ``PIP_*`` variable."""
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    ranked: dict[str, tuple[int, str]] = {}
    rank = {"global": 0, "install": 1, ":env:": 2}
    for line in listed.splitlines():
        name, sep, quoted = line.partition("=")
        section, _, key = name.rpartition(".")
        if not sep or section not in rank:
            continue
        value = " ".join(shlex.split(quoted))
        if key not in ranked or rank[section] >= ranked[key][0]:
            ranked[key] = (rank[section], value)
    return {key: value for key, (_, value) in ranked.items()}


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str], list[str]]:
    """uv's options and environment for pip's ``settings``, and the settings it could not
    pass on (each would change what is installed)."""
    options = ["--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    left: list[str] = []
    for key, value in settings.items():
        if key in REPEATED:
            options += [arg for one in value.split() for arg in (REPEATED[key], one)]
        elif key in SINGLE:
            options += [SINGLE[key], value]
        elif key in SWITCHES and value.lower() in ("1", "true", "yes", "on"):
            options += SWITCHES[key]
        elif key in ENVIRONMENT:
            env[ENVIRONMENT[key]] = value
        elif key == "proxy":
            env.setdefault("HTTPS_PROXY", value)
            env.setdefault("HTTP_PROXY", value)
        elif key not in HARMLESS:
            left.append(f"{key}={value!r}")
    return options, env, left


def main(argv: list[str]) -> int:
    """Install ``argv`` (``pip install``'s arguments) into this Python's environment with uv;
    uv's exit status, or 3 when a pip setting cannot be passed on (nothing installed)."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        print("uv is not installed in this environment (pip install uv)", file=sys.stderr)
        return EXIT_UNTRANSLATED
    options, env, left = uv_options(pip_settings(sys.executable))
    if left:
        said = ", ".join(left)
        print(f"pip settings uv is not told of, so pip installs: {said}", file=sys.stderr)
        return EXIT_UNTRANSLATED
    command = [uv, "pip", "install", "--python", sys.executable, "--compile-bytecode"]
    done = subprocess.run([*command, *options, *argv], env=os.environ | env, check=False)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
