#!/usr/bin/env bash
# Stop a cluster started by scripts/cluster-up.sh: SIGTERM to each node's pid (from its pidfile), wait,
# SIGKILL what is left, then delete DIR (keep it with --keep).
# Usage: bash scripts/cluster-down.sh DIR [--keep]
set -euo pipefail
DIR=${1:?usage: cluster-down.sh DIR [--keep]}
[ -d "$DIR" ] || { echo "no such directory: $DIR" >&2; exit 2; }
PIDS=()
for f in "$DIR"/*/redis.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  # only a redis-server started in this directory
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q redis-server "/proc/$pid/cmdline" 2>/dev/null; then
    kill -TERM "$pid" && PIDS+=("$pid")
  fi
done
for pid in "${PIDS[@]}"; do
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" || true
done
echo "stopped ${#PIDS[@]} redis-server nodes"
if [ "${2:-}" != "--keep" ]; then
  rm -rf "$DIR"
fi
