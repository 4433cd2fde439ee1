"""What the CPU computes natively, read from ``/proc/cpuinfo`` — the backends' speed depends on it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

INT8_DOT = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})  # int8 dot-product instructions
BF16 = frozenset({"avx512_bf16", "amx_bf16"})


@lru_cache(maxsize=1)
def flags() -> frozenset[str]:
    """This machine's CPU flags (empty where ``/proc/cpuinfo`` cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return frozenset(
        word
        for line in text.splitlines()
        if line.startswith("flags")
        for word in line.split(":", 1)[-1].split()
    )


def has(wanted: frozenset[str], cpu: frozenset[str] | None = None) -> bool:
    """Whether the CPU (``cpu``, default this machine's flags) has any of ``wanted``."""
    return bool(wanted & (flags() if cpu is None else cpu))
