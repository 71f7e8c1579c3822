#!/usr/bin/env bash
# dedupd end to end on the embedded default: install into .venv, start `dedupd serve` (which starts an
# embedded Redis), push the sample corpus (scripts/sample.jsonl: news reprints and support tickets
# with known near-duplicates), print the alerts, stop the daemon. Nothing to install by hand.
# Usage: bash scripts/quickstart.sh [FILE.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLE=${1:-scripts/sample.jsonl}

if [ ! -x .venv/bin/dedupd ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q -e . 2>&1 | grep -v -E '^(WARNING: Location|  )' || true
fi
DEDUPD=.venv/bin/dedupd

export DEDUPD_DATA_DIR=${DEDUPD_DATA_DIR:-$(mktemp -d -t dedupd-quickstart.XXXXXX)}
unset DEDUPD_REDIS_URL
echo "== embedded Redis data in $DEDUPD_DATA_DIR (each dedupd command prints its socket, for redis-cli -s)"

$DEDUPD serve --log-level WARNING &
SERVE=$!
trap 'kill -TERM $SERVE 2>/dev/null || true; wait $SERVE 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  $DEDUPD check >/dev/null 2>&1 && break
  kill -0 $SERVE 2>/dev/null || { echo "dedupd serve exited" >&2; exit 1; }
  sleep 0.2
done

echo "== pushing $SAMPLE"
$DEDUPD push "$SAMPLE" --wait --timeout 120
echo "== alerts"
$DEDUPD alerts
kill -TERM $SERVE
wait $SERVE
trap - EXIT
echo "== daemon stopped cleanly"
