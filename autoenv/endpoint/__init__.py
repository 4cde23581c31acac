"""The built-in OpenAI-compatible endpoint: scripted policies by model name, with injectable faults.

- `server`: the aiohttp app on 127.0.0.1 (streaming and plain chat completions, /v1/models);
- `policies`: the oracle, the noisy oracle and the exploit probes as model names;
- `grader`: the scripted grader of model-graded rewards, answering in the form the judge's prompt asks for.

May import: core, gates. Imported by: child, judge, review, evaluation, cli.
"""
