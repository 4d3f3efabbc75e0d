"""oversmooth: how the softmax bottleneck makes byte-level language models oversmooth."""

__version__ = "0.1.0"
