"""A tool-use Verifiers (0.4, `verifiers.v1`) environment: an MCP toolset with `add`, rewards that read its calls."""

from collections.abc import Iterable

import verifiers.v1 as vf


class Calculator(vf.Toolset[vf.ToolsetConfig]):
    @vf.tool
    async def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b


class CalcData(vf.TaskData):
    answer: str


class CalcTask(vf.Task[CalcData]):
    @vf.reward(weight=0.5)
    async def correct(self, task: CalcData, trace: vf.Trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.5)
    async def used_tool(self, trace: vf.Trace) -> float:
        return float(any(m.name == "calculator_add" for m in trace.tool_messages))


class CalcTaskset(vf.Taskset[CalcTask, vf.TasksetConfig]):
    def load(self) -> Iterable[CalcTask]:
        for a, b in [(2, 3), (40, 2), (7, 8)]:
            yield CalcTask(
                CalcData(prompt=f"Use the tool: what is {a} + {b}?", answer=str(a + b)), self.config.task
            )

    @classmethod
    def toolsets(cls, config: vf.TasksetConfig) -> list[vf.Toolset]:
        return [Calculator(vf.ToolsetConfig())]


if __name__ == "__main__":
    Calculator.run()


__all__ = ["CalcTaskset"]
