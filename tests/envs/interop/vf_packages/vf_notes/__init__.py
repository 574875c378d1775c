"""A Verifiers (0.4, `verifiers.v1`) environment with a task-scoped toolset: a notebook per rollout."""

from collections.abc import Iterable

import verifiers.v1 as vf


class Notebook(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = None  # Verifiers advertises these tools bare: `write`, `read`

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.notes: list[str] = []

    @vf.tool
    async def write(self, text: str) -> str:
        """Add a note."""
        self.notes.append(text)
        return f"{len(self.notes)} note(s)"

    @vf.tool
    async def read(self) -> str:
        """All notes, one per line."""
        return "\n".join(self.notes) or "(empty)"


class NoteData(vf.TaskData):
    answer: str


class NoteTask(vf.Task[NoteData]):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
        return [Notebook(vf.ToolsetConfig())]

    @vf.reward
    async def remembered(self, task: NoteData, trace: vf.Trace) -> float:
        return float(trace.last_reply == task.answer)


class NoteTaskset(vf.Taskset[NoteTask, vf.TasksetConfig]):
    def load(self) -> Iterable[NoteTask]:
        yield NoteTask(NoteData(prompt="Write 'hello' in the notebook, then read it back.", answer="hello"))


if __name__ == "__main__":
    Notebook.run()


__all__ = ["NoteTaskset"]
