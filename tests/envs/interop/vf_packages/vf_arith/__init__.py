"""A single-turn Verifiers (0.4, `verifiers.v1`) environment: sums, two weighted rewards and a metric."""

from collections.abc import Iterable

import verifiers.v1 as vf


class ArithData(vf.TaskData):
    answer: str


class ArithTask(vf.Task[ArithData]):
    @vf.reward(weight=0.75)
    async def correct(self, task: ArithData, trace: vf.Trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.25)
    async def concise(self, trace: vf.Trace) -> float:
        if not trace.last_reply:
            raise ValueError("an empty reply has no length to judge")
        return 1.0 if len(trace.last_reply) <= 2 else 0.5

    @vf.reward(weight=-0.5)
    async def shouting(self, trace: vf.Trace) -> dict[str, float]:
        return {"upper": float(trace.last_reply.isupper()), "bang": float("!" in trace.last_reply)}

    @vf.metric
    async def reply_length(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class ArithConfig(vf.TasksetConfig):
    num_tasks: int = 4


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self) -> Iterable[ArithTask]:
        for i in range(self.config.num_tasks):
            data = ArithData(
                prompt=f"What is {i} + {i + 3}?",
                system_prompt="Reply with the number only.",
                answer=str(2 * i + 3),
            )
            yield ArithTask(data, self.config.task)


__all__ = ["ArithTaskset"]
