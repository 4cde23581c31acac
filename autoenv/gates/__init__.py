"""The model-free gates: is the reward faithful and the dataset sound, before any model is paid for.

- `rules`: runs the audit worker and judges its measurements against config.toml;
- `audit`: the worker process that loads the candidate, measures it and plays the probes;
- `dataset`: duplicates, near-duplicates (MinHash) and balance of the task set;
- `probes`: the exploit replies (empty, echo, wrong answer, padding, ...);
- `oracle`: finds a conversation's task and asks its oracle hook for the reference reply;
- `answer_oracle`: the reference reply inferred from the tasks' `answer` when there is no hook;
- `derived`: exploit probes derived from the models' best replies after the rollouts;
- `matrix`: the exploit matrix, what each probe harvested from each reward component.
"""
