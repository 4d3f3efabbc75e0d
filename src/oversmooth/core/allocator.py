"""Keep freed memory in the process: glibc's malloc settings for the jobs that allocate and free large arrays at
every step (the token track's metrics, heads and unargmaxable checks; the byte track's metrics; the quality jobs'
perplexity model).

glibc gives large freed blocks back to the kernel (blocks over its mmap threshold are unmapped, the heap's free top
is trimmed), and the next allocation of the same size faults fresh zeroed pages back in: a token-track metrics job
spent 6 of its 35 CPU-s in the kernel, a learned token head 16 of 37. `keep_freed_memory()` sets, in the running
process, what the environment variables MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, MALLOC_MMAP_MAX_ and
MALLOC_TOP_PAD_ would: no block is mmapped (above glibc's largest mmap threshold, 32 MiB, a threshold alone leaves
them mapped and unmapped step by step), none given back. The metrics job then spends 1 CPU-s there, the learned
head 2, with identical output (docs/performance.md). Only where memory lives changes, never a number. Set per job,
not in the workflow's environment: the same settings slowed gt-smollm2's logits (the tokenisation marginal) by 40 %.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -2, -3, -4  # glibc's mallopt parameters (malloc.h)
KEEP_FREED_MEMORY = {
    M_TRIM_THRESHOLD: 1 << 30,  # never give the heap's free top back below 1 GiB (an int: mallopt's limit is 2 GiB)
    M_MMAP_THRESHOLD: 32 << 20,  # blocks up to 32 MiB (glibc's maximum) come from the heap and are reused
    M_MMAP_MAX: 0,  # and so do larger ones: no block is mmapped
    M_TOP_PAD: 64 << 20,  # grow the heap in steps of 64 MiB (address space; pages fault in when first used)
}


def keep_freed_memory() -> bool:
    """Apply `KEEP_FREED_MEMORY` to this process's malloc; False (and a log line) where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        log.info("no glibc mallopt in %s: the allocator keeps its defaults", name)
        return False
    return all(mallopt(param, value) == 1 for param, value in KEEP_FREED_MEMORY.items())
