"""`dedupd serve` with an injected fault, for the poison-entry and crash tests (run as a script, not collected).

FAULT=crash: a batch holding a document whose id starts with ``poison`` kills the process (SIGKILL), as an
entry that crashes the interpreter or exhausts memory would. FAULT=raise: it raises instead.

FAULT=expiry-claimed, expiry-noted or expiry-deleted: the first expiry step that claims documents kills the
process (SIGKILL) before it notes their ids, before it deletes their records, or before it finishes the claim
(records deleted, ids and nodes not yet forgotten); a line on stderr says where, for the test to prove it.
Its idle expiry steps come every 0.05 s (0.5 s in dedupd), so that it meets documents to expire sooner.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from dedupd.daemon import expiry, loop, processor
from dedupd.index.gateway import RedisGateway

_real = processor.parse_entry
_fault = os.environ.get("FAULT", "")


def _faulty(entry_id: str, fields: dict[bytes, bytes], *args: Any) -> Any:
    """Validation is where an entry is first looked at (after the delivery count check)."""
    if fields.get(b"id", b"").startswith(b"poison"):
        if _fault == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("injected fault")
    return _real(entry_id, fields, *args)


def _die(stage: str, what: str) -> None:
    sys.stderr.write(f"FAULT: killed in an expiry step, {stage} ({what})\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _before(stage: str, real: Any, describe: Any) -> Any:
    def call(*args: Any, **kw: Any) -> Any:
        if _fault == f"expiry-{stage}":
            _die(stage, describe(*args, **kw))
        return real(*args, **kw)

    return call


processor.parse_entry = _faulty
if _fault.startswith(
    "expiry-"
):  # an idle daemon steps every 0.05 s instead of 0.5 s: it meets a claim sooner
    loop._EXPIRE_IDLE_S = 0.05
RedisGateway.note_expiry = _before(  # type: ignore[method-assign]
    "claimed", RedisGateway.note_expiry, lambda gw, deadline, notes: f"{len(notes)} documents claimed"
)
expiry.band_hashes = _before(  # the step's delete follows: the ids are noted
    "noted", expiry.band_hashes, lambda gw, fps: f"{len(fps)} records read and their ids noted"
)
RedisGateway.finish_expiry = _before(  # type: ignore[method-assign]
    "deleted", RedisGateway.finish_expiry, lambda gw, deadline, done: f"{len(done)} records deleted"
)

if __name__ == "__main__":
    from dedupd.cli import main

    sys.argv = ["dedupd", "serve", *sys.argv[1:]]
    main()
