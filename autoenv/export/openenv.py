"""`autoenv export openenv`: a kept candidate as an OpenEnv package (server, client, models, manifest).

Two shapes. A candidate that already wraps an OpenEnv server (a folder holding openenv.yaml,
like examples/openenv-codebreaker) is exported as that package, with AutoEnv's README and a
Dockerfile added. A single-turn verifiers candidate is wrapped: the server's Environment
serves the candidate's own tasks and scores a reply with the candidate's own reward functions
(through verifiers, in the server's venv), and a rubric from openenv.core.rubrics weighs them
as verifiers does. A candidate with tools or its own multi-turn Env but no OpenEnv server
cannot be wrapped this way and is refused with a reason.

openenv 0.10 and verifiers 0.4 pin different mcp majors; verifiers only scores here, so the
wrapped package's venv overrides mcp to openenv's range (overrides.txt, [tool.uv]).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
from pathlib import Path

import yaml

from autoenv.core.errors import AutoEnvError
from autoenv.export.source import Kept, load_kept, reward_table
from autoenv.run.gitrepo import Repo
from autoenv.sandbox.serverenv import server_packages

OPENENV_PIN = "openenv==0.10.0"
VERIFIERS_PIN = "verifiers==0.4.0"
MCP_OVERRIDE = "mcp<2"
TEMPLATES = Path(__file__).parent / "templates"
ORACLE_COPY = ".autoenv/candidate"
IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".venv", "build", "dist")


def export_openenv(root: Path, out: Path | None = None, commit: str | None = None) -> Path:
    """Write the OpenEnv package of the run at `root`'s last kept commit (or `commit`); return its folder."""
    with tempfile.TemporaryDirectory(prefix="autoenv-export-") as work:
        kept = load_kept(root, Path(work), commit)
        packages = server_packages(kept.candidate)
        if packages:
            source = packages[0]
            target = out or root / "export" / "openenv" / source.name
            _fresh(target)
            shutil.copytree(source, target, ignore=IGNORE, dirs_exist_ok=True)
            shutil.copytree(kept.candidate, target / ORACLE_COPY, ignore=IGNORE)  # the oracle, for --check
            kind = "openenv"
        else:
            _refuse_unwrappable(kept)
            name = _package_name(root)
            target = out or root / "export" / "openenv" / name
            _fresh(target)
            _write_wrapper(kept, target, name)
            kind = "wrapped"
        if not (target / "Dockerfile").is_file():
            (target / "Dockerfile").write_text(_dockerfile(target, kind))
        (target / "README.md").write_text(_readme(kept, target, kind))
        (target / ".autoenv").mkdir(exist_ok=True)
        (target / ".autoenv" / "export.json").write_text(json.dumps(
            {"commit": kept.commit, "kind": kind, "max_reward": sum(c.weight for c in kept.components if c.weight > 0),
             "candidate": "candidate" if kind == "wrapped" else ORACLE_COPY}, indent=1) + "\n")
    return target


def _fresh(target: Path) -> None:
    if target.exists() and any(target.iterdir()):
        if not (target / "openenv.yaml").is_file():
            raise AutoEnvError(f"{target} exists and is not an earlier export", where=str(target),
                               fix="pass --out to an empty or new folder")
        shutil.rmtree(target)
    target.mkdir(parents=True, exist_ok=True)


def _package_name(root: Path) -> str:
    branch = Repo(root).head().branch or "candidate"
    tag = branch.split("/", 1)[-1]
    return re.sub(r"\W+", "_", tag).strip("_").lower() + "_env"


def _refuse_unwrappable(kept: Kept) -> None:
    """Only a single-turn taskset can be wrapped: tools and custom Envs need verifiers' rollouts."""
    module = kept.candidate / "candidate_env"
    for path in module.rglob("*.py"):
        text = path.read_text(errors="replace")
        if re.search(r"\bvf\.(Toolset|SingleAgentEnv|Env)\b|@vf\.tool\b", text):
            raise AutoEnvError(
                f"the candidate uses tools or its own Env ({path.relative_to(kept.candidate)}): "
                "only a single-turn taskset can be wrapped as an OpenEnv server",
                where=str(kept.root / "candidate" / path.relative_to(kept.candidate)), fix="write the environment as an OpenEnv server package (openenv.yaml beside its "
                "pyproject.toml) inside candidate/, as examples/openenv-codebreaker does, and export that")


