"""The eval cache: the key, and a cache hit that spends no model request at the built-in endpoint."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import pytest
from conftest import commit_all, small_config
from test_pipeline import stats

from autoenv.core.config import load_config
from autoenv.core.errors import AutoEnvError
from autoenv.endpoint.policies import Policies
from autoenv.endpoint.server import Endpoint
from autoenv.evaluation.context import EvalOptions, Outcome
from autoenv.evaluation.decision import verdict
from autoenv.evaluation.pipeline import evaluate
from autoenv.evaluation.preflight import preflight
from autoenv.evaluation.recording import record
from autoenv.run.cache import cache_key, cached
from autoenv.run.demo import make_run_repo
from autoenv.run.gitrepo import Repo
from autoenv.run.ledger import read_entries


def key_of(root: Path, offline: bool = True) -> str | None:
    repo = Repo(root)
    return cache_key(repo, repo.head(), load_config(root / "config.toml"), offline)


def test_the_key_follows_the_candidate_tree_spec_config_and_models(run_repo):
    root = run_repo("arithmetic")
    first = key_of(root)
    (root / "NOTES.md").write_text("outside the candidate\n")
    commit_all(root, "a note")
    assert key_of(root) == first  # a commit that leaves candidate/, spec and config alone
    assert key_of(root, offline=False) != first  # other models
    for path, change in (("candidate/README.md", "clearer\n"), ("spec.md", "# harder\n"),
                         ("config.toml", small_config(examples=4))):
        (root / path).write_text(change)
        commit_all(root, f"change {path}")
        assert key_of(root) != first, path
        first = key_of(root)


def test_only_a_finished_evaluation_of_the_same_run_is_reused(run_repo):
    root = run_repo("arithmetic")
    ctx = preflight(EvalOptions(cwd=root, offline=True))
    assert ctx.cache_key == key_of(root)
    crash = record(ctx, verdict(ctx, Outcome(error=AutoEnvError("boom"))))
    entries = read_entries(ctx.config.path("log_file"))
    assert crash.cache_key == ctx.cache_key
    assert cached(entries, ctx.cache_key, branch=ctx.head.branch, run_base=None) is None  # a crash is never reused
    done = record(ctx, verdict(ctx, Outcome(stats=stats())))
    entries = read_entries(ctx.config.path("log_file"))
    assert cached(entries, ctx.cache_key, branch=ctx.head.branch, run_base=None) == done
    assert cached(entries, ctx.cache_key, branch="autoenv/other", run_base=None) is None
    assert cached(entries, ctx.cache_key, branch=ctx.head.branch, run_base="0" * 40) is None


class Served:
    """The built-in endpoint on a thread of its own, counting the requests it gets."""

    def __init__(self, policies: Policies | None = None) -> None:
        self.endpoint = Endpoint(policies or Policies(None))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return asyncio.run_coroutine_threadsafe(self.endpoint.start(), self.loop).result(30)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@pytest.mark.e2e
def test_a_cache_hit_spends_no_model_request(tmp_path):
    with Served() as endpoint:
        config = small_config()
        config = re.sub(r'(?m)^model = "gpt-4\.1-mini"', 'model = "echo"', config)
        config = re.sub(r'(?m)^model = "gpt-4\.1"', 'model = "refusal"', config)
        config = re.sub(r'(?m)^base_url = .*', f'base_url = "{endpoint.base_url}"', config)
        config = re.sub(r'(?m)^api_key_var = .*', 'api_key_var = ""', config)
        config = re.sub(r'(?m)^backend = .*', 'backend = "offline"', config)
        root = make_run_repo("arithmetic", tmp_path / "run", config)
        first = evaluate(EvalOptions(cwd=root, description="first"))
        spent = endpoint.counts["requests"]
        assert first.verdict.verdict == "baseline" and spent >= 12 and first.cached_from is None
        (root / "NOTES.md").write_text("a commit that leaves the candidate alone\n")
        commit_all(root, "notes")
        started = time.time()
        hit = evaluate(EvalOptions(cwd=root, description="same candidate"))
        seconds = time.time() - started
        assert endpoint.counts["requests"] == spent  # zero model requests
        assert hit.cached_from == first.commit and hit.commit != first.commit
        assert hit.stats == {} and hit.verdict.verdict == "cached" and not hit.kept  # a pointer, not a copy
        assert hit.verdict.reason.startswith(f"cached from {first.commit[:12]}")
        assert hit.description == "same candidate" and "install" not in hit.timings
        assert [e.commit for e in read_entries(root / "feedback_log.jsonl")] == [first.commit, hit.commit]
        print(f"cache hit: {seconds:.2f} s, 0 model requests (the evaluation it reused made {spent})")
        forced = evaluate(EvalOptions(cwd=root, description="forced", force=True))
        assert forced.cached_from is None and endpoint.counts["requests"] > spent
