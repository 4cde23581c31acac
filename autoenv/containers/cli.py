"""`autoenv runtime image|daemon|check` and setup's `--with-docker` stage (registered by autoenv.cli)."""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any

from autoenv.containers import daemon, image
from autoenv.core.runtimes import engine_problem
from autoenv.core import display
from autoenv.core.apt import apt_get
from autoenv.core.errors import AutoEnvError


def add_commands(sub: Any) -> None:
    p = sub.add_parser("runtime", help="the docker runtime: the local base image, a daemon where none runs, a check")
    actions = p.add_subparsers(metavar="ACTION")
    i = actions.add_parser("image", help="build the local base image from Debian's packages (no registry; cached by tag)")
    i.add_argument("--rebuild", action="store_true", help="build it again even when its tag exists")
    i.set_defaults(func=cmd_image)
    d = actions.add_parser("daemon", help="start or stop a dockerd of AutoEnv's own where no service runs one (root)")
    d.add_argument("action", choices=("start", "stop"))
    d.add_argument("--force", action="store_true", help="stop: stop AutoEnv's daemon even while other starts hold "
                   "it or evaluations' containers run on it")
    d.set_defaults(func=cmd_daemon)
    c = actions.add_parser("check", help="whether the docker engine answers, and which image the runtime gets")
    c.set_defaults(func=cmd_check)


def cmd_image(args: argparse.Namespace) -> int:
    problem = engine_problem("docker")
    if problem is not None:
        raise AutoEnvError(problem[0], fix=problem[1])
    with display.stage("base image", "Debian minbase + python3, uv, CA store, the chat program's dependencies (about two minutes, once)"):
        built = image.build(rebuild=args.rebuild)
        display.note(_built_line(built))
    display.result_block({"image": built.tag, "network_helper": image.NETWORK_HELPER, "size_mb": f"{built.size_mb:.0f}",
                          "seconds": f"{built.seconds:.0f}", "reused": str(built.reused).lower()})
    return 0


def cmd_daemon(args: argparse.Namespace) -> int:
    display.console.print(daemon.start() if args.action == "start" else daemon.stop(force=args.force))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    problem = engine_problem("docker")
    if problem is not None:
        raise AutoEnvError(problem[0], fix=problem[1])
    found = image.default_image()
    display.result_block({"engine": "answers", "image": found or "none built (verifiers' default python:3.11-slim "
                          "is pulled; `autoenv runtime image` builds one here)"})
    return 0


def _built_line(built: image.Built) -> str:
    how = "already built" if built.reused else f"built in {built.seconds:.0f} s"
    return f"{built.tag} ({built.size_mb:.0f} MB) {how}; tagged {image.NETWORK_HELPER} for restricted networks"


def setup_docker() -> str:
    """`autoenv setup --with-docker`: Docker and mmdebstrap from Debian's packages (as root, when missing), the
    engine (a daemon of AutoEnv's own when none answers; stopped again unless it was running), the base image."""
    engine_up = engine_problem("docker") is None
    have_image = engine_up and image.default_image() is not None
    needed = [] if engine_up else [("docker.io", "dockerd")]
    needed += [] if have_image else [("mmdebstrap", "mmdebstrap")]
    missing = [name for name, binary in needed if shutil.which(binary) is None]
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise AutoEnvError(f"{', '.join(missing)} missing and cannot be installed here (apt-get as root)",
                               fix=f"install {' '.join(missing)} with your package manager, then run setup again")
        display.note(f"installing {' '.join(missing)} (apt-get)")
        apt_get("update", "-qq", note=display.note)
        apt_get("install", "-y", "-qq", *missing, note=display.note)
    started = engine_problem("docker") is not None
    if started:
        display.note(daemon.start())
    try:
        built = image.build()
    finally:
        if started:
            display.note(daemon.stop())
    return _built_line(built)
