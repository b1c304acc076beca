"""The subprocess that checks programs: reads one JSON request per line on stdin ({"id", "path", "backend"}),
writes the phase it is in to a progress file before each step (so a crash or hang is pinned on a program and
a call), and answers one JSON verdict per line on its original stdout."""

from __future__ import annotations

import json
import os
import sys
import warnings


def main() -> None:
    progress_path = sys.argv[1]
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the program or torch prints outside the captured calls goes to the log, not the answers
    sys.stdout = os.fdopen(1, "w", closefd=False)
    sys.dont_write_bytecode = True
    warnings.simplefilter("ignore")
    import torch  # noqa: F401  (imported before the first program so its time is not the program's)

    from framejit.fuzz.runner import check_program

    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()

    for line in sys.stdin:
        request = json.loads(line)
        job = request["id"]

        def progress(phase: str) -> None:
            with open(progress_path, "w") as f:
                f.write(f"{job}\t{phase}\n")

        try:
            verdict = check_program(request["path"], request.get("backend"), progress)
        except Exception as e:  # the harness itself failed on this program: report it, keep going
            verdict = {
                "outcome": "invalid",
                "kind": "harness",
                "detail": f"{type(e).__name__}: {e}",
                "graphs": 0,
                "eager_raised": 0,
                "seconds": 0.0,
            }
        progress("done")
        answers.write(json.dumps({"id": job, **verdict}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
