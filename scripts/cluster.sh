#!/usr/bin/env bash
# A local promptcache cluster on loopback: one redis-server, N `promptcache serve`
# processes sharing it as their KV tier, and HAProxy in front (deploy/haproxy.cfg:
# session affinity by consistent hashing, /health checks). See docs/deploy.md.
#
#   scripts/cluster.sh up N      # start (N = 1..64)
#   scripts/cluster.sh status    # each member's health and cache figures
#   scripts/cluster.sh down      # stop exactly what `up` started (drains the servers)
#
# Environment (all optional):
#   MODEL          GGUF model (default: the model `promptcache demo` generates,
#                  ~/.cache/promptcache/smollm-135m-shape-q8_0.gguf, made if missing)
#   CLUSTER_PORT   the front door, 127.0.0.1:$CLUSTER_PORT (default 8080)
#   SERVER_PORT    first member's port; member i listens on SERVER_PORT+i-1
#                  (default CLUSTER_PORT+1)
#   REDIS_PORT     default CLUSTER_PORT+1000
#   THREADS        compute threads per server (default 1)
#   SERVE_ARGS     more `promptcache serve` flags, e.g. "--kv-memory 4GiB --parallel 8"
#   CLUSTER_DIR    state: pid files, logs, the rendered haproxy.cfg
#                  (default ${XDG_RUNTIME_DIR:-/tmp}/promptcache-cluster-$CLUSTER_PORT)
#   PROMPTCACHE    the binary (default build/promptcache)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

CLUSTER_PORT=${CLUSTER_PORT:-8080}
SERVER_PORT=${SERVER_PORT:-$((CLUSTER_PORT + 1))}
REDIS_PORT=${REDIS_PORT:-$((CLUSTER_PORT + 1000))}
THREADS=${THREADS:-1}
SERVE_ARGS=${SERVE_ARGS:-}
CLUSTER_DIR=${CLUSTER_DIR:-${XDG_RUNTIME_DIR:-/tmp}/promptcache-cluster-$CLUSTER_PORT}
PROMPTCACHE=${PROMPTCACHE:-$ROOT/build/promptcache}
TEMPLATE=$ROOT/deploy/haproxy.cfg

