"""`rubric init NAME --harbor`: a new Harbor task folder that `rubric check` passes as written.

It writes Harbor's current schema (`schema_version` 1.1+, a `[task]` section naming the task as
`org/name` when NAME says so) with the fields a task usually sets, and the optional ones
rubric honours (variables, users, network, healthcheck) as comments to switch on.
"""

from __future__ import annotations

from pathlib import Path

from envs._harbor.files import HarborTaskError
from envs._harbor.task import TASK_NAME as _NAME

DEFAULT_BASE_IMAGE = "debian:bookworm-slim"

_FILES = {
    "task.toml": """schema_version = "1.1"

[task]
name = "{name}"
description = "Write the word done into /app/result.txt."
authors = []
keywords = ["files"]

[metadata]
difficulty = "easy"
category = "files"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 600.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 10240
# network_mode = "no-network"     # or "public" (the default); one mode for the agent and the tests
# workdir = "/app"                # where the agent starts (over the Dockerfile's WORKDIR)
# env = { LANG = "C.UTF-8" }       # every command's variables

# [environment.healthcheck]       # must pass before the agent starts
# command = "test -d /app"
# interval_sec = 1.0
# retries = 3

# [agent]: user = "nobody" runs the agent as that user; env = { KEY = "${HOST_VAR:-default}" }
# [verifier]: env = { TOKEN = "${HOST_SECRET}" } reaches tests/test.sh only, never the agent
""",
    "instruction.md": "Write the word done into the file /app/result.txt.\n",
    "environment/Dockerfile": "FROM {base}\nWORKDIR /app\n",
    "tests/test.sh": """#!/bin/bash
# The verifier: runs after the agent, writes its reward (always, on every path).
if [ "$(cat /app/result.txt 2>/dev/null)" = "done" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
""",
    "solution/solve.sh": "#!/bin/bash\necho done > /app/result.txt\n",
}


def init_harbor_task(name: str, parent: str | Path = ".", base_image: str | None = None) -> list[Path]:
    """Write a new Harbor task folder, `parent/name`, to edit, as `rubric init --harbor` does.

    Its oracle (solution/solve.sh) scores 1 and doing nothing scores 0, so it passes
    `check_harbor_tasks` as written.

    Args:
        name: The task's name, "my-task" or "org/my-task" (`[task] name`; the folder is
            "my-task").
        parent: The folder to create it in.
        base_image: The image its Dockerfile starts FROM (default: debian:bookworm-slim).

    Returns:
        The files written.

    Raises:
        HarborTaskError: The folder exists already, or the name is not a plain folder name.
    """
    org, _, short = name.rpartition("/")
    if not short or short.startswith(".") or "/" in org or (org and not _NAME.match(name)):
        raise HarborTaskError(f"task name {name!r} must be a folder name such as 'my-task', or 'org/my-task'")
    folder = Path(parent).expanduser() / short
    if folder.exists():
        raise HarborTaskError(f"{folder} exists already; pick another name or remove it")
    written = []
    for relative, text in _FILES.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{base}", base_image or DEFAULT_BASE_IMAGE).replace("{name}", name))
        written.append(path)
    return written
