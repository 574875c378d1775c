"""What people look at: notebook HTML, the static report, the terminal, the progress bar.

- `html`: the one HTML renderer behind the notebook reprs and the report; importing it fills
  the foundation's `_repr_html_` hooks (`harness._core.display.register_html_view`); the
  `harness` package names it, so it loads on the first drawing.
- `report`: the self-contained report page of a run, or of two runs compared.
- `terminal`: rich renderings of rollouts and comparisons for `rubric view`.
- `progress` / `notebook`: the live progress of `evaluate`, in a terminal or a kernel.

May import the foundation and `harness._results` (the data they draw); nothing below
imports a view, so the data model works without them.
"""
