"""remote-check: which language a repository is written in, checked by a service on the internet. Mirrors
verifiers' `deepwiki` (its tools live on the public MCP server https://mcp.deepwiki.com/mcp: "the harness runtime
therefore needs outbound network access"): here the reward itself asks the remote service, over plain httpx, so
the network need shows up in scoring even offline. The host is `.invalid` (RFC 2606): it never resolves, in the
sandbox or out of it, so the test needs no network and reaches none."""

from __future__ import annotations

import httpx
import verifiers.v1 as vf

CHECKER = "https://languages.example.invalid/v1/check"
REPOS = {"modelcontextprotocol/python-sdk": "python", "tokio-rs/tokio": "rust", "golang/go": "go",
         "rails/rails": "ruby", "JuliaLang/julia": "julia", "apple/swift": "c++", "elixir-lang/elixir": "elixir",
         "dotnet/roslyn": "c#", "php/php-src": "c", "ziglang/zig": "zig", "nodejs/node": "javascript",
         "scala/scala": "scala"}


class RepoData(vf.TaskData):
    answer: str


class RepoTask(vf.Task[RepoData]):
    @vf.reward
    async def confirmed(self, trace: vf.Trace) -> float:
        async with httpx.AsyncClient(timeout=10) as client:
            reply = await client.post(CHECKER, json={"repo": self.data.name, "language": trace.last_reply or ""})
        reply.raise_for_status()
        return float(reply.json()["correct"])

    def oracle(self, messages: list[dict]) -> str:
        return self.data.answer


class RepoConfig(vf.TasksetConfig):
    pass


class RepoTaskset(vf.Taskset[RepoTask, RepoConfig]):
    def load(self) -> list[RepoTask]:
        return [RepoTask(RepoData(idx=i, name=repo, answer=language,
                                  prompt=f'What programming language is the "{repo}" GitHub repository primarily '
                                         "written in? Reply with just the language name."), self.config.task)
                for i, (repo, language) in enumerate(REPOS.items())]


__all__ = ["RepoTaskset"]
