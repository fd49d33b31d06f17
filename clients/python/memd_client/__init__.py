# SPDX-License-Identifier: MIT
"""memd_client: a client of memd's REST API (memory for AI agents), in
the standard library only.

    from memd_client import Client, MemdError
    memd = Client("http://127.0.0.1:8700")
    memd.create_session("demo", "alice", {"id": "s1"})
"""

from ._ids import uuid7
from ._transport import RETRY_AFTER_MAX, __version__
from .client import Artifact, Client
from .errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    MemdError,
    NetworkError,
    NotFound,
    NotSupported,
    Timeout,
    TooLarge,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "Artifact",
    "Client",
    "Conflict",
    "Forbidden",
    "InvalidRequest",
    "MemdError",
    "NetworkError",
    "NotFound",
    "NotSupported",
    "RETRY_AFTER_MAX",
    "Timeout",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "__version__",
    "uuid7",
]
