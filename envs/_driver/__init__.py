"""The run driver under `rubric eval` and `rubric replay`: a run request checked, prepared and
played (`runs`: resume, the recorded agent and arguments confirmed), and a run replayed
against its recorded model calls (`replay`). cli.py calls it; a Python user calls
`envs.Environment.evaluate` or `harness.evaluate`."""
