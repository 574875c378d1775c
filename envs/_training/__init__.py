"""Trainer adapters: an Environment as TRL's GRPOTrainer arguments (`trl`), as verl's dataset
and reward (`verl`), and an agent episode as TRL's `rollout_func` and reward (`agents`).

Under `envs._environment` (`env.trl()` and `env.verl()` build these). verl's agent loop,
which loads environments by name, sits above the registry (`envs._verl_agent_loop`); the
rubric-level adapters (`Rubric.as_trl_reward()`, `as_verl_reward()`) are `rubrics._trl` and
`rubrics._verl`.
"""
