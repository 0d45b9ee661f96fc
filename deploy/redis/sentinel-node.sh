#!/bin/sh
# One sentinel of niclab's Sentinel set (deploy/compose.sentinel.yaml, deploy/k8s/redis-sentinel.yaml).
# A sentinel rewrites its own configuration file as the set changes (the master it follows,
# the replicas and sentinels it knows), so the file lives in SENTINEL_DATA and is written here
# only when it is missing: then the master is the one the other sentinels name now, or
# REDIS_FIRST_MASTER on the set's first start.
#
# Environment: SENTINEL_ANNOUNCE_HOST (how the others reach this sentinel), SENTINEL_PORT
# (26379), SENTINEL_BIND, SENTINEL_DATA (/data), SENTINELS ("host:port ...", the others may be
# listed too), SENTINEL_MASTER, REDIS_FIRST_MASTER (host:port), SENTINEL_QUORUM (2),
# SENTINEL_DOWN_AFTER_MS (5000), SENTINEL_FAILOVER_TIMEOUT_MS (60000), REDIS_PASSWORD (optional).
set -euf
. "$(dirname "$0")/common.sh"
: "${SENTINEL_PORT:=26379}" "${SENTINEL_BIND:=* -::*}" "${SENTINEL_DATA:=/data}" "${SENTINEL_QUORUM:=2}"
: "${SENTINEL_DOWN_AFTER_MS:=5000}" "${SENTINEL_FAILOVER_TIMEOUT_MS:=60000}"
: "${SENTINEL_ANNOUNCE_HOST:?how the other sentinels and the clients reach this one}" "${REDIS_FIRST_MASTER:?host:port of the master on the first start}"
: "${SENTINELS:?the sentinels, host:port ...}" "${SENTINEL_MASTER:?the master name to monitor}"

conf="$SENTINEL_DATA/sentinel.conf"
if [ ! -s "$conf" ]; then
  master=$(current_master)
  if [ -z "$master" ]; then master="${REDIS_FIRST_MASTER%:*} ${REDIS_FIRST_MASTER##*:}"; fi
  {
    echo "port $SENTINEL_PORT"
    echo "bind $SENTINEL_BIND"
    # The sentinels listen beyond loopback without a password of their own (the README says what that means).
    echo "protected-mode no"
    echo "dir $SENTINEL_DATA"
    # Nodes by name, not address: a pod's address changes when it is made again.
    echo "sentinel resolve-hostnames yes"
    echo "sentinel announce-hostnames yes"
    echo "sentinel announce-ip $SENTINEL_ANNOUNCE_HOST"
    echo "sentinel announce-port $SENTINEL_PORT"
    echo "sentinel monitor $SENTINEL_MASTER $master $SENTINEL_QUORUM"
    echo "sentinel down-after-milliseconds $SENTINEL_MASTER $SENTINEL_DOWN_AFTER_MS"
    echo "sentinel failover-timeout $SENTINEL_MASTER $SENTINEL_FAILOVER_TIMEOUT_MS"
    echo "sentinel parallel-syncs $SENTINEL_MASTER 1"
    if [ -n "${REDIS_PASSWORD:-}" ]; then echo "sentinel auth-pass $SENTINEL_MASTER $REDIS_PASSWORD"; fi
  } >"$conf"
fi
exec "$SERVER" "$conf" --sentinel
