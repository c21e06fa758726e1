#!/bin/bash
# test-serve-slots.sh: llama-server's slot files on `faultline serve
# --slot-save-path DIR` (POST /slots/{id}?action=save|restore|erase).
#   - a completion leaves its prompt's whole -b chunks in slot 0's prompt
#     cache; save writes them (n_saved, n_written = the file's size); a new
#     server restores them (n_restored), and the same completion then reads
#     them (timings.cache_n) and answers byte for byte as the first server
#     did; erase drops them (n_erased) and the next completion computes all;
#     qwen3moe and qwen35moe (a recurrent state);
#   - errors as llama-server gives them: 501 without --slot-save-path, 400
#     for a slot out of range, a bad id, an unknown action, a file name
#     with a folder or "..", a missing file, a file of another model, a
#     slot with nothing to save; --slot-save-path that is no folder: exit 2.
# usage: test-serve-slots.sh FAULTLINE   (exit 77: no python3 or curl)
set -u
cli=$1
dir=$(mktemp -d /tmp/test-serve-slots.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/server.err" ] && tail -5 "$dir/server.err"; exit 1; }
command -v python3 >/dev/null && command -v curl >/dev/null || { echo "skipped"; exit 77; }
. tests/lib-serve.sh
mkdir "$dir/slots"
prompt=$(python3 -c "
import random
random.seed(5)
w = 'river engine market winter letter garden signal paper number station'.split()
print(' '.join(random.choice(w) for _ in range(300)))")
body=$(python3 -c "import json, sys; print(json.dumps({'prompt': sys.argv[1], 'n_predict': 12,
  'temperature': 0.7, 'seed': 3}))" "$prompt")

stop() { kill -TERM $pid; wait $pid 2>/dev/null; pid=; }
complete() { # NAME: /completion's content and cache_n in $dir/NAME
  curl -s "127.0.0.1:$port/completion" -d "$body" | python3 -c "
import json, sys
o = json.load(sys.stdin)
print(json.dumps([o['content'], o['timings']['cache_n']]))" >"$dir/$1" || fail "completion $1"
}
action() { # ID ACTION [FILENAME]: status in $code, body in $dir/out
  local data='{}'
  [ $# -ge 3 ] && data="{\"filename\": \"$3\"}"
  code=$(curl -s -o "$dir/out" -w '%{http_code}' -XPOST "127.0.0.1:$port/slots/$1?action=$2" -d "$data")
}
field() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))$1)" "$dir/out"; }
cached() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[1])" "$dir/$1"; }
same_text() { python3 -c "
import json, sys
a, b = (json.load(open(f))[0] for f in sys.argv[1:3])
sys.exit(a != b)" "$dir/$1" "$dir/$2"; }

for m in qwen3moe-tiny-Q8_0 qwen35moe-tiny-F16; do
  model=tests/data/$m.gguf
  flags=(-m "$model" -np 1 -b 64 --slot-save-path "$dir/slots")
  serve_start "${flags[@]}"
  action 0 save empty.bin
  [ "$code" = 400 ] || fail "$m: saving an empty slot: $code $(cat "$dir/out")"
  complete first
  action 0 save "$m.bin"
  [ "$code" = 200 ] || fail "$m: save: $code $(cat "$dir/out")"
  saved=$(field "['n_saved']")
  [ "$saved" -gt 0 ] && [ $((saved % 64)) -eq 0 ] || fail "$m: n_saved $saved"
  [ "$(field "['n_written']")" = "$(stat -c %s "$dir/slots/$m.bin")" ] || fail "$m: n_written"
  stop
  serve_start "${flags[@]}"
  action 0 restore "$m.bin"
  [ "$code" = 200 ] && [ "$(field "['n_restored']")" = "$saved" ] ||
    fail "$m: restore: $code $(cat "$dir/out")"
  complete restored
  [ "$(cached restored)" = "$saved" ] || fail "$m: the restored prompt was not read ($(cat "$dir/restored"))"
  same_text first restored || fail "$m: the answer changed: $(cat "$dir/first") / $(cat "$dir/restored")"
  action 0 erase
  [ "$code" = 200 ] && [ "$(field "['n_erased']")" = "$saved" ] || fail "$m: erase: $(cat "$dir/out")"
  complete erased
  [ "$(cached erased)" = 0 ] || fail "$m: read from an erased slot ($(cat "$dir/erased"))"
  same_text first erased || fail "$m: the answer changed after erase"
  echo "$m: $saved positions saved, restored by another server, read, erased; same answers"
  stop
done

# errors
serve_start -m tests/data/qwen3moe-tiny-F16.gguf -np 2 -b 64 --slot-save-path "$dir/slots"
check() { # WANT-CODE WHAT
  [ "$code" = "$1" ] || fail "$2: $code (want $1): $(cat "$dir/out")"
  python3 -c "import json, sys; e = json.load(open(sys.argv[1]))['error']; assert e['message'] and e['type']" \
    "$dir/out" || fail "$2: not an error object: $(cat "$dir/out")"
  ! grep -q "$dir/slots" "$dir/out" || fail "$2: the answer shows the server's folder: $(cat "$dir/out")"
  echo "$2: $code $(field "['error']['message']")"
}
action 2 save x.bin; check 400 "slot out of range"
action x save x.bin; check 400 "a bad slot id"
action 0 load x.bin; check 400 "an unknown action"
action 0 save ../x.bin; check 400 "a name with .."
action 0 save a/x.bin; check 400 "a name with a folder"
action 0 restore none.bin; check 400 "a missing file"
action 0 restore qwen3moe-tiny-Q8_0.bin; check 400 "another model's file"
stop
serve_start -m tests/data/qwen3moe-tiny-F16.gguf -np 1
action 0 save x.bin; check 501 "no --slot-save-path"
stop
"$cli" serve -m tests/data/qwen3moe-tiny-F16.gguf --slot-save-path "$dir/none" 2>"$dir/err"
[ $? -eq 2 ] && grep -q "not a folder" "$dir/err" || fail "--slot-save-path to no folder: $(cat "$dir/err")"
echo "test-serve-slots: all checks passed"
