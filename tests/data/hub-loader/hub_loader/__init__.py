"""hub-loader: reverse a string, its rows fetched from the Hugging Face Hub at load time. Mirrors verifiers'
`reverse_text` (`load()` calls `datasets.load_dataset("PrimeIntellect/Reverse-Text-RL")`; gsm8k and wiki_search
load the same way), which cannot load in the sandbox: it has no network.

`datasets` is not a dependency of this project, so when it is not installed the loader raises what
`datasets.load_dataset` raises offline (datasets/load.py: `ConnectionError(f"Couldn't reach '{path}' on the Hub
({e.__class__.__name__})")`, here from a LocalEntryNotFoundError-like cause); when it is installed, the real call
is made, on a dataset name that was never published, so no cache can answer it."""

from __future__ import annotations

from difflib import SequenceMatcher

import verifiers.v1 as vf

DATASET = "autoenv-tests/never-published-reverse-text"


class ReverseData(vf.TaskData):
    answer: str


class ReverseTask(vf.Task[ReverseData]):
    @vf.reward
    async def lcs(self, trace: vf.Trace) -> float:
        return SequenceMatcher(None, (trace.last_reply or "").strip(), self.data.answer).ratio()

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class ReverseConfig(vf.TasksetConfig):
    pass


class LocalEntryNotFoundError(Exception):
    """huggingface_hub's error for a file neither in the cache nor reachable (the cause datasets wraps)."""


def load_dataset(path: str, split: str):
    try:
        from datasets import load_dataset as hub_load
    except ImportError:
        try:
            raise LocalEntryNotFoundError("Cannot find the requested files in the disk cache and outgoing traffic "
                                          "has been disabled.")
        except LocalEntryNotFoundError as e:
            raise ConnectionError(f"Couldn't reach '{path}' on the Hub ({e.__class__.__name__})") from e
    return hub_load(path, split=split)


class ReverseTaskset(vf.Taskset[ReverseTask, ReverseConfig]):
    def load(self) -> list[ReverseTask]:
        rows = load_dataset(DATASET, split="train")
        return [ReverseTask(ReverseData(idx=i, prompt=row["text"], answer=row["text"][::-1]), self.config.task)
                for i, row in enumerate(rows)]


__all__ = ["ReverseTaskset"]
