"""The feedback files' markdown as HTML, for the report page (no library, no network).

Only what `report.render` and the judge's section write: headings, paragraphs, bullet
and numbered lists, pipe tables, fenced code, and inline code, bold, italics and links.
Everything is HTML-escaped before any markup is added, since the feedback quotes model
output and the agent's description; links are kept only for http(s) addresses.
"""

from __future__ import annotations

import html
import re
from typing import Callable

FENCE = re.compile(r"^(`{3,})")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
BULLET = re.compile(r"^\s*[-*]\s+(.*)$")
NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.*)$")
TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
BOLD = re.compile(r"\*\*(.+?)\*\*")
ITALIC = re.compile(r"(?<![\w*])[_*]([^_*\s][^_*]*?)[_*](?![\w*])")


def to_html(text: str, rebase: Callable[[str], str] | None = None) -> str:
    """`text` as HTML; `rebase` rewrites relative link targets (they are relative to the
    markdown file, the page may live elsewhere)."""
    def inline_(text: str) -> str:
        return inline(text, rebase)

    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence := FENCE.match(line.strip()):
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:end])) + "</code></pre>")
            i = end + 1
        elif heading := HEADING.match(line):
            level = min(len(heading.group(1)) + 1, 6)  # the page has its own h1
            out.append(f"<h{level}>{inline_(heading.group(2))}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1].strip()):
            end = i + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            out.append(_table(lines[i], lines[i + 2:end], inline_))
            i = end
        elif BULLET.match(line) or NUMBERED.match(line):
            kind = "ul" if BULLET.match(line) else "ol"
            pattern = BULLET if kind == "ul" else NUMBERED
            items = []
            while i < len(lines) and (m := pattern.match(lines[i])):
                items.append(f"<li>{inline_(m.group(1))}</li>")
                i += 1
            out.append(f"<{kind}>{''.join(items)}</{kind}>")
        elif not line.strip():
            i += 1
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines, i):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{inline_(' '.join(para))}</p>")
    return "\n".join(out)


def _starts_block(lines: list[str], i: int) -> bool:
    line = lines[i]
    return bool(FENCE.match(line.strip()) or HEADING.match(line) or BULLET.match(line) or NUMBERED.match(line)
                or (line.lstrip().startswith("|") and i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1].strip())))


def _cells(line: str) -> list[str]:
    line = line.strip()
    line = line.removeprefix("|")
    line = line.removesuffix("|")
    return [cell.strip() for cell in line.split("|")]


def _table(header: str, body: list[str], inline_: Callable[[str], str]) -> str:
    head = "".join(f"<th>{inline_(c)}</th>" for c in _cells(header))
    rows = "".join("<tr>" + "".join(f"<td>{inline_(c)}</td>" for c in _cells(r)) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def inline(text: str, rebase: Callable[[str], str] | None = None) -> str:
    """Escape `text`, then add code spans, bold, italics and links (http(s), or relative
    ones through `rebase`)."""
    parts = text.split("`")
    out = []
    for n, part in enumerate(parts):
        if n % 2 and n < len(parts) - 1:  # inside a code span (an unmatched backtick stays literal)
            out.append(f"<code>{html.escape(part)}</code>")
            continue
        piece = html.escape(part if n % 2 == 0 else "`" + part, quote=True)
        piece = LINK.sub(lambda m: _link(m, rebase), piece)
        piece = BOLD.sub(r"<strong>\1</strong>", piece)
        piece = ITALIC.sub(r"<em>\1</em>", piece)
        out.append(piece)
    return "".join(out)


def _link(match: re.Match, rebase: Callable[[str], str] | None) -> str:
    label, target = match.group(1), html.unescape(match.group(2))
    if re.match(r"^https?://", target):
        return f'<a href="{html.escape(target)}" rel="noopener noreferrer">{label}</a>'
    if rebase and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # relative paths only, never javascript:
        return f'<a href="{html.escape(rebase(target))}">{label}</a>'
    return f"{label} (<code>{html.escape(target)}</code>)"
