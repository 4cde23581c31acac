"""child: what executes beside the candidate, inside the evaluation's sandboxed child process.

The child's stage loop (main: `python -m autoenv.child.main JOB.json`) and its warm fork
server (forkserver); loading the candidate through verifiers (tasks, task_rows, exports, runtime,
inprocess, limits: every call into the candidate's code under a time limit); the probes the
gates play in process and in rollouts (audit, derived, replay, rollout_probes); the rollouts
(worker, sampling, permits), the hosts the candidate's code tried to reach (netwatch), a
model-graded reward routed to the scripted grader
(judge_routing) and an earlier evaluation's traces scored again (rescore_stage).

Only this part imports verifiers at module level; the harness reads what it writes through
core.childfiles and never trusts it.

May import: core, run, sandbox, gates, endpoint. Imported by: export, cli.
"""
