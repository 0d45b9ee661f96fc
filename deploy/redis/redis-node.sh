#!/bin/sh
# One Redis of niclab's Sentinel set (deploy/compose.sentinel.yaml, deploy/k8s/redis-sentinel.yaml).
# At every start it asks the sentinels which node is the master now and follows it; only when
# no sentinel answers (the set's first start) does it take the role the deployment gave it:
# the master when REDIS_FIRST_MASTER is this node, its replica otherwise. So a master that died
# and comes back after a failover rejoins at once as the new master's replica: left to the
# sentinels, it would stay a master with no clients for 8-20 s before they demoted it, and
# with one replica and NICLAB_REDIS_WAIT_REPLICAS=1 the API refuses writes until a replica is back.
#
# Environment: REDIS_ANNOUNCE_HOST and REDIS_ANNOUNCE_PORT (how the others reach this node;
# the port is REDIS_PORT unless something stands between), REDIS_PORT (6379),
# REDIS_BIND (the addresses it listens on), REDIS_DATA (/data), REDIS_PASSWORD (optional:
# requirepass and masterauth), REDIS_FIRST_MASTER (host:port), SENTINELS ("host:port ..."),
# SENTINEL_MASTER (the name the sentinels monitor it by).
set -euf # no globbing: REDIS_BIND holds "*"
. "$(dirname "$0")/common.sh"
: "${REDIS_PORT:=6379}" "${REDIS_BIND:=* -::*}" "${REDIS_DATA:=/data}" "${REDIS_ANNOUNCE_PORT:=$REDIS_PORT}"
: "${REDIS_ANNOUNCE_HOST:?how the other nodes reach this one}" "${REDIS_FIRST_MASTER:?host:port of the master on the first start}"
: "${SENTINELS:?the sentinels, host:port ...}" "${SENTINEL_MASTER:?the master name the sentinels monitor}"

master=$(current_master)
if [ -z "$master" ]; then master="${REDIS_FIRST_MASTER%:*} ${REDIS_FIRST_MASTER##*:}"; fi

# AOF written before every reply, fsynced every second; never evict a queued job. One replica
# needs no wait for others before a full sync (the default waits 5 s, all of it refused writes).
set -- --port "$REDIS_PORT" --bind $REDIS_BIND --dir "$REDIS_DATA" \
  --appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
  --repl-diskless-sync-delay 0 --replica-announce-ip "$REDIS_ANNOUNCE_HOST" --replica-announce-port "$REDIS_ANNOUNCE_PORT"
if [ -n "${REDIS_PASSWORD:-}" ]; then set -- "$@" --requirepass "$REDIS_PASSWORD" --masterauth "$REDIS_PASSWORD"; fi
role="the master"
if [ "$master" != "$REDIS_ANNOUNCE_HOST $REDIS_ANNOUNCE_PORT" ]; then
  set -- "$@" --replicaof $master
  role="a replica of ${master% *}:${master#* }"
fi
echo "redis-node: $REDIS_ANNOUNCE_HOST:$REDIS_ANNOUNCE_PORT starts as $role" >&2
exec "$SERVER" "$@"
