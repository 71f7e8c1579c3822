"""``--wait`` of the commands that push entries (``push``, ``delete``) and ``push --max-lag``'s pauses: waiting
for the daemons, and saying so. No wait is silent: when no daemon heartbeats (nothing would ever end the wait)
that is said at once; a wait longer than about a second says what it waits for, then how much is left now and
then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from dedupd.cli.common import F, plural
from dedupd.index.keys import Keys

SAY_AFTER_S = 1.0  # a wait longer than this says what it waits for
PROGRESS_EVERY_S = 10.0  # then how often --wait says how much is left
LOOK_EVERY_S = 1.0  # how often the heartbeats are read while waiting
POLL_S = 0.2  # how often the group's state is read while waiting

Say = Callable[[str], None]


def wait_options(func: F) -> F:
    """``--wait/--no-wait`` and ``--timeout``."""
    func = click.option(
        "--timeout", type=float, default=600.0, show_default=True, help="Seconds --wait waits at most."
    )(func)
    return click.option(
        "--wait/--no-wait",
        default=False,
        help="Wait until the daemons have processed everything (saying so at once if none runs).",
    )(func)


def say_on_stderr(message: str) -> None:
    """One line on standard error (the default way a wait speaks)."""
    click.echo(message, err=True)


def no_daemon(keys: Keys) -> str:
    """The reason a wait may never end."""
    return f"no daemon is heartbeating, so nothing processes {keys.docs}: start one with `dedupd serve`"


def _left(client: Any, keys: Keys) -> int | None:
    """Entries not yet processed: the group's lag plus its pending entries (the whole stream before any
    daemon made the group); None when Redis cannot tell the lag."""
    from dedupd.daemon.monitor import group_state

    state = group_state(client, keys)
    if state is None:
        return int(client.xlen(keys.docs) or 0)
    if state["lag"] is None:
        return None
    return int(state["lag"]) + int(state["pending"])


class _Heartbeats:
    """Whether a daemon heartbeats, read at most once per :data:`LOOK_EVERY_S`; says when none does (once,
    and again after one came and went) and when one appears after that."""

    def __init__(self, client: Any, keys: Keys, say: Say, waiting: str) -> None:
        self.client, self.keys, self.say, self.waiting = client, keys, say, waiting
        self.next_look = 0.0
        self.alone = False  # said that none heartbeats, and none has since
        self.live = 0

    def look(self) -> None:
        from dedupd.daemon.monitor import live_consumers

        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + LOOK_EVERY_S
        live = live_consumers(self.client, self.keys)
        self.live = len(live)
        if not live and not self.alone:
            self.say(f"{no_daemon(self.keys)}; {self.waiting}")
            self.alone = True
        elif live and self.alone:
            self.say(f"{plural(len(live), 'daemon')} heartbeating now ({', '.join(sorted(live))})")
            self.alone = False


def wait_for_daemons(client: Any, keys: Keys, timeout: float, say: Say = say_on_stderr) -> None:
    """``--wait``: until the consumer group has read and acknowledged every entry of the input stream. Says
    at once when no daemon heartbeats, after a second how much is left, then every :data:`PROGRESS_EVERY_S`.

    Raises:
        click.ClickException: (exit status 1) when ``timeout`` seconds pass first, saying why.
    """
    started = time.monotonic()
    deadline = started + timeout
    beats = _Heartbeats(client, keys, say, f"waiting up to {timeout:.0f}s for one (--timeout)")
    next_progress = started + SAY_AFTER_S
    while True:
        left = _left(client, keys)
        if left == 0:
            return
        beats.look()
        now = time.monotonic()
        if now >= deadline:
            break
        if now >= next_progress:
            still = "some entries" if left is None else plural(left, "entry", "entries")
            say(
                f"waiting for the daemons: {still} of {keys.docs} still to process "
                f"({now - started:.0f}s of at most {timeout:.0f}s)"
            )
            next_progress = now + PROGRESS_EVERY_S
        time.sleep(min(POLL_S, max(0.0, deadline - now)))
    why = no_daemon(keys) if beats.live == 0 else "start more daemons or give a longer --timeout"
    # a failure while working (the entries were pushed and wait in the stream): exit status 1
    raise click.ClickException(
        f"the daemons did not process every entry of {keys.docs} within {timeout:.0f}s: {why}"
    )


class Backpressure:
    """``push --max-lag``: pause while more than ``max_lag`` entries wait for the daemons. A pause longer
    than :data:`SAY_AFTER_S` says why (once per push), and that no daemon heartbeats when none does."""

    def __init__(self, client: Any, keys: Keys, max_lag: int, say: Say = say_on_stderr) -> None:
        self.client, self.keys, self.max_lag, self.say = client, keys, max_lag, say
        self.said = False
        self.beats = _Heartbeats(
            client, keys, say, f"the push waits until fewer than {max_lag:,} entries wait"
        )

    def wait_for_room(self) -> None:
        """Sleep while the consumer group has more than ``max_lag`` unread entries (no group yet: the
        stream's length)."""
        from dedupd.daemon.monitor import group_state

        started, delay = time.monotonic(), 0.01
        while True:
            state = group_state(self.client, self.keys)
            backlog = self.client.xlen(self.keys.docs) if state is None else state["lag"]
            if backlog is None or backlog <= self.max_lag:  # None: Redis cannot tell (entries were deleted)
                return
            if time.monotonic() - started >= SAY_AFTER_S:
                if not self.said:
                    self.said = True
                    self.say(
                        f"pausing: {plural(backlog, 'entry', 'entries')} wait for the daemons, more than "
                        f"--max-lag {self.max_lag:,}; the push goes on as they catch up"
                    )
                self.beats.look()
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