def _write_wrapper(kept: Kept, target: Path, name: str) -> None:
    weights = {c.name: c.weight for c in kept.components}
    for template in TEMPLATES.rglob("*.tmpl"):
        dest = target / template.relative_to(TEMPLATES).with_suffix("")
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = template.read_text().replace("__WEIGHTS__", repr(weights)).replace("__NAME__", name)
        dest.write_text(text.replace("__TITLE__", name))
    shutil.copytree(kept.candidate, target / "candidate", ignore=IGNORE)
    ast.parse((target / "server" / "environment.py").read_text())  # the filled template is Python
    (target / "requirements.txt").write_text(f"{OPENENV_PIN}\n{VERIFIERS_PIN}\n./candidate\n")
    (target / "overrides.txt").write_text(f"{MCP_OVERRIDE}\n")
    (target / "pyproject.toml").write_text(f'''[project]
name = "{name.replace('_', '-')}"
version = "0.1.0"
description = "An OpenEnv environment exported by AutoEnv from commit {kept.commit[:12]}."
requires-python = ">=3.11"
dependencies = ["{OPENENV_PIN}", "{VERIFIERS_PIN}", "candidate-env"]

[project.scripts]
server = "{name}.server.app:main"

[tool.uv]
# verifiers (scoring only) pins mcp 2; openenv 0.10 needs mcp < 2.
override-dependencies = ["{MCP_OVERRIDE}"]
sources = {{ candidate-env = {{ path = "candidate" }} }}

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
packages = ["{name}", "{name}.server"]
package-dir = {{ "{name}" = ".", "{name}.server" = "server" }}
''')
    manifest = {
        "spec_version": 1, "name": name, "version": "0.1.0", "type": "space", "runtime": "fastapi",
        "app": "server.app:app", "port": 8000,
        "validation": {
            "reward": {"range": [0.0, float(sum(w for w in weights.values() if w > 0))], "oracle_tolerance": 0.0,
                       "floor_margin": 0.1},
            "resources": {"cpu": 1.0, "memory_mb": 1024, "disk_mb": 512, "episode_timeout_s": 60.0},
            "capabilities": {"verifier": {"kind": "reward_channel"}},
            "types": {"tags": ["autoenv", "single-turn"]},
        },
    }
    (target / "openenv.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))


def _dockerfile(target: Path, kind: str) -> str:
    install = ("uv pip install --system -r requirements.txt --override overrides.txt" if kind == "wrapped"
               else "uv pip install --system -r pyproject.toml")
    app = yaml.safe_load((target / "openenv.yaml").read_text()).get("app", "server.app:app")
    workdir = "/app/env" if not app.startswith(f"{target.name}.") else "/app"
    copy_to = "/app/env" if workdir == "/app/env" else f"/app/{target.name}"
    return (f"# Built by `autoenv export openenv`; not built here (no Docker engine needed to export or check).\n"
            f"FROM python:3.11-slim\nRUN pip install --no-cache-dir uv\nCOPY . {copy_to}\nWORKDIR {copy_to}\n"
            f"RUN {install}\nWORKDIR {workdir}\nEXPOSE 8000\n"
            f'CMD ["python", "-m", "uvicorn", "{app}", "--host", "0.0.0.0", "--port", "8000"]\n')


def _readme(kept: Kept, target: Path, kind: str) -> str:
    manifest = yaml.safe_load((target / "openenv.yaml").read_text())
    entry = kept.entry
    target_stats = entry.stats.get("target")
    strong_stats = entry.stats.get("strong")

    def mean(s) -> str:
        return "–" if s is None or s.mean is None else f"{s.mean:.3f} ({s.model})"

    how = ("the candidate's OpenEnv server package, as evaluated" if kind == "openenv" else
           "a wrapper: the server serves the candidate's tasks (reset `index=` or `seed=`) and scores one "
           "reply (`{\"content\": ...}`) with the candidate's own reward functions through verifiers")
    return f"""# {manifest.get('name')}: an OpenEnv environment exported by AutoEnv

Exported from commit `{kept.commit}` ({entry.verdict.verdict}: {entry.verdict.reason[:200]}).
Shape: {how}.

## Reward

{reward_table(kept)}

Measured by AutoEnv at that commit: target {mean(target_stats)}, strong {mean(strong_stats)}.

## Run it (no Docker needed)

```bash
uv venv .venv && uv pip install --python .venv/bin/python {'-r requirements.txt --override overrides.txt' if kind == 'wrapped' else '-r pyproject.toml'}
{'cd .. && ' if manifest.get('app', '').startswith(target.name + '.') else ''}.venv/bin/python -m uvicorn {manifest.get('app')} --port 8000
openenv validate --url http://127.0.0.1:8000
```

`autoenv export openenv --check DIR` runs the submission checklist: the manifest's static
validation, client/server separation (the client imported with `server/` absent), the server
started in its own uv venv and probed with `openenv validate --url`, one episode played by the
candidate's oracle. The Dockerfile is written but not built by AutoEnv.
"""
