#!/usr/bin/env bash
# End-to-end runs of real coding harnesses against `promptcache serve`: installs
# @anthropic-ai/claude-code and @openai/codex from npm (large downloads: not part of
# CI), starts a server on a generated random-weight model (the small shape: a 27K-token
# harness prompt takes seconds, not minutes) with a Qwen chat template and --test-hooks,
# and runs `claude -p` and `codex exec` through a logging proxy
# (scripts/agents-e2e/proxy.mjs) that forces one tool call on the first request with
# tools. Prints per client: each request, its status, and prompt / cached tokens.
#
#   scripts/agents-e2e.sh [BUILD_DIR]     (default: build; needs build/promptcache, node, npm)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
pc=$build/promptcache
[[ -x $pc ]] || { echo "no $pc: build the promptcache target first" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

echo "== installing the harnesses (npm)"
npm install --silent --prefix "$work/npm" @anthropic-ai/claude-code @openai/codex >/dev/null
bin=$work/npm/node_modules/.bin

echo "== a generated model (random weights, GPT-2 byte-level vocabulary)"
"$pc" make-model -o "$work/model.gguf" --shape small --context-length 65536 --arch qwen2 --vocab "$root/../shared/vocab/ggml-vocab-gpt-2.gguf" >/dev/null 2>&1
template=$root/../shared/templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja

port_of() { sed -n 's/.*listening on .*:\([0-9][0-9]*\).*/\1/p;s/^proxy on \([0-9]*\)$/\1/p' "$1" | head -1; }
wait_port() { for _ in $(seq 1 100); do p=$(port_of "$1"); [[ -n $p ]] && { echo "$p"; return; }; sleep 0.2; done; echo "no port in $1" >&2; exit 1; }

"$pc" serve -m "$work/model.gguf" --port 0 --chat-template-file "$template" --test-hooks --any-model \
  -c 65536 --log-level info >"$work/serve.log" 2>&1 &
sport=$(wait_port "$work/serve.log")
echo "server on $sport"

run_client() {  # NAME FORCED_CALL COMMAND...
  local name=$1 forced=$2; shift 2
  UPSTREAM=http://127.0.0.1:$sport FORCED_CALL=$forced node "$root/scripts/agents-e2e/proxy.mjs" >"$work/$name.proxy" 2>&1 &
  local ppid=$!
  PROXY=$(wait_port "$work/$name.proxy")
  echo "== $name"
  ( export PROXY; timeout 300 "$@" ) >"$work/$name.out" 2>&1 || echo "($name exited with $?)"
  kill $ppid 2>/dev/null || true
  grep '^#' "$work/$name.proxy" || echo "(no requests)"
  echo "-- $name output (last lines)"; tail -5 "$work/$name.out"
}

run_client claude '<tool_call>\n{"name": "Bash", "arguments": {"command": "echo hello from the tool"}}\n</tool_call>' \
  bash -c 'cd "$0" && ANTHROPIC_BASE_URL=http://127.0.0.1:$PROXY ANTHROPIC_API_KEY=unused \
           DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 "$1/claude" -p "Say hello using the Bash tool" \
           --allowedTools Bash --model claude-sonnet-4-5' "$work" "$bin"
run_client codex '<tool_call>\n{"name": "shell", "arguments": {"command": ["echo", "hello"]}}\n</tool_call>' \
  bash -c 'cd "$0" && mkdir -p codex-home && CODEX_HOME=$0/codex-home OPENAI_API_KEY=unused \
           "$1/codex" exec --skip-git-repo-check -c model_provider=pc \
           -c "model_providers.pc={name=\"pc\",base_url=\"http://127.0.0.1:$PROXY/v1\",wire_api=\"responses\"}" \
           -m test "Say hello using the shell"' "$work" "$bin"
