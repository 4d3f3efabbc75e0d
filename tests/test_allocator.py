"""The allocator settings of the analysis jobs: applied through glibc's mallopt, and no number changes."""

import subprocess
import sys

import numpy as np

from oversmooth.core.allocator import KEEP_FREED_MEMORY, M_MMAP_MAX, M_MMAP_THRESHOLD, keep_freed_memory


def test_glibc_takes_every_setting_and_caps_the_mmap_threshold_at_its_maximum():
    assert keep_freed_memory()  # this machine's C library is glibc: mallopt accepted each value
    assert KEEP_FREED_MEMORY[M_MMAP_THRESHOLD] <= 32 << 20  # glibc refuses a larger threshold on 64-bit
    assert all(0 <= value < 2**31 for value in KEEP_FREED_MEMORY.values())  # mallopt takes a C int
    assert KEEP_FREED_MEMORY[M_MMAP_MAX] == 0  # blocks above the threshold come from the heap too


def test_a_computation_gives_the_same_bytes_with_and_without_the_settings():
    program = ("import sys, numpy as np\nfrom oversmooth.core.allocator import keep_freed_memory\n"
               "if sys.argv[1] == 'keep': keep_freed_memory()\n"
               "rng = np.random.default_rng(0)\n"
               "out = sum(np.log1p(rng.random((512, 49152))).sum(axis=1) for _ in range(8))\n"
               "sys.stdout.buffer.write(out.tobytes())\n")
    runs = [subprocess.run([sys.executable, "-c", program, mode], capture_output=True, check=True).stdout
            for mode in ("keep", "default")]
    assert runs[0] == runs[1] and np.frombuffer(runs[0]).size == 512


def test_a_block_above_the_largest_mmap_threshold_is_reused_not_faulted_in_again():
    """Ten 64 MiB arrays, one after the other: by default each is mmapped and its pages fault in anew; with the
    settings the first one's pages are kept in the heap and the nine others reuse them (counted in page faults,
    whatever the page size: 4 KiB, or 2 MiB where the kernel backs the mapping with transparent huge pages)."""
    program = ("import resource, sys, numpy as np\nfrom oversmooth.core.allocator import keep_freed_memory\n"
               "if sys.argv[1] == 'keep': keep_freed_memory()\n"
               "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
               "for _ in range(10): np.ones(8 << 20).sum()\n"
               "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n")
    faults = {mode: int(subprocess.run([sys.executable, "-c", program, mode], capture_output=True, text=True,
                                       check=True).stdout) for mode in ("keep", "default")}
    assert faults["keep"] * 4 < faults["default"], faults  # measured here: 495 and 5,441
