"""core: the vocabulary every part of AutoEnv speaks, and nothing that runs a stage.

What is here: the one error type (errors), how numbers read (formats), difficulty order
(levels), chat messages (messages), the worker's event line (events), the protected files
(protected), where the project's files are (paths, cachedir), their bytecode compiled once (bytecode), the worker job (job), the
evaluation record and its schema (record, schema/), config.toml (config, runtimes, and configdoc,
which writes docs/config.md from it), the one
place that prints (display), the untrusted files a child writes (childfiles), verifiers'
traces read as plain JSON (traces), the cluster bootstrap (resample) and the loopback HTTP
vocabulary shared by the endpoint and the forwarder (http).

May import: nothing of autoenv outside core. Imported by: every other part.
"""
