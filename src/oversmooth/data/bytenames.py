"""The 256 bytes: their counts in texts, and their printable names (thesis appendix A): control bytes by their ASCII names,
printable ASCII as itself (space as SP), bytes >= 0x80 in hex with an x prefix (x8A; the thesis
wrote 8A, which makes byte 0xFF read like the control byte FF)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

VOCAB_SIZE = 256  # a byte-level model's outputs: every byte

CONTROL_NAMES = (
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR", "SO", "SI",
    "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US",
)


def byte_name(b: int) -> str:
    if not 0 <= b <= 255:
        raise ValueError(f"not a byte: {b}")
    if b < 32:
        return CONTROL_NAMES[b]
    if b == 32:
        return "SP"
    if b == 127:
        return "DEL"
    if b < 127:
        return chr(b)
    return f"x{b:02X}"


def byte_histogram(texts: Sequence[bytes]) -> np.ndarray:
    """How often each byte occurs in `texts` (float64, 256 entries)."""
    return np.bincount(np.frombuffer(b"".join(texts), dtype=np.uint8), minlength=256).astype(np.float64)
