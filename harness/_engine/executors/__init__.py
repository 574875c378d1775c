"""Where rollouts run when not on the driver's own event loop: worker processes or Ray actors.

- `jobs`: a run's plan (what it must produce, what is done) and its jobs, computed on demand.
- `scheduler`: hands jobs to workers of any kind, re-queues those of a worker that dies.
- `workers`: the worker process and the runtime every kind of worker runs.
- `ray_cluster`: the same workers as Ray actors (the `ray` extra, imported only when used).
- `plan`: picks the executor for a run from its settings.

May import the harness engine below them (`client`, `runner`, `protocol`, `types`); the
engine's `evaluation` is the only caller.
"""
