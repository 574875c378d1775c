"""Shared helpers for the tests, one module per concern (their own sanity tests: tests/test_helpers.py).

- `fakes`: small environments implementing the harness protocol, with the policies that play them.
- `endpoints`: a free loopback port, a broken HTTP server, the scripted endpoint with a Client.
- `processes`: the real `rubric` executable, servers in subprocesses, leftover processes, `Reaped`.
- `hub`: a real package index (pypiserver) on 127.0.0.1.
- `docs`: README.md and docs/ read lazily, code blocks by their content.
- `training`: a tiny chat model and a GRPO configuration for the TRL and verl tests.
- `install`: this project's wheel, and OpenEnv 0.10 in a cached venv of its own.
- `markers`: the real parts each test uses, as markers (applied by tests/conftest.py).
"""
