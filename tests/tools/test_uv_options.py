"""``tools/uv_install.py``'s rules: pip's settings passed on to uv as uv's own options, and a
setting that would change what is installed but cannot be passed on left to pip (the install
itself: ``test_uv_install.py``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import uv_install  # tools/uv_install.py


def test_this_machines_pip_settings_become_uvs_options():
    settings = {
        "find-links": "/opt/wheels",
        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
        "constraint": "/etc/xdg/pip/constraints.txt",
        "cert": "/etc/ssl/certs/ca-certificates.crt",
        "default-timeout": "180",
        "disable-pip-version-check": "1",
    }
    options, env, left = uv_install.uv_options(settings)
    assert options == [
        "--index-strategy", "unsafe-best-match",
        "--find-links", "/opt/wheels",
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--constraint", "/etc/xdg/pip/constraints.txt",
    ]  # fmt: skip
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_HTTP_TIMEOUT": "180"}
    assert left == []


def test_indexes_hosts_and_binary_rules_are_passed_on():
    options, env, left = uv_install.uv_options(
        {
            "index-url": "https://mirror.example/simple",
            "no-index": "true",
            "trusted-host": "mirror.example other.example",
            "only-binary": ":all:",
            "pre": "1",
            "proxy": "http://proxy.example:3128",
        }
    )
    assert options[2:] == [
        "--index-url", "https://mirror.example/simple",
        "--no-index",
        "--allow-insecure-host", "mirror.example",
        "--allow-insecure-host", "other.example",
        "--only-binary", ":all:",
        "--prerelease", "allow",
    ]  # fmt: skip
    assert env == {
        "HTTPS_PROXY": "http://proxy.example:3128",
        "HTTP_PROXY": "http://proxy.example:3128",
    }
    assert left == []


def test_a_setting_that_changes_the_install_and_has_no_uv_option_is_named():
    _, _, left = uv_install.uv_options({"prefer-binary": "1", "quiet": "1", "use-pep517": "0"})
    assert left == ["prefer-binary='1'", "use-pep517='0'"]
