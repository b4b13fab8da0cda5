"""Make sure plotly's static export (kaleido >= 1) finds a Chrome. ``make setup`` runs this once.

Tried in the order kaleido itself prefers:

1. a Chrome or Chromium already on the machine (``BROWSER_PATH``, ``PATH``, or one kaleido
   downloaded before);
2. kaleido's own ``get_chrome`` download, where the network allows it;
3. Debian's ``chromium`` through apt, where we are root (CI, containers);
4. otherwise one line that names the three ways, and exit status 1.

Usage: ``python tools/ensure_chrome.py`` (prints the browser path it settled on).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def find() -> str | None:
    from choreographer.browsers.chromium import Chromium

    return os.environ.get("BROWSER_PATH") or Chromium.find_browser(skip_local=False)


def download() -> str | None:
    import kaleido

    try:
        return str(kaleido.get_chrome_sync())
    except Exception as e:  # no network, a proxy, an unsupported platform: fall through
        print(
            f"ensure_chrome: kaleido's Chrome download failed ({type(e).__name__}); trying apt",
            file=sys.stderr,
        )
        return None


def apt_install() -> str | None:
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
    ):
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            return None
    return find()


def main() -> int:
    path = find() or download() or apt_install()
    if path:
        print(path)
        return 0
    print(
        "ensure_chrome: no Chrome for figure export; do one of: install Chrome/Chromium (or set BROWSER_PATH "
        "to one), let `plotly_get_chrome` download it (needs network), or `apt-get install chromium` as root",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
