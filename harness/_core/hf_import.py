"""Import Hugging Face `datasets` without its progress library's notebook warning.

`datasets` imports `huggingface_hub`, which imports `tqdm.auto`. Inside a Jupyter kernel
without ipywidgets, that import prints "TqdmWarning: IProgress not found" to stderr: noise in
a user's first notebook about progress bars our code never shows (our progress display is
our own, `harness._views.progress`). Every place that imports `datasets` does it inside
`with hf_import():`, so whichever runs first keeps the import quiet. Only that one warning is
silenced, and only while importing.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def hf_import() -> Iterator[None]:
    """Silence tqdm's "IProgress not found" warning for the imports made in this block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        yield


__all__ = ["hf_import"]
