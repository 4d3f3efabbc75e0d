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


def with_and_without_the_settings(program: str) -> dict[str, bytes]:
    """The standard output of `program` in a fresh Python, run once with `keep_freed_memory()` applied first ("keep")
    and once without ("default")."""
    preamble = ("import sys, resource, numpy as np\nfrom oversmooth.core.allocator import keep_freed_memory\n"
                "if sys.argv[1] == 'keep': keep_freed_memory()\n")
    return {mode: subprocess.run([sys.executable, "-c", preamble + program, mode], capture_output=True,
                                 check=True).stdout for mode in ("keep", "default")}


def test_a_computation_gives_the_same_bytes_with_and_without_the_settings():
    runs = with_and_without_the_settings(
        "rng = np.random.default_rng(0)\n"
        "out = sum(np.log1p(rng.random((512, 49152))).sum(axis=1) for _ in range(8))\n"
        "sys.stdout.buffer.write(out.tobytes())\n")
    assert runs["keep"] == runs["default"] and np.frombuffer(runs["keep"]).size == 512


def test_a_block_above_the_largest_mmap_threshold_is_kept_and_reused_not_faulted_in_again():
    """Ten 64 MiB arrays, one after the other. By default each is mmapped, unmapped when freed (the resident set
    drops back) and the next one faults fresh pages in; with the settings the first one's pages stay in the heap and
    the nine others fault nothing. The first array is left out of the count: it faults in either way, in 4 KiB or in
    2 MiB pages as the kernel's transparent huge pages decide (a CI machine with them always on counted 331 faults
    for all ten by default, fewer than the settings' 495 for the first alone)."""
    outputs = with_and_without_the_settings(
        "def resident_mib():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize() >> 20\n"
        "def faults(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "first = np.ones(8 << 20); first.sum(); held = resident_mib(); del first; freed = resident_mib()\n"
        "before = faults()\n"
        "for _ in range(9): np.ones(8 << 20).sum()\n"
        "print(faults() - before, held - freed)\n")
    runs = {mode: [int(value) for value in output.split()] for mode, output in outputs.items()}
    (keep_faults, keep_given_back), (default_faults, default_given_back) = runs["keep"], runs["default"]
    assert default_given_back >= 60 and keep_given_back <= 4, runs  # MiB handed back to the kernel by `del`
    # nine fresh 64 MiB mappings fault at least 9 * 32 times even in 2 MiB pages; measured here: 0 and 4,896 (THP
    # always), 0 and 147,465 (THP never)
    assert keep_faults * 4 < default_faults, runs
