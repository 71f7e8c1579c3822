"""`dedupd serve` with an injected fault, for the poison-entry tests (run as a script, not collected).

FAULT=crash: a batch holding a document whose id starts with ``poison`` kills the process (SIGKILL), as an
entry that crashes the interpreter or exhausts memory would. FAULT=raise: it raises instead.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from dedupd.daemon import processor

_real = processor.parse_entry


def _faulty(entry_id: str, fields: dict[bytes, bytes], *args: Any) -> Any:
    """Validation is where an entry is first looked at (after the delivery count check)."""
    if fields.get(b"id", b"").startswith(b"poison"):
        if os.environ.get("FAULT") == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("injected fault")
    return _real(entry_id, fields, *args)


processor.parse_entry = _faulty

if __name__ == "__main__":
    from dedupd.cli import main

    sys.argv = ["dedupd", "serve", *sys.argv[1:]]
    main()
