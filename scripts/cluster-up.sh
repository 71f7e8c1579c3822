#!/usr/bin/env bash
# A local Redis Cluster for dedupd: 6 redis-server nodes on loopback (3 primaries, 3 replicas), AOF on,
# cluster-node-timeout small so that a killed primary's replica is promoted within seconds.
#
# Usage: bash scripts/cluster-up.sh [BASE_PORT] [DIR]
#   BASE_PORT  first of 6 consecutive ports (default: the first free run of 6 from 20000 on, chosen so that
#              the cluster bus ports, port + 10000, stay below the kernel's ephemeral range: an outgoing
#              connection may hold a port in that range, and a node that cannot bind its bus port aborts)
#   DIR        node directories (default: a new temporary directory); DIR/<port>/ holds each node's
#              nodes.conf, appendonly files, log and pidfile
#   env CLUSTER_NODE_TIMEOUT (ms, default 2000), REDIS_SERVER, REDIS_CLI
# Prints the settings to use, last line:  DEDUPD_REDIS_URL=redis://127.0.0.1:PORT DEDUPD_REDIS_CLUSTER=1
# Stop with: bash scripts/cluster-down.sh DIR
set -euo pipefail
SERVER=${REDIS_SERVER:-redis-server}
CLI=${REDIS_CLI:-redis-cli}
TIMEOUT=${CLUSTER_NODE_TIMEOUT:-2000}
command -v "$SERVER" >/dev/null || { echo "redis-server not found" >&2; exit 2; }
command -v "$CLI" >/dev/null || { echo "redis-cli not found" >&2; exit 2; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
EPHEMERAL=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
GIVEN=${1:-}
BASE=${GIVEN:-20000}
find_base() {  # from $BASE on: 6 free ports whose bus ports are free too and below the ephemeral range
  while :; do
    [ $((BASE + 10005)) -lt "$EPHEMERAL" ] || [ -n "$GIVEN" ] || { echo "no 6 free ports found below $((EPHEMERAL - 10000))" >&2; exit 2; }
    ok=1
    for i in 0 1 2 3 4 5; do port_free $((BASE + i)) || { ok=0; break; }; done
    for i in 0 1 2 3 4 5; do port_free $((BASE + 10000 + i)) || { ok=0; break; }; done
    [ $ok = 1 ] && return
    [ -z "$GIVEN" ] || { echo "port $BASE..$((BASE + 5)) or its bus port is in use" >&2; exit 2; }
    BASE=$((BASE + 6))
  done
}
DIR=${2:-$(mktemp -d -t dedupd-cluster.XXXXXX)}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# start the 6 nodes; when one of them does not come up (a port taken meanwhile), stop them and try the next
# run of ports (only when BASE_PORT was not given)
for attempt in 1 2 3 4 5; do
  find_base
  PORTS=()
  for i in 0 1 2 3 4 5; do PORTS+=($((BASE + i))); done
  for p in "${PORTS[@]}"; do
    rm -rf "${DIR:?}/$p"
    mkdir -p "$DIR/$p"
    # DIR/<port>/start.sh starts the node again after a crash (it rejoins from its nodes.conf and AOF)
    printf '%q ' "$SERVER" --port "$p" --bind 127.0.0.1 --daemonize yes --dir "$DIR/$p" \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$TIMEOUT" \
      --appendonly yes --appendfsync everysec --save '' \
      --pidfile "$DIR/$p/redis.pid" --logfile "$DIR/$p/redis.log" >"$DIR/$p/start.sh"
    echo >>"$DIR/$p/start.sh"
    bash "$DIR/$p/start.sh"
  done
  up=0
  for p in "${PORTS[@]}"; do
    for _ in $(seq 1 200); do
      "$CLI" -p "$p" ping >/dev/null 2>&1 && { up=$((up + 1)); break; }
      sleep 0.05
    done
  done
  [ $up = 6 ] && break
  echo "only $up of 6 nodes on ports $BASE..$((BASE + 5)) came up:" >&2
  grep -h -i "aborting\|error" "$DIR"/*/redis.log >&2 || true
  for p in "${PORTS[@]}"; do
    [ -f "$DIR/$p/redis.pid" ] && kill "$(cat "$DIR/$p/redis.pid")" 2>/dev/null || true
  done
  sleep 0.5
  [ -z "$GIVEN" ] || exit 1
  [ $attempt -lt 5 ] || { echo "giving up after $attempt attempts" >&2; exit 1; }
  BASE=$((BASE + 6))
done
echo "$BASE" > "$DIR/base_port"
ADDRS=()
for p in "${PORTS[@]}"; do ADDRS+=("127.0.0.1:$p"); done
"$CLI" --cluster create "${ADDRS[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/create.log" 2>&1 || {
  cat "$DIR/create.log" >&2; exit 1; }

# every node must agree the cluster is ok (all 16384 slots served) before it is usable
for _ in $(seq 1 300); do
  ok=1
  for p in "${PORTS[@]}"; do
    "$CLI" -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || { ok=0; break; }
  done
  [ $ok = 1 ] && break
  sleep 0.1
done
[ $ok = 1 ] || { echo "cluster did not reach state ok; see $DIR/*/redis.log" >&2; exit 1; }
# and every replica must have finished its first sync
for _ in $(seq 1 300); do
  n=0
  for p in "${PORTS[@]}"; do
    "$CLI" -p "$p" info replication 2>/dev/null | grep -q 'master_link_status:up' && n=$((n + 1))
  done
  [ $n -ge 3 ] && break
  sleep 0.1
done

echo "redis cluster: 3 primaries + 3 replicas on 127.0.0.1:${PORTS[0]}-${PORTS[5]}, node dirs in $DIR"
echo "stop it with: bash $(dirname "$0")/cluster-down.sh $DIR"
echo "DEDUPD_REDIS_URL=redis://127.0.0.1:${PORTS[0]} DEDUPD_REDIS_CLUSTER=1"
