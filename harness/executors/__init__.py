"""Where rollouts run when not on the driver's own event loop: worker processes or Ray actors.

- `workers`: the worker process, its runtime, and the scheduler every executor shares.
- `ray_cluster`: the same workers as Ray actors (the `ray` extra, imported only when used).
- `plan`: picks the executor for a run from its settings.

May import the harness engine below them (`client`, `runner`, `protocol`, `types`); the
engine's `evaluation` is the only caller.
"""
