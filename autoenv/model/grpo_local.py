"""GRPO on a GRPO export with TRL, run inside the trainer venv by `autoenv train` (not imported by AutoEnv).

    python grpo_local.py --export DIR --gguf BASE.gguf --work DIR --max-steps N --minutes M

Loads the base model from its GGUF (transformers dequantises it), trains it with GRPOTrainer on
the export's train split with the candidate's own reward functions (the export's train_trl.py),
logs every step's overall and per-component reward and the share of completions the exploit
detectors flag (hackwatch.py) to steps.jsonl, saves the trained model, reloads it from disk and
runs one episode on a held-out task. Uses CUDA when present, and Unsloth when it imports.
"""

# mypy: ignore-errors
# (it runs in the trainer venv, with torch and TRL, which AutoEnv's own venv does not have)

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def load_base(gguf: Path, out: Path) -> Path:
    """The GGUF as a transformers model (float32) saved to `out` (done once per work dir)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (out / "config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = model.config  # dequantised already; drop the GGUF marker so the weights save as plain ones
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", type=Path, required=True)
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=60)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(args.export))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    import train_trl as export  # the export's own reward functions, dataset and group size
    from hackwatch import flagged
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(args.seed)
    cuda = torch.cuda.is_available()
    args.work.mkdir(parents=True, exist_ok=True)
    base = load_base(args.gguf, args.work / "base-hf")
    unsloth = False
    if cuda:
        import importlib.util

        if importlib.util.find_spec("unsloth"):
            importlib.import_module("unsloth")  # patches TRL's trainers when installed
            unsloth = True
    train = export.dataset("train").shuffle(seed=args.seed)
    tasks = export.tasks()

    def hack_flagged(prompts: list, completions: list, key: list[str], **kwargs: Any) -> list[float]:
        out = []
        for prompt, completion, k in zip(prompts, completions, key):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            user = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
            out.append(flagged(text, user, getattr(tasks[k].data, "answer", None)))
        return out

    def formatted(prompts: list, completions: list, key: list[str], **kwargs: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        return [float(text.count("<answer>") == 1 and "</answer>" in text) for text in texts]

    names = list(export.WEIGHTS)
    funcs = [export.reward_function(n) for n in names] + [formatted, hack_flagged]
    weights = [export.WEIGHTS[n] for n in names] + [0.0, 0.0]  # watched, never rewarded
    group = export.NUM_GENERATIONS
    started = time.monotonic()
    log = (args.work / "steps.jsonl").open("w")

    class Watch(TrainerCallback):
        def on_log(self, a: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                row = {"step": state.global_step, "seconds": round(time.monotonic() - started, 1),
                       "reward": logs["reward"], "hack_fraction": logs.get("rewards/hack_flagged/mean"),
                       "components": {n: logs.get(f"rewards/{n}/mean") for n in [*names, "formatted"]}}
                log.write(json.dumps(row) + "\n")
                log.flush()
                print(f"train: step {row['step']} reward {row['reward']:.3f} hack {row['hack_fraction']:.3f} "
                      f"({row['seconds']:.0f} s)", flush=True)

        def on_step_end(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            if time.monotonic() - started > args.minutes * 60:
                control.should_training_stop = True

    config = GRPOConfig(
        output_dir=str(args.work / "trainer"), max_steps=args.max_steps, num_generations=group,
        per_device_train_batch_size=group * args.prompts_per_step, gradient_accumulation_steps=1,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate, beta=0.0,
        temperature=1.0, reward_weights=weights, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=not cuda, bf16=cuda, seed=args.seed, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=str(base), reward_funcs=funcs, args=config, train_dataset=train,
                          callbacks=[Watch()])
    trainer.train()
    minutes = (time.monotonic() - started) / 60
    saved = args.work / "trained-hf"
    trainer.save_model(str(saved))
    AutoTokenizer.from_pretrained(base).save_pretrained(saved)

    # reload from disk and play one held-out episode before declaring success
    model = AutoModelForCausalLM.from_pretrained(saved)
    tokenizer = AutoTokenizer.from_pretrained(saved)
    row = json.loads((args.export / "dataset" / "eval.jsonl").read_text().splitlines()[0])
    ids = tokenizer.apply_chat_template(row["messages"], add_generation_prompt=True, return_tensors="pt")
    reply_ids = model.generate(ids, max_new_tokens=args.max_completion_length, do_sample=False)
    reply = tokenizer.decode(reply_ids[0][ids.shape[-1]:], skip_special_tokens=True)
    rewards = export.score(row["key"], reply)
    episode = {"key": row["key"], "prompt": row["messages"][-1]["content"], "reply": reply, "rewards": rewards}
    (args.work / "reload_episode.json").write_text(json.dumps(episode, indent=1))
    print(json.dumps({"steps": trainer.state.global_step, "minutes": round(minutes, 2), "device":
                      "cuda" if cuda else "cpu", "unsloth": unsloth, "saved": str(saved), "episode": episode}))


if __name__ == "__main__":
    main()
