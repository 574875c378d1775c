"""The foundation of harness: what every other layer, `rubrics` and `envs` stand on.

- `types`: the data model (`Message`, `Rollout`, `TreeNode`, ...); `errors`: the error tree.
- `aio`: the sync face of async code (works inside a running loop); `defaults`, `limits`.
- `protocol`: what an environment provides, and the environment's half of a turn.
- `samples`: an episode's model calls as training samples, by one rule (exports and trainers).
- `options`: `evaluate`'s options and the shard of a run.
- `summary` and `stats`: the numbers a run is judged by, and their intervals.
- `storage` and `run_dirs`: the run folder (`results.jsonl`, `metadata.json`), crash-safe.
- `display`: the page style, escaping, the score formatter, the notebook view registry.
- `text`, `content`, `child`, `hf_import`: small shared helpers.

Imports nothing else of the project (an import-linter contract says so).
"""
