# Sourced by the scripts of deploy/redis: the server and its command line (Valkey's names where
# the image has them, a drop-in for Redis's), and which node the sentinels name as the master.
SERVER=$(command -v valkey-server || command -v redis-server)
CLI=$(command -v valkey-cli || command -v redis-cli)

# Prints "host port" from the first sentinel of $SENTINELS ("host:port host:port ...") that
# answers for $SENTINEL_MASTER within 2 s, or nothing when none does (the set's first start).
current_master() {
  for sentinel in $SENTINELS; do
    answer=$(timeout 2 "$CLI" -h "${sentinel%:*}" -p "${sentinel##*:}" --raw SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | tr '\n' ' ') || continue
    # shellcheck disable=SC2086 # split "host port" into two words
    set -- $answer
    if [ $# -eq 2 ] && [ "$2" -gt 0 ] 2>/dev/null; then
      echo "$1 $2"
      return 0
    fi
  done
}
