"""`autoenv show`: one evaluation's summary, one rollout's transcript, and the commit lookup."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest
from review_run import commit_all, copy_run, review, review_run

from autoenv.core.errors import AutoEnvError
from autoenv.review.lookup import find_row
from autoenv.review.run import Project, load_run
from autoenv.review.transcripts import evaluation_transcripts


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review")


def test_the_summary_of_an_evaluation(run, capsys):
    keep = run.commits["keep"]
    code, out, _ = review(capsys, run.root, "show", keep[:7])
    assert code == 0
    assert out.startswith(f"Evaluation #6 of autoenv/demo-arithmetic: {keep}")
    # the description is shown as written: neither markup nor HTML is interpreted
    assert "description: partial credit <b>for</b> [bold]steps[/bold]" in out
    assert "verdict: keep — more tasks with a learning signal" in out
    assert f"compared to the last kept {run.commits['real'][:12]}" in out  # this run's, not the other run's
    for part in ("Evaluation summary", "noisy-oracle:0.45", "Per difficulty", "easy", "hard", "medium",
                 "Per category", "Per reward component", "correct", "Judge (offline)", "timings: judge",
                 f"feedback: feedback/{keep}.md", f"plot: outputs/{keep}/plot.png"):
        assert part in out, part
    assert f"read one: autoenv show {keep[:8]} --rollout target-" in out
    assert "\x1b[" not in out and not set("│┃━┏") & set(out)  # not a terminal: plain tables


def test_a_crash_and_a_failed_gate(run, capsys):
    code, out, _ = review(capsys, run.root, "show", run.commits["crash"])
    assert code == 0 and "stage: rollouts" in out and "ImportError: no module x" in out and "judge: none" in out
    code, out, _ = review(capsys, run.root, "show", run.commits["gates"])
    assert code == 0 and "verdict: discard — failed gates: probe echo" in out
    assert "failed gate: probe echo: mean 0.900 (allowed 10% of the oracle)" in out


def test_a_rollout_as_a_transcript_with_its_tool_call(run, capsys):
    outputs = run.root / "outputs" / run.commits["keep"]
    with_tool = next(t for t in evaluation_transcripts(outputs) if any(m.tool_calls for m in t.messages))
    code, out, _ = review(capsys, run.root, "show", run.commits["keep"], "--rollout", with_tool.id[:11])
    assert code == 0
    assert out.startswith(f"Rollout {with_tool.id} · target · noisy-oracle:0.45")
    assert "task idx 4 · difficulty medium" in out and "reward components: correct 1 (weight 1)" in out
    assert '→ tool call calculator({"expr": "Compute: 6 * 12 - 46"})' in out
    assert "tool (calculator)" in out and "26 <script>alert(1)</script>" in out  # text, as the model saw it
    assert out.index("user") < out.index("→ tool call") < out.index("tool (calculator)")


def test_an_unknown_rollout_names_real_ones(run, capsys):
    code, _, err = review(capsys, run.root, "show", run.commits["keep"], "--rollout", "target-zzzz")
    assert code == 2 and "no rollout 'target-zzzz'" in err and "ids look like target-" in err


def test_an_unknown_commit_suggests_evaluated_ones(run, capsys):
    code, _, err = review(capsys, run.root, "show", "deadbeef")
    assert code == 2
    assert "'deadbeef' is neither a commit of this repository nor an evaluated commit" in err
    assert "evaluated commits that look alike" in err
    code, _, err = review(capsys, run.root, "show", "no-such-ref")  # nothing alike: the newest evaluations
    assert code == 2 and f"{run.commits['priced'][:8]} (inconclusive, longer expressions)" in err
    assert f"{run.commits['keep'][:8]} (keep, partial credit <b>for</b> [bold]steps[/bold])" in err  # not markup


def test_a_commit_never_evaluated_names_the_nearest_evaluations(run, tmp_path, capsys):
    copy = copy_run(run, tmp_path / "copy")
    readme = copy.root / "candidate" / "README.md"
    readme.write_text(readme.read_text() + "\nnot evaluated\n")
    fresh = commit_all(copy.root, "not evaluated yet")
    code, _, err = review(capsys, copy.root, "show", fresh)
    assert code == 2 and f"commit {fresh[:12]} was never evaluated on autoenv/demo-arithmetic" in err
    assert f"before it {run.commits['priced'][:8]} (inconclusive, longer expressions)" in err
    # in the middle of the history: the evaluated commits on both sides
    project = Project.open(copy.root)
    full = load_run(project)
    without_crash = replace(full, rows=[r for r in full.rows if r.commit != run.commits["crash"]])
    with pytest.raises(AutoEnvError) as caught:
        find_row(project, without_crash, run.commits["crash"])
    assert f"before it {run.commits['inconclusive'][:8]}" in caught.value.fix
    assert f"after it {run.commits['gates'][:8]}" in caught.value.fix


def test_refs_and_prefixes_resolve(run, capsys):
    head = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=run.root, capture_output=True, text=True).stdout.strip()
    assert head == run.commits["keep"]
    assert review(capsys, run.root, "show", "HEAD~1")[1].startswith("Evaluation #6")
    code, _, err = review(capsys, run.root, "show", "0000")
    assert code == 2 and "neither a commit" in err


def test_a_huge_reply_is_cut_with_a_marker_and_full_shows_it(run, tmp_path, capsys):
    import json
    copy = copy_run(run, tmp_path / "copy")
    traces = copy.root / "outputs" / run.commits["keep"] / "target" / "traces.jsonl"
    lines = traces.read_text().splitlines()
    episode = json.loads(lines[0])
    huge = "A" * 2_000_000

    def inflate(node) -> bool:  # the first assistant message's text becomes 2 MB
        if isinstance(node, dict):
            message = node.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), str):
                message["content"] = huge
                return True
            return any(inflate(v) for v in node.values())
        return isinstance(node, list) and any(inflate(v) for v in node)

    assert inflate(episode)
    traces.write_text("\n".join([json.dumps(episode), *lines[1:]]) + "\n")
    rollout = next(t for t in evaluation_transcripts(traces.parent.parent) if any(m.text == huge for m in t.messages))
    code, out, _ = review(capsys, copy.root, "show", run.commits["keep"], "--rollout", rollout.id)
    assert code == 0 and len(out) < 20_000
    assert "[… 1996000 more characters cut; --full shows all]" in out
    code, out, _ = review(capsys, copy.root, "show", run.commits["keep"], "--rollout", rollout.id, "--full")
    assert code == 0 and huge in out and "more characters cut" not in out
