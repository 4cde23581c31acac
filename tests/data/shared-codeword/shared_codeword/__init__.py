"""shared-codeword: the shape of verifiers' `color_codeword` (environments/color_codeword), small and offline.

Every task opens with the same sentence ("Here are 2 squares.") under the same system prompt; what
tells the tasks apart is only in image parts (coloured squares, each colour a letter) and in the
later turns the env's `run()` reveals as user messages. The reward is an exact match of the final
reply's codeword. Unlike color_codeword it has an oracle hook (the letters revealed so far), and the
reply must be the codeword alone, so the answer-based probes pass here when they play the task
they are in (a planted copy reading color_codeword's way is caught by `first-number`). A scripted model that finds its task by the first user message's text cannot
tell these tasks apart: it must be told which task each rollout plays.

One difference from color_codeword: here no two tasks open with the same squares. color_codeword's
1000 tasks open with 2 of 9 colours (81 pairs), so its first messages repeat whole, images and all,
while the later turns (in `info`) differ.
"""

from __future__ import annotations

import base64
import random
import re
import struct
import zlib

import verifiers.v1 as vf

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
           "purple": (128, 0, 128), "cyan": (0, 255, 255), "orange": (255, 165, 0), "white": (255, 255, 255),
           "black": (0, 0, 0)}
LETTERS = dict(zip(COLOURS, "ABCDEFGHI"))
SYSTEM_PROMPT = ("You will be shown coloured squares across several turns. Each colour maps to a letter: Red=A, "
                 "Green=B, Blue=C, Yellow=D, Purple=E, Cyan=F, Orange=G, White=H, Black=I. After each turn, "
                 "output your accumulated codeword so far: only the letters, no spaces.")
PER_TURN, TURNS, TASKS = 2, 3, 30


def square(colour: str) -> str:
    """A 4x4 PNG of one colour as a data URL (what color_codeword sends; built without PIL)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes(COLOURS[colour]) * 4 for _ in range(4))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


def squares(colours: list[str], text: str) -> list:
    return [vf.ImageUrlContentPart(image_url=vf.ImageUrlSource(url=square(c))) for c in colours] + [
        vf.TextContentPart(text=text)]


def codeword(text: str) -> str:
    """The reply as a codeword: the whole reply, letters A-I only (color_codeword takes the longest A-I run
    anywhere in the reply, the first of equals: a reply offering two codewords is read by the first)."""
    reply = (text or "").strip().upper()
    return reply if re.fullmatch(r"[A-I]+", reply) else ""


class CodewordData(vf.TaskData):
    answer: str
    info: dict


class CodewordTask(vf.Task[CodewordData]):
    @vf.reward(weight=1.0)
    async def exact_match(self, trace: vf.Trace) -> float:
        replies = trace.assistant_messages
        return float(codeword(replies[-1].content or "" if replies else "") == self.data.answer)

    def oracle(self, messages: list[dict]) -> str:
        shown = sum(1 for m in messages if m.get("role") == "user")
        return self.data.answer[: shown * PER_TURN]


class CodewordEnv(vf.SingleAgentEnv):
    """Reveals each later turn's squares after the prior answer, as color_codeword's run() does."""

    async def run(self, task, agents):
        turns = task.data.info["colours_per_turn"]
        async with agents.agent.interaction(task) as interaction:
            segment = await interaction.turn()
            for t in range(1, len(turns)):
                if segment.terminated:
                    break
                text = f"Here are {PER_TURN} more squares." if t < len(turns) - 1 else (
                    f"Here are {PER_TURN} more squares. Output all {PER_TURN * len(turns)} letters.")
                segment = await interaction.turn([vf.UserMessage(content=squares(turns[t], text))])


class CodewordConfig(vf.TasksetConfig):
    pass


class CodewordTaskset(vf.Taskset[CodewordTask, CodewordConfig]):
    def load(self):
        rng = random.Random(42)
        seen: set[str] = set()  # each task's first squares differ (color_codeword's repeat: see the docstring)
        while len(seen) < TASKS:
            sequence = [rng.choice(list(COLOURS)) for _ in range(PER_TURN * TURNS)]
            answer = "".join(LETTERS[c] for c in sequence)
            if answer[:PER_TURN] in seen:
                continue
            seen.add(answer[:PER_TURN])
            per_turn = [sequence[t * PER_TURN:(t + 1) * PER_TURN] for t in range(TURNS)]
            yield CodewordTask(CodewordData(
                idx=len(seen) - 1, prompt=[vf.UserMessage(content=squares(per_turn[0], f"Here are {PER_TURN} squares."))],
                system_prompt=SYSTEM_PROMPT, answer=answer, info={"colours_per_turn": per_turn}), self.config.task)


__all__ = ["CodewordEnv", "CodewordTaskset"]