die() { echo "cluster: $*" >&2; exit 1; }
log() { echo "cluster: $*"; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
for v in CLUSTER_PORT SERVER_PORT REDIS_PORT THREADS; do
  is_uint "${!v}" || die "$v must be a number (got '${!v}')"
done

# The pid in a pid file if that process is alive and is still the program we started
# (its command line names it), so a recycled pid is never signalled.
live_pid() {  # FILE PROGRAM
  local f=$1 prog=$2 pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  is_uint "$pid" || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$prog" || return 1
  echo "$pid"
}

# Whether a process is running (a zombie, exited but not yet reaped, is not).
alive() {  # PID
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# GET URL; prints "HTTP_CODE BODY" (code 000 when nothing answered).
http_get() {
  curl -s -m 2 -w '\n%{http_code}' "$1" 2>/dev/null | { body=$(cat); echo "${body##*$'\n'} ${body%$'\n'*}"; } || true
}

need_curl() {
  command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"
}

ensure_haproxy() {
  command -v haproxy >/dev/null 2>&1 && return
  PATH=$PATH:/usr/sbin:/usr/local/sbin
  command -v haproxy >/dev/null 2>&1 && return
  log "HAProxy is not installed; installing the Debian package haproxy"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q haproxy >/dev/null ||
    die "could not install haproxy (scripts/setup.sh installs it)"
}

default_model() {
  local dir=${HOME:-/tmp}/.cache/promptcache
  local m=$dir/smollm-135m-shape-q8_0.gguf
  if [ ! -f "$m" ]; then
    log "generating the demo model (random smollm-135m-shape weights, Q8_0) at $m"
    mkdir -p "$dir"
    "$PROMPTCACHE" make-model --shape smollm-135m --type Q8_0 -o "$m" >/dev/null
  fi
  echo "$m"
}

# deploy/haproxy.cfg with the front door on CLUSTER_PORT and one server line per member.
render_haproxy() {  # N
  local n=$1
  awk -v port="$CLUSTER_PORT" -v base="$SERVER_PORT" -v n="$n" '
    /^[ \t]*# END SERVERS/ {
      for (i = 1; i <= n; i++) printf "    server pc%d 127.0.0.1:%d check\n", i, base + i - 1
      skip = 0
    }
    skip { next }
    /^[ \t]*# BEGIN SERVERS/ { print; skip = 1; next }
    !bound && /^[ \t]*bind / { printf "    bind 127.0.0.1:%d\n", port; bound = 1; next }
    { print }
  ' "$TEMPLATE"
}

wait_http_ok() {  # URL SECONDS WHAT LOG
  local url=$1 tries=$(( $2 * 10 )) what=$3 logf=$4
  for _ in $(seq "$tries"); do
    [ "$(http_get "$url" | cut -d' ' -f1)" = 200 ] && return 0
    sleep 0.1
  done
  echo "--- $logf" >&2
  tail -n 20 "$logf" >&2 || true
  die "$what did not become healthy at $url"
}

wait_redis() {  # SECONDS
  for _ in $(seq $(( $1 * 10 ))); do
    if { exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT"; } 2>/dev/null; then
      printf 'PING\r\n' >&3
      local reply=""
      read -r -t 1 reply <&3 || true
      exec 3>&-
      [[ $reply == +PONG* ]] && return 0
    fi
    sleep 0.1
  done
  die "redis-server did not answer on port $REDIS_PORT (log: $CLUSTER_DIR/redis.log)"
}

cmd_up() {
  local n=${1:-}
  is_uint "$n" && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "usage: cluster.sh up N (N = 1..64)"
  need_curl
  [ -x "$PROMPTCACHE" ] || die "$PROMPTCACHE not found: build it first (scripts/setup.sh) or set PROMPTCACHE"
  command -v redis-server >/dev/null 2>&1 || die "redis-server is not installed (scripts/setup.sh installs it)"
  ensure_haproxy
  [ -f "$TEMPLATE" ] || die "$TEMPLATE not found"
  mkdir -p "$CLUSTER_DIR"
  for f in "$CLUSTER_DIR"/*.pid; do
    [ -e "$f" ] || continue
    if live_pid "$f" "$(basename "$f" .pid | sed 's/^pc[0-9]*$/promptcache/; s/^redis$/redis-server/')" >/dev/null; then
      die "a cluster is already up in $CLUSTER_DIR (scripts/cluster.sh down first)"
    fi
    rm -f "$f"
  done
  local model=${MODEL:-}
  [ -n "$model" ] || model=$(default_model)
  [ -f "$model" ] || die "model '$model' not found (set MODEL to a GGUF file)"
  echo "$n" > "$CLUSTER_DIR/members"

  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$CLUSTER_DIR" > "$CLUSTER_DIR/redis.log" 2>&1 &
  echo $! > "$CLUSTER_DIR/redis.pid"
  wait_redis 5
  log "redis-server on 127.0.0.1:$REDIS_PORT"

  local i port
  for i in $(seq "$n"); do
    port=$((SERVER_PORT + i - 1))
    # Every client of a member is the balancer's one address: no per-address cap.
    # shellcheck disable=SC2086  # SERVE_ARGS is a list of flags
    "$PROMPTCACHE" serve -m "$model" --host 127.0.0.1 --port "$port" --threads "$THREADS" \
      --max-client-connections 0 --redis "redis://127.0.0.1:$REDIS_PORT/0" $SERVE_ARGS > "$CLUSTER_DIR/pc$i.log" 2>&1 &
    echo $! > "$CLUSTER_DIR/pc$i.pid"
  done
  for i in $(seq "$n"); do
    port=$((SERVER_PORT + i - 1))
    wait_http_ok "http://127.0.0.1:$port/health" 60 "server pc$i" "$CLUSTER_DIR/pc$i.log"
    log "pc$i on 127.0.0.1:$port"
  done

  render_haproxy "$n" > "$CLUSTER_DIR/haproxy.cfg"
  haproxy -c -q -f "$CLUSTER_DIR/haproxy.cfg" || die "the rendered $CLUSTER_DIR/haproxy.cfg is invalid"
  haproxy -db -f "$CLUSTER_DIR/haproxy.cfg" > "$CLUSTER_DIR/haproxy.log" 2>&1 &
  echo $! > "$CLUSTER_DIR/haproxy.pid"
  wait_http_ok "http://127.0.0.1:$CLUSTER_PORT/health" 10 "HAProxy" "$CLUSTER_DIR/haproxy.log"
  log "HAProxy on 127.0.0.1:$CLUSTER_PORT -> $n servers (state in $CLUSTER_DIR)"
}

stop_one() {  # NAME PROGRAM SECONDS
  local name=$1 prog=$2 secs=$3 pid
  local f=$CLUSTER_DIR/$name.pid
  if pid=$(live_pid "$f" "$prog"); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $(( secs * 10 ))); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      log "$name (pid $pid) still running after ${secs}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$f"
}

cmd_down() {
  [ -d "$CLUSTER_DIR" ] || { log "nothing to stop ($CLUSTER_DIR does not exist)"; return; }
  # The front door first (no new requests), then the servers (each drains: requests
  # in flight finish, tier writes are flushed), then Redis.
  stop_one haproxy haproxy 10
  local f
  for f in "$CLUSTER_DIR"/pc*.pid; do
    [ -e "$f" ] || continue
    stop_one "$(basename "$f" .pid)" promptcache 40 &
  done
  wait
  stop_one redis redis-server 10
  rm -f "$CLUSTER_DIR/members"
}

# "key=value" pairs from a JSON object, for the fields asked (python3 when present).
json_fields() {  # JSON FIELD...
  local j=$1
  shift
  if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except ValueError:
    print("(not JSON)"); sys.exit(0)
out = []
for path in sys.argv[2:]:
    v = d
    for k in path.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    if v is not None:
        out.append("%s=%s" % (path.split(".", 1)[-1], v))
print(" ".join(out))' "$j" "$@"
  else
    echo "$j"
  fi
}

cmd_status() {
  need_curl
  [ -f "$CLUSTER_DIR/members" ] || { log "no cluster is up in $CLUSTER_DIR"; return 1; }
  local n pid code body port i
  n=$(cat "$CLUSTER_DIR/members")
  if pid=$(live_pid "$CLUSTER_DIR/haproxy.pid" haproxy); then
    read -r code body <<< "$(http_get "http://127.0.0.1:$CLUSTER_PORT/health")"
    echo "haproxy  pid $pid  127.0.0.1:$CLUSTER_PORT  front door /health: $code"
  else
    echo "haproxy  DOWN"
  fi
  if pid=$(live_pid "$CLUSTER_DIR/redis.pid" redis-server); then
    echo "redis    pid $pid  127.0.0.1:$REDIS_PORT"
  else
    echo "redis    DOWN"
  fi
  for i in $(seq "$n"); do
    port=$((SERVER_PORT + i - 1))
    if ! pid=$(live_pid "$CLUSTER_DIR/pc$i.pid" promptcache); then
      echo "pc$i      DOWN  127.0.0.1:$port"
      continue
    fi
    read -r code body <<< "$(http_get "http://127.0.0.1:$port/health")"
    echo "pc$i      pid $pid  127.0.0.1:$port  health $code $(json_fields "$body" status running queued)"
    read -r code body <<< "$(http_get "http://127.0.0.1:$port/v1/cache/stats")"
    [ "$code" = 200 ] && echo "         cache: $(json_fields "$body" engine.requests engine.prompt_tokens \
      engine.cached_tokens engine.hit_rate memory.bytes.in_use index.entries tiers.promoted_tokens \
      tiers.redis.hits tiers.redis.connected)"
  done
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) die "usage: cluster.sh up N | down | status" ;;
esac
