# lib-serve.sh: sourced by the server tests (test-serve.sh, test-embeddings.sh).
# serve_start ARGS...: `$cli serve --port 0 -t 2 ARGS...` in the background,
# its stderr in $dir/server.err; waits for /health and sets pid and port
# (fail, the caller's, when it does not come up).
serve_start() {
  "$cli" serve --port 0 -t 2 "$@" 2>"$dir/server.err" &
  pid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/server.err")
    [ -n "$port" ] && curl -sf "127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  [ -n "$port" ] || fail "the server did not start: $(cat "$dir/server.err")"
}
