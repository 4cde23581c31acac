"""The candidate's tasks as JSON lines, for the GRPO split (run as a child process: it imports verifiers).

`python -m autoenv.export.dump CANDIDATE_DIR` prints one row per task: idx, key, messages
(system and user, as the model sees them), and the fields the harness reads.
"""

from __future__ import annotations

import json
import sys

from autoenv.child.tasks import candidate_tasks, task_row
from autoenv.gates.scoring import task_messages


def main(argv: list[str]) -> int:
    for task in candidate_tasks(argv[0]):
        print(json.dumps({**task_row(task), "messages": task_messages(task)}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
