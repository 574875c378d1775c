"""LLM judges: a rubric node that asks a model for a verdict.

- `llm`: `LLMJudge`, the node (sampling, caching, errors as NaN with the reason).
- `config`: its settings, checked at construction (`JudgeConfig`).
- `prompt`: the jinja2 template over a rollout's fields, and which fields it needs.
- `verdicts`: reading a verdict from a reply (number, choice map, JSON) and rescaling it.
- `cache`: `JudgeCache`, one answer per identical question (`JudgeCache.shared` unless a judge has its own).
- `presets`: ready-made judges (`rubrics.judges`: correctness, weighted criteria).
- `calibration`: a judge measured against human labels (`calibrate`), read by `labels`,
  figured by `agreement` (kappa, rho, confusion), probed by `probes`, drawn by `calibration_view`.

May import `rubrics._module` / `scoring` / `parsers` and the harness core and client; nothing
else in `rubrics` imports it (it is loaded on first use of `LLMJudge` or `judges`).
"""
