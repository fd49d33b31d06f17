# SPDX-License-Identifier: MIT
"""UUIDv7 ids for what the client makes (event, message, session and
memory ids), so that a retried write is recognised by memd."""

from __future__ import annotations

import os
import time
import uuid

_MS_BITS = 48  # the Unix time in milliseconds that leads a UUIDv7
_RAND_A_BITS = 12  # random bits after the version nibble
_RAND_B_BITS = 62  # random bits after the variant


def uuid7() -> str:
    """A new UUIDv7 (RFC 9562) as its 36-character string: the time in
    milliseconds first (so ids sort roughly by creation), then 74 random
    bits from os.urandom."""
    ms = time.time_ns() // 1_000_000
    rnd = int.from_bytes(os.urandom(10), "big")
    rand_a = rnd >> (80 - _RAND_A_BITS)
    rand_b = rnd & ((1 << _RAND_B_BITS) - 1)
    value = (
        (ms & ((1 << _MS_BITS) - 1)) << 80
        | 0x7 << 76
        | rand_a << 64
        | 0b10 << 62
        | rand_b
    )
    return str(uuid.UUID(int=value))
