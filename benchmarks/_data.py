"""Where the MNIST benchmark's data comes from.

Default: Fashion-MNIST from Debian's package ``dataset-fashion-mnist``. When
its directory is missing and this process may run ``apt-get`` (root on a
Debian-like system), the package is installed; otherwise, or if that fails,
the caller falls back to synthetic data and says so loudly.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def try_install_debian_package() -> bool:
    """Install the Fashion-MNIST package with apt-get if allowed; True on success."""
    if os.path.isdir(DEBIAN_DIR):
        return True
    apt = shutil.which("apt-get")
    if apt is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    _say(f"installing the Debian package {DEBIAN_PACKAGE} for Fashion-MNIST ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([apt, "install", "-y", "-qq", DEBIAN_PACKAGE],
                [apt, "update", "-qq"], [apt, "install", "-y", "-qq", DEBIAN_PACKAGE]):
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if cmd[1] == "install" and done.returncode == 0:
            return os.path.isdir(DEBIAN_DIR)
    return False


def data_directory(given: str | None) -> str | None:
    """The IDX directory to use: ``given``, else the Debian package's (installed on
    demand); ``None`` when neither is there (use synthetic data)."""
    if given:
        if not os.path.isdir(given):
            raise SystemExit(f"--data {given}: no such directory")
        return given
    if try_install_debian_package():
        return DEBIAN_DIR
    return None
