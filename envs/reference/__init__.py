"""The reference environments: gsm8k, wordle and python.

`gsm8k` is single turn, `wordle` a multi-turn game and `python` tool use with a sandboxed
interpreter.

Each module is short on purpose, to be copied as a template for your own environment, and
ships two scripted policies (`env.scripted_policies["oracle"]` / `["noisy"]`) so the whole
stack can be exercised offline: `rubric eval gsm8k --model scripted:oracle`.
They are registered by name under the entry-point group `rubric.environments`
(pyproject.toml); their data files are found by `envs.reference._data`.
"""

from envs.reference._gsm8k import load_environment as load_gsm8k
from envs.reference._python_env import load_environment as load_python
from envs.reference._wordle import load_environment as load_wordle

__all__ = ["load_gsm8k", "load_python", "load_wordle"]
