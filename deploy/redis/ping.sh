#!/bin/sh
# The health check of a Redis or a sentinel of the set: PONG from the server on this host's
# port $1 (with REDIS_PASSWORD for a Redis, none for a sentinel: "ping.sh 26379 sentinel").
set -eu
. "$(dirname "$0")/common.sh"
if [ "${2:-}" = sentinel ] || [ -z "${REDIS_PASSWORD:-}" ]; then
  "$CLI" -p "$1" ping | grep -q PONG
else
  REDISCLI_AUTH="$REDIS_PASSWORD" "$CLI" -p "$1" ping | grep -q PONG
fi
