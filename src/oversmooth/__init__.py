"""oversmooth: how the softmax bottleneck makes byte-level language models oversmooth.

One sub-package per stage of the pipeline, each importing only from those below it (pyproject.toml's import-linter
contracts): `workflow` > `reporting` > `generation` > `analysis` > `extraction` > `models` > `data` > `core`.
"""

__version__ = "0.2.0"
