"""The engine: one rollout (`runner`), a whole run (`evaluation`), and where rollouts run
(`executors`: worker processes, Ray actors). Private; reached through the `harness` package."""
