"""A run's results read back: exported, merged, compared and re-scored.

- `eval_results`: `EvalResults`, what `evaluate` returns and `load_results` reads back.
- `exports`: training datasets (SFT, preference, token-faithful RL, GRPO prompts).
- `sharding`: a run split by example, and the shards merged back (`merge_results`).
- `compare`: two runs of one environment side by side.
- `rescoring`: saved rollouts scored again by an environment's current rubric.

The run folder itself (`storage`, `run_dirs`) and the numbers (`summary`, `stats`) are in the
foundation, `harness._core`. May import the foundation and the endpoint; never the engine,
views or the scripted endpoint, so results can be read anywhere without loading a renderer.
"""
