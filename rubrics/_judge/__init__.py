"""LLM judges: a rubric node that asks a model for a verdict.

- `llm`: `LLMJudge`, the node (sampling, caching, errors as NaN with the reason).
- `config`: its settings, checked at construction (`JudgeConfig`).
- `prompt`: the jinja2 template over a rollout's fields, and which fields it needs.
- `verdicts`: reading a verdict from a reply (number, choice map, JSON) and rescaling it.
- `cache`: `JudgeCache`, one answer per identical question (`JudgeCache.shared` unless a judge has its own).
- `rank`: `RankJudge` and `PairwiseJudge`, group nodes that compare a group's members.
- `labels`, `agreement`, `probes`, `calibration_result`: what `rubrics.calibration` builds on
  (human labels read, kappa/rho/confusion figured, probes, the view).
The ready-made judges are the public module `rubrics.judges`.

May import `rubrics._tree.module` / `_scoring` / `parsers` and the harness core and client; nothing
else in `rubrics` imports it but the front door and the public modules.
"""
