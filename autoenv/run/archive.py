"""Never delete results: an earlier evaluation's outputs on the same commit move under previous/<run_id>/."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from autoenv.core.formats import stamp


def archive_previous(out: Path) -> None:
    """Never delete results: an earlier run on this commit moves under previous/<run_id>/."""
    if not out.is_dir() or not any(p.name != "previous" for p in out.iterdir()):
        return
    try:
        old_id = json.loads((out / "run.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):  # a folder left by a crash before run.json was written
        old_id = stamp(dt.datetime.fromtimestamp(out.stat().st_mtime, dt.UTC))
    target = out / "previous" / old_id
    target.mkdir(parents=True, exist_ok=True)
    for item in list(out.iterdir()):
        if item.name != "previous":
            shutil.move(str(item), str(target / item.name))
