"""Fill verifiers/ with a readable copy of the installed verifiers source and its v1 fixtures.

The coding agent reads the exact version it runs against (the web mostly describes the
removed pre-0.4 API). The source comes from the release's sdist, which also carries
`tests/v1/fixtures` (the best small examples of the v1 API); when the sdist cannot be
fetched, the installed package's files are copied and the fixtures are left out.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

MARKER = ".version"


def installed_version() -> str:
    return importlib.metadata.version("verifiers")


def fill(target: Path) -> str:
    """Make `target` hold verifiers' source for the installed version; return a status line."""
    version = installed_version()
    marker = target / MARKER
    if marker.is_file() and marker.read_text().strip() == version:
        return f"verifiers/ already holds {version}"
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-q", "-d", tmp, f"verifiers=={version}"],
            capture_output=True, text=True,
        )
        sdists = list(Path(tmp).glob("verifiers-*.tar.gz"))
        _clear(target)
        if proc.returncode == 0 and sdists:
            with tarfile.open(sdists[0]) as archive:
                archive.extractall(tmp, filter="data")
            root = Path(tmp) / f"verifiers-{version}"
            shutil.copytree(root / "verifiers", target / "verifiers")
            fixtures = root / "tests" / "v1" / "fixtures"
            if fixtures.is_dir():
                shutil.copytree(fixtures, target / "fixtures")
            status = f"verifiers/ filled from the {version} sdist (source + v1 fixtures)"
        else:
            import verifiers  # deferred: only this fallback needs the installed package's files

            shutil.copytree(Path(verifiers.__file__).parent, target / "verifiers",
                            ignore=shutil.ignore_patterns("__pycache__"))
            status = f"verifiers/ filled from the installed {version} package (sdist unavailable: no fixtures)"
    marker.write_text(version + "\n")
    return status


def _clear(target: Path) -> None:
    """Remove what an earlier fill wrote; the tracked README.md stays."""
    for name in ("verifiers", "fixtures", MARKER):
        path = target / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
