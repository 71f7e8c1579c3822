#!/usr/bin/env bash
# dedupd end to end on the embedded default: install into .venv (first run only), start `dedupd serve` (which
# starts an embedded Redis), push the sample corpus (scripts/sample.jsonl: news reprints and support tickets
# with known near-duplicates), print the alerts, stop the daemon, and print three commands to try next.
#
# The data lives in data/quickstart under the repository (or DEDUPD_DATA_DIR when set): kept after the run, so
# that the commands printed at the end see it, and cleared at the start of each run, so that a second run shows
# the same alerts, not twice as many. A DEDUPD_DATA_DIR that holds data the quickstart did not make is refused,
# never cleared. Nothing is left in the temporary directory. Uses the active virtualenv when dedupd is installed
# in it, else the repository's .venv. Nothing to install by hand.
#
# Usage: bash scripts/quickstart.sh [FILE.jsonl]
set -euo pipefail
CALLER_DIR=$PWD
CALLER_REDIS_URL=${DEDUPD_REDIS_URL:-}
cd "$(dirname "$0")/.."
ROOT=$PWD
MARKER=.dedupd-quickstart # in a data directory: the quickstart made it, and may clear it

SAMPLE=${1:-scripts/sample.jsonl}
case $SAMPLE in /*) ;; *) [ $# -ge 1 ] && SAMPLE=$CALLER_DIR/$SAMPLE ;; esac
[ -f "$SAMPLE" ] || { echo "quickstart: no such file: $SAMPLE (give a JSONL file of documents, or nothing for the sample)" >&2; exit 2; }

# ---- dedupd: the active virtualenv's, else the repository's .venv (made on the first run) ----
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/dedupd" ]; then
  VENV=$VIRTUAL_ENV
else
  VENV=$ROOT/.venv
  if [ ! -x "$VENV/bin/dedupd" ]; then
    PY=${PYTHON:-python3}
    "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || {
      echo "quickstart: dedupd needs Python >= 3.11 ($PY is $("$PY" -V 2>&1 || echo missing)): set PYTHON=/path/to/python3.11 or newer" >&2
      exit 2
    }
    echo "== installing dedupd into .venv (first run only, about 30 s)..."
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    "$VENV/bin/python" -m pip install -q -e . 2>&1 | grep -v -E '^(WARNING: Location|  )' || true
    [ -x "$VENV/bin/dedupd" ] || { echo "quickstart: installing dedupd into $VENV failed (pip's messages above say why)" >&2; exit 1; }
  fi
fi
DEDUPD=$VENV/bin/dedupd

# ---- the data directory: the quickstart's own, cleared for a fresh start ----
DATA=${DEDUPD_DATA_DIR:-$ROOT/data/quickstart}
case $DATA in /*) ;; *) DATA=$CALLER_DIR/$DATA ;; esac
if [ -e "$DATA" ] && { [ ! -d "$DATA" ] || { [ -n "$(ls -A "$DATA")" ] && [ ! -e "$DATA/$MARKER" ]; }; }; then
  echo "quickstart: $DATA holds data the quickstart did not make, and it clears its directory at each run: set DEDUPD_DATA_DIR to a new or empty directory (or unset it to use data/quickstart)" >&2
  exit 2
fi
# A server still running on it (a command started from the last run's next steps, or the last run's own server
# stopping) is waited for; one that stays is in use by another dedupd process.
if ! "$VENV/bin/python" - "$DATA" <<'EOF'; then
import fcntl, os, sys, time
supervisor = os.path.join(sys.argv[1], "supervisor.pid")  # flock-ed while the embedded server runs


def running() -> bool:
    try:
        fd = os.open(supervisor, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


start = time.monotonic()
said = False
while running():
    if time.monotonic() > start + 2 and not said:
        print(f"== waiting for the embedded Redis running on {sys.argv[1]} to stop (15 s at most)", flush=True)
        said = True
    if time.monotonic() > start + 15:
        sys.exit(1)
    time.sleep(0.2)
EOF
  echo "quickstart: another dedupd process still uses $DATA (a \`dedupd serve\` or \`dedupd alerts --follow\` with DEDUPD_DATA_DIR set to it?): stop it, then run the quickstart again" >&2
  exit 1
fi
rm -rf "$DATA"
mkdir -p "$DATA"
touch "$DATA/$MARKER"

export DEDUPD_DATA_DIR=$DATA
export DEDUPD_REDIS_URL= # empty: the embedded Redis, whatever a dedupd.toml says
export DEDUPD_LOG_LEVEL=WARNING

echo "== starting dedupd serve, with an embedded Redis whose data is in $DATA"
"$DEDUPD" serve --metrics-port 0 &
SERVE=$!
trap 'kill -TERM $SERVE 2>/dev/null || true; wait $SERVE 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  "$DEDUPD" check >/dev/null 2>&1 && break
  kill -0 $SERVE 2>/dev/null || { echo "quickstart: dedupd serve exited (its messages above say why)" >&2; exit 1; }
  sleep 0.2
done
"$DEDUPD" check >/dev/null || { echo "quickstart: dedupd serve did not start within 60 s" >&2; exit 1; }

echo "== pushing $SAMPLE"
"$DEDUPD" push "$SAMPLE" --wait --timeout 120
echo "== alerts"
"$DEDUPD" alerts
kill -TERM $SERVE
wait $SERVE
trap - EXIT
echo "== daemon stopped cleanly; the data stays in $DATA until the next run"

# ---- next steps, as they can be pasted: paths relative to where the quickstart was started from, if inside ----
shown() {
  case $1 in "$CALLER_DIR"/*) printf '%q' "${1#"$CALLER_DIR"/}" ;; *) printf '%q' "$1" ;; esac
}
if [ "$(command -v dedupd 2>/dev/null || true)" = "$DEDUPD" ]; then CMD=dedupd; else CMD=$(shown "$DEDUPD"); fi
ENV="DEDUPD_DATA_DIR=$(shown "$DATA")"
[ -z "${CALLER_REDIS_URL:-}" ] || ENV="DEDUPD_REDIS_URL= $ENV"
QUERY='A new smartphone chip promises twice the battery life of its predecessor while running machine learning models directly on the device. The manufacturer said the first phones using the chip would ship before the end of the year, with prices close to current flagship models.'
echo "== next, try (paste any of these lines into a shell):"
echo "  $ENV $CMD alerts   # the alerts again: the data stays until the next run"
echo "  echo '$QUERY' | $ENV $CMD query -   # is a text a near-duplicate of an indexed one? inserts nothing"
echo "  $ENV $CMD stats   # documents indexed, Redis memory per document, the stream's lag"
