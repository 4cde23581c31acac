"""`autoenv report`: one self-contained HTML page, checked as text and in headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest
from chromium import Browser, chromium_or_reason
from review_run import review, review_run

from autoenv.cli import main
from autoenv.review.markdown import to_html


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return review_run(tmp_path_factory.getbasetemp() / "review")


@pytest.fixture(scope="module")
def page(run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    code = _report(run.root, out)
    assert code == 0
    return out


def _report(root: Path, out: Path) -> int:
    """The CLI in-process, as review() runs it, without capsys (this fixture is module-scoped)."""
    here = os.getcwd()
    os.chdir(root)
    try:
        return main(["report", "--out", str(out)])
    finally:
        os.chdir(here)


def data(html: str) -> dict:
    raw = re.search(r'<script type="application/json" id="rollout-data">(.*?)</script>', html, re.DOTALL).group(1)
    return json.loads(raw)


def test_the_page_needs_nothing_outside_itself(page):
    html = page.read_text()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)  # no CDN, no remote anything
    assert "<link rel=\"stylesheet\"" not in html and "@import" not in html and "<script src" not in html
    assert html.count('src="data:image/png;base64,') == 2  # the run plot and the before/after comparison


def test_the_page_holds_the_log_the_feedback_and_the_rollouts(run, page):
    html = page.read_text()
    assert "<h1>Run autoenv/demo-arithmetic</h1>" in html
    log = html.split('<table class="log">')[1].split("</table>")[0]
    assert log.count("<tr>") == 8 and run.commits["other"][:8] not in log  # header + 7, this run only
    assert 'class="verdict crash"' in log and '<span class="mark">◀ last kept</span>' in log
    assert "partial credit &lt;b&gt;for&lt;/b&gt; [bold]steps[/bold]" in html  # escaped, never markup
    assert html.count('<details id="eval-') == 7 and html.count("<h3>Judge (offline)</h3>") == 6  # all but the crash
    d = data(html)
    assert {r["n"] for r in d["rollouts"]} == {1, 2, 3, 6, 7} and len(d["rollouts"]) == 5 * 16
    assert d["initial_evaluation"] == 7 and d["solve_threshold"] == 1.0
    tool = [m for r in d["rollouts"] for m in r["messages"] if m["role"] == "tool"]
    assert tool and tool[0]["text"].endswith("<script>alert(1)</script>")
    assert "<script>alert(1)</script>" not in html  # the JSON cannot close its script element


def test_feedback_links_point_at_the_files_from_the_page(run, page):
    html = page.read_text()
    link = re.search(r'the run so far: <a href="([^"]+)">plot\.png</a>', html).group(1)
    assert (page.parent / link).resolve() == (run.root / "outputs" / run.commits["real"] / "plot.png").resolve()


def test_markdown_is_escaped_and_only_safe_links_survive():
    html = to_html("# Title\n\nSome **bold** and `<code>` and <script>x</script>\n\n"
                   "- [site](https://example.org) and [bad](javascript:alert(1))\n\n"
                   "| a | b |\n|---|---|\n| 1 | x_y_z |\n\n```\n<raw>\n```")
    assert "<h2>Title</h2>" in html and "<strong>bold</strong>" in html and "<code>&lt;code&gt;</code>" in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>" not in html
    assert '<a href="https://example.org" rel="noopener noreferrer">site</a>' in html
    assert 'href="javascript' not in html and "bad (<code>javascript:" in html
    assert "<td>x_y_z</td>" in html and "<pre><code>&lt;raw&gt;</code></pre>" in html


def test_an_empty_run_has_no_report(run, capsys, tmp_path):
    code, _, err = review(capsys, run.root, "report", "--tag", "nothing-here")
    assert code == 2 and "there is no run autoenv/nothing-here" in err


@pytest.mark.slow
def test_the_page_in_headless_chromium(page, tmp_path):
    binary, reason = chromium_or_reason()
    if binary is None:
        pytest.skip(f"headless Chromium unavailable: {reason}")

    async def visit() -> dict:
        async with Browser(binary) as browser:
            await browser.open(page)
            seen = {"images": await browser.evaluate(
                "Array.from(document.images).map(i => i.complete && i.naturalWidth)")}
            count = "document.getElementById('rollout-count').getAttribute('data-shown')"
            seen["first"] = await browser.evaluate(count)
            await browser.click('#filter-model [data-value="strong · oracle"]')
            seen["strong"] = await browser.evaluate(count)
            await browser.click('#filter-reward [data-value="zero"]')
            seen["strong failed"] = await browser.evaluate(count)
            await browser.click('#filter-model [data-value="target · noisy-oracle:0.45"]')
            seen["target failed"] = await browser.evaluate(count)
            await browser.click("#rollout-list tbody tr")
            seen["transcript"] = await browser.evaluate("document.getElementById('transcript').innerText")
            await browser.evaluate("document.getElementById('rollouts').scrollIntoView()")
            await browser.screenshot(tmp_path / "report.png")
            seen["errors"] = browser.errors
            return seen

    seen = asyncio.run(asyncio.wait_for(visit(), timeout=120))
    assert seen["errors"] == []
    assert seen["images"] == [1200, 1200]
    # the newest evaluation (#7: 16 rollouts) is shown first; its strong model never fails, its target half the time
    assert (seen["first"], seen["strong"], seen["strong failed"], seen["target failed"]) == ("16", "8", "0", "4")
    assert seen["transcript"].startswith("Rollout target-") and "reward 0" in seen["transcript"]
    assert (tmp_path / "report.png").stat().st_size > 20_000


def test_rollouts_carry_the_task_id_and_reference_answer_sorted_by_task(run, page):
    rollouts = data(page.read_text())["rollouts"]
    newest = [r for r in rollouts if r["n"] == 7]
    assert [r["idx"] for r in newest] == sorted(r["idx"] for r in newest)  # by task, not by random id
    answers = {t["idx"]: t["answer"] for t in run.tasks}
    assert all(r["answer"] == answers[r["idx"]] and r["task"].startswith("arith:") for r in newest)
    assert data(page.read_text())["difficulties"] == ["easy", "medium", "hard"]  # natural, not alphabetical


def test_the_sparkline_tells_close_values_and_no_data_apart():
    from autoenv.review.html import spark_svg
    svg = spark_svg([(1, 0.25), (2, 0.375), (3, None), (4, 0.0)])
    heights = [float(h) for h in re.findall(r'class="bar" x="[\d.]+" y="[\d.]+" width="10" height="([\d.]+)"', svg)]
    assert len(heights) == 3 and heights[0] < heights[1] and heights[2] == 1.0  # 0.25 < 0.375; zero a stub
    assert svg.count('class="nodata"') == 1 and "#3: no data (no scores)" in svg and "#4: 0.000" in svg


@pytest.mark.slow
def test_the_page_fits_1280_px_with_wide_content(run, tmp_path):
    """A wide exploit-matrix-like table and unbroken text in the feedback, a long description: the page never
    scrolls sideways at 1280 px; the wide table scrolls inside its own box. Screenshot: report-1280.png."""
    binary, reason = chromium_or_reason()
    if binary is None:
        pytest.skip(f"headless Chromium unavailable: {reason}")
    from review_run import copy_run
    copy = copy_run(run, tmp_path / "copy")
    feedback = copy.root / "feedback" / f"{run.commits['priced']}.md"
    wide = "| probe | " + " | ".join(f"component_{i}_with_a_long_name" for i in range(18)) + " |\n"
    wide += "|---" * 19 + "|\n" + "| echo | " + " | ".join("0.000" for _ in range(18)) + " |\n"
    feedback.write_text(feedback.read_text() + "\n\n## Exploit matrix\n\n" + wide + "\n" + "x" * 3000 + "\n")
    out = tmp_path / "report.html"
    assert _report(copy.root, out) == 0

    async def visit() -> dict:
        async with Browser(binary, width=1280, height=1000) as browser:
            await browser.open(out)
            seen = {"width": await browser.evaluate("document.body.scrollWidth"),
                    "doc": await browser.evaluate("document.documentElement.scrollWidth"),
                    "inner": await browser.evaluate("window.innerWidth")}
            await browser.evaluate("document.querySelector('#feedback details:last-of-type').open = true")
            seen["boxed"] = await browser.evaluate(
                "Array.from(document.querySelectorAll('.md table')).map(t => [t.scrollWidth, t.clientWidth])")
            seen["after"] = await browser.evaluate("document.documentElement.scrollWidth")
            await browser.click("#rollout-list tbody tr")
            seen["transcript"] = await browser.evaluate("document.getElementById('transcript').innerText")
            seen["chips"] = await browser.evaluate(
                "Array.from(document.querySelectorAll('#filter-difficulty .chip')).map(c => c.textContent)")
            await browser.evaluate("document.getElementById('feedback').scrollIntoView()")
            await browser.screenshot(tmp_path / "report-1280.png")
            seen["errors"] = browser.errors
            return seen

    seen = asyncio.run(asyncio.wait_for(visit(), timeout=120))
    print(f"scrollWidth at 1280 px: body {seen['width']}, document {seen['doc']} (viewport {seen['inner']})")
    assert seen["errors"] == []
    assert seen["width"] <= 1280 and seen["doc"] <= seen["inner"] and seen["after"] <= seen["inner"]
    assert any(scroll > client for scroll, client in seen["boxed"]), seen["boxed"]  # scrolls in its box
    assert "reference answer: " in seen["transcript"] and "task id: arith:" in seen["transcript"]
    assert seen["chips"] == ["all", "easy", "medium", "hard"]
    assert (tmp_path / "report-1280.png").stat().st_size > 20_000
