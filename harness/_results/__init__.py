"""A run's results: on disk, summarized, exported, merged, compared and re-scored.

- `storage`: the run directory (`results.jsonl`, `metadata.json`), written crash-safely.
- `summary`: the numbers a run is judged by (mean reward, node means, pass@k, errors).
- `eval_results`: `EvalResults`, what `evaluate` returns and `load_results` reads back.
- `exports`: training datasets (SFT, preference, token-faithful RL, GRPO prompts).
- `sharding`: a run split by example, and the shards merged back (`merge_results`).
- `compare`: two runs of one environment side by side.
- `rescoring`: saved rollouts scored again by an environment's current rubric.

May import the harness core (`harness._core.types`, `errors`, `text`, `protocol`, `runner` for
describing errors); never the views, executors or the scripted endpoint, so results can be
read anywhere without loading a renderer.
"""
