"""The model-free gates: is the reward faithful and the dataset sound, before any model is paid for.

What the probes say and how their measurements are judged; the probes are played beside the
candidate by autoenv.child (audit, derived, replay, rollout_probes), which writes the typed
records read here. No verifiers import.

- `rules`, `derived_rules`, `seat_rules`, `replay_rules`: the stage that asks the child for the
  audit, and the rules that judge its typed records (`audit_record`, `derived_record`) against
  config.toml into findings (`findings`);
- `families`, `probes`: the exploit replies (empty, echo, wrong answer, padding, ...) by family;
- `search`, `action_search`: the reward search, over reply templates and over action plans, with its
  transfer check on held-out tasks; `source_reading`: the formats and literals the reward's source parses
  and compares with (read with `ast`, never run), its patterns' templates by `regex_templates`; `ceiling`:
  components the reference never earns;
- `oracle`: finds a conversation's task and asks its oracle hook for the reference reply;
- `answer_oracle`: the reference reply inferred from the tasks' answer field when there is no hook;
- `dataset`, `free`, `coverage`, `ranges`, `rejections`, `gold`, `seats`, `scoring`: the
  measures the rules read (duplicates and balance, content-free scores, reward ranges, ...);
- `matrix`: the exploit matrix, what each probe harvested from each reward component;
- `network`: probe replies a missing network cut off, untested as `needs network: HOST`, in one finding;
- `ungraded`: probe replies whose judged reward's grader and parser disagreed on the verdict form offline, untested.

May import: core, sandbox. Imported by: endpoint, child, judge, export, evaluation, cli.
"""
