#!/bin/sh
# test-winogrande.sh: `faultline perplexity --winogrande` (tests/data/winogrande/README.md):
#   - five models (dense attention, a recurrent hybrid, delta attention;
#     F16 and MXFP4): every task's two scores within the noise between the
#     engines of llama-perplexity's formula applied to llama.cpp's own logits
#     of each sentence (llama-single-MODEL.txt), the same choice wherever
#     those scores are not a near tie, the running accuracy and the final
#     score from the lines' own choices; the file's header skipped and its
#     last line not read, as llama.cpp reads the file;
#   - --winogrande-tasks 50: the tasks llama.cpp draws (mt19937 seeded 1,
#     drawn here by Python's own Mersenne Twister given that seed's state),
#     each line the scores of that task's line in the full run, and the
#     answers and choices as llama-perplexity printed them;
#   - -b 128 (fewer tasks per call): the same bytes;
#   - refused in one line: a file without tasks, --winogrande beside
#     --hellaswag.
# usage: test-winogrande.sh FAULTLINE   (from the source folder; 77: no python3)
set -u
cli=$1
data=tests/data/winogrande
dir=$(mktemp -d /tmp/test-winogrande.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
wg() { # MODEL ARGS...
  wm=$1
  shift
  "$cli" perplexity -m "tests/data/$wm.gguf" -f $data/tasks.csv --winogrande -t 2 "$@" 2>"$dir/err"
}

for case in qwen3moe-tiny-F16:0.03 qwen35moe-tiny-F16:0.03 glm4moe-tiny-F16:0.03 kimi-linear-tiny-F16:0.03 \
  gpt-oss-tiny-MXFP4:0.3; do
  m=${case%:*} tol=${case#*:}
  wg "$m" >"$dir/$m" || fail "$m: $(cat "$dir/err")"
  grep -q "1 lines are not tasks" "$dir/err" || fail "$m: the header line was not skipped: $(cat "$dir/err")"
  python3 - "$dir/$m" "$data/llama-single-$m.txt" "$tol" "$m" <<'PY' || fail "$m: see above"
import re, sys
ours = open(sys.argv[1]).read()
rows = [l.split() for l in ours.splitlines() if re.match(r"^\d+\t", l)]
ref = [l.split() for l in open(sys.argv[2])]
tol = float(sys.argv[3])
if len(rows) != len(ref) or len(rows) != 130:
    sys.exit(f"{len(rows)} tasks, the reference {len(ref)} (the file holds 131 lines after its header: the last is not read)")
worst, ties, correct = 0.0, 0, 0
for i, (r, o) in enumerate(zip(rows, ref)):
    s1, s2, o1, o2 = float(r[2]), float(r[3]), float(o[0]), float(o[1])
    worst = max(worst, abs(s1 - o1), abs(s2 - o2))
    if int(r[5]) != int(o[2]):
        sys.exit(f"task {i + 1}: answer {r[5]}, the file's {o[2]}")
    if int(r[4]) != (1 if s1 > s2 else 2):
        sys.exit(f"task {i + 1}: choice {r[4]} for scores {s1} {s2}")
    want = 1 if o1 > o2 else 2
    if int(r[4]) != want:
        if abs(o1 - o2) > 2 * tol:
            sys.exit(f"task {i + 1}: choice {r[4]}, llama.cpp's logits choose {want} ({o1} vs {o2})")
        ties += 1
    correct += int(r[4]) == int(r[5])
    if abs(float(r[1]) - 100.0 * correct / (i + 1)) > 6e-5:
        sys.exit(f"task {i + 1}: running accuracy {r[1]}, its choices give {100.0 * correct / (i + 1)}")
if worst > tol:
    sys.exit(f"a score {worst:.4f} from llama.cpp's (bound {tol})")
final = re.search(r"Final Winogrande score\(130 tasks\): ([0-9.]+) \+/- ([0-9.]+)", ours)
if not final or abs(float(final.group(1)) - 100.0 * correct / 130) > 6e-5:
    sys.exit(f"final line {final and final.group(0)}, the choices give {100.0 * correct / 130}")
print(f"  {sys.argv[4]:22s} worst score diff {worst:.4f} (bound {tol}), {ties} near ties, {final.group(0)}")
PY
done
echo "5 models: scores as llama-perplexity's formula on llama.cpp's logits, the same choices"

m=qwen35moe-tiny-F16
wg $m --winogrande-tasks 50 >"$dir/fifty" || fail "50 tasks: $(cat "$dir/err")"
python3 - "$dir/fifty" "$dir/$m" "$data/llama-perplexity-$m-50.txt" <<'PY' || fail "50 tasks: see above"
import random, re, sys
rows = lambda p: [l.split() for l in open(p) if re.match(r"^\d+\t", l)]
fifty, full, ref = rows(sys.argv[1]), rows(sys.argv[2]), rows(sys.argv[3])
# std::mt19937(1)'s state as C++ seeds it, handed to Python's own Mersenne Twister
mt = [1]
for i in range(1, 624):
    mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xffffffff)
random.setstate((3, tuple(mt) + (624,), None))
import struct
scale = struct.unpack("f", struct.pack("f", 1.0 / 4294967296.0))[0]
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
aux, order = list(range(130)), []
for i in range(50):
    j = int(f32(f32(scale * f32(random.getrandbits(32))) * len(aux)))
    order.append(aux[j]); aux[j] = aux[-1]; aux.pop()
if len(fifty) != 50:
    sys.exit(f"{len(fifty)} lines")
for i, (r, k) in enumerate(zip(fifty, order)):
    if r[2:4] != full[k][2:4] or r[5] != full[k][5]:
        sys.exit(f"line {i + 1} is not task {k + 1}: {r} vs {full[k]}")
if [(r[4], r[5]) for r in fifty] != [(r[4], r[5]) for r in ref]:
    sys.exit("choices or answers differ from llama-perplexity's 50 tasks")
print(f"  tasks drawn: {[k + 1 for k in order[:8]]} ...: llama-perplexity's choices and answers")
PY
wg $m -b 128 >"$dir/b128" || fail "-b 128: $(cat "$dir/err")"
cmp -s "$dir/b128" "$dir/$m" || fail "-b 128 changed the output"
echo "--winogrande-tasks 50 draws llama.cpp's tasks; -b 128 the same bytes"

printf 'index,sentence,option1,option2,answer\n0,no blank here,a,b,1\n' >"$dir/none.csv"
"$cli" perplexity -m tests/data/$m.gguf -f "$dir/none.csv" --winogrande >/dev/null 2>"$dir/err"
[ $? = 1 ] && [ "$(grep -vc '^winogrande: ' "$dir/err")" = 1 ] && grep -q "no tasks in the file" "$dir/err" ||
  fail "a file without tasks: $(cat "$dir/err")"
"$cli" perplexity -m tests/data/$m.gguf -f $data/tasks.csv --winogrande --hellaswag >/dev/null 2>"$dir/err"
[ $? = 2 ] && grep -q "one at a time" "$dir/err" || fail "--winogrande --hellaswag: $(cat "$dir/err")"
echo "refused in one line: no tasks, beside --hellaswag"
echo "test-winogrande: all checks passed"
