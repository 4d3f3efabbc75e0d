"""The memory allocator's settings every job of the workflow inherits (the Snakefile sets them in its environment).

glibc's malloc gives large freed blocks back to the kernel (blocks over its mmap threshold are unmapped, the heap's
free top is trimmed) and the next allocation of the same size faults fresh zeroed pages back in. The token track's
jobs allocate and free tensors of 49,152 columns at every step: a token-track metrics job spent 6.5 of its 34 CPU-s
in the kernel, and the learned heads' fits 40 % of theirs. Keeping freed memory in the process (no trimming, the
largest mmap threshold glibc allows) brought that metrics job to about 1 CPU-s of kernel time and 29 s of wall (from 34)
(docs/performance.md). Only where memory lives changes, never a number. A value already in the environment wins.
"""

from __future__ import annotations

from collections.abc import MutableMapping

KEEP_FREED_MEMORY = {
    "MALLOC_TRIM_THRESHOLD_": str(8 << 30),  # never give the heap's free top back (below 8 GiB)
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),  # blocks up to 32 MiB (glibc's maximum) come from the heap, reused
    "MALLOC_TOP_PAD_": str(64 << 20),  # grow the heap in steps of 64 MiB (address space; pages fault in when used)
}


def keep_freed_memory(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set `KEEP_FREED_MEMORY` in `environ` where it holds no value yet; return what was set."""
    added = {name: value for name, value in KEEP_FREED_MEMORY.items() if name not in environ}
    environ.update(added)
    return added
