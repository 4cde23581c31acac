"""Files the evaluation's child writes next to the candidate's code, read back by the parent: never trusted.

The child runs the candidate's code in its own process, so a file it leaves under the evaluation's
outputs may have been written by the candidate. The parent reads each such file (audit.json,
derived.json, rescore.json, client_retries.json) through here: a missing file, one that is not
JSON, or one that is not what its stage writes is an AutoEnvError naming the key (what, where,
fix), never a number in the record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from autoenv.core.errors import AutoEnvError, validation_problems


def stage_fix(stage: str, folder: str) -> str:
    """The fix for a file of `stage`'s that is not what the stage writes."""
    return (f"the {stage} stage writes this file inside the evaluation's child, next to the candidate's code: a "
            f"candidate must not write under its outputs' {folder} folder; rerun the evaluation, and if it recurs, "
            "report it with the file")


def load_json(path: Path, what: str, stage: str, folder: str, missing: str | None = None) -> Any:
    """The parsed JSON of `path`, or an AutoEnvError: `missing` (default "the <stage> stage wrote no <what>") when
    there is no file, "cannot be read as JSON" when it is not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AutoEnvError(missing or f"the {stage} stage wrote no {what}", where=str(path),
                           fix="see the child's output above for why it stopped; rerun the evaluation") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AutoEnvError(f"the {what} cannot be read as JSON: {e}", where=str(path),
                           fix=stage_fix(stage, folder)) from None


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: object, what: str, stage: str, folder: str, where: str) -> M:
    """`data` (a child-written file's parsed JSON) as `model`, or the AutoEnvError of `invalid`."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise invalid(e, what, stage, folder, where) from None


def invalid(e: ValidationError, what: str, stage: str, folder: str, where: str) -> AutoEnvError:
    """The error for a file that parsed but is not what `stage` writes (its first problems, by key)."""
    return AutoEnvError(f"the {what} is not what the {stage} stage writes: {validation_problems(e)}", where=where,
                        fix=stage_fix(stage, folder))
