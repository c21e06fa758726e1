#!/bin/sh
# test-bench-llama.sh: `faultline bench` as llama-bench from outside:
#   - comma lists and ranges: every combination one row, in llama-bench's
#     order (-b, -ub, -fa, -t outermost to innermost; every -p, then every -n);
#   - md's optional columns (n_batch, n_ubatch, type_k, type_v, fa) when those
#     flags are given;
#   - -o csv (python3's csv reader), json and jsonl (python3's json): field
#     names and types, one object per test, samples_ns/samples_ts per
#     repetition, avg_ts and stddev_ts their mean and sample sd (-r 2);
#   - model_size, model_n_params and the active count equal a count made
#     here from `faultline inspect --json --tensors` (shapes multiplied out,
#     experts by name); the model column's size label agrees with them and
#     is never "?B";
#   - -fa on|off|auto|1|0|-1 accepted; bad lists, -fa, -o, -t, -r: one line,
#     exit 2.
# usage: test-bench-llama.sh FAULTLINE
set -u
cli=$1
model=tests/data/qwen3moe-tiny-Q8_0.gguf
dir=$(mktemp -d /tmp/test-bench-llama.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

bench() { # OUT ARGS...: bench into OUT (stdout) and OUT.err
    out=$1
    shift
    "$cli" bench -m $model "$@" >"$out" 2>"$out.err" ||
        fail "bench $*: exit $? ($(tail -1 "$out.err"))"
}

# md rows as "threads test" (the columns found by their header)
md_rows() {
    awk -F'|' 'NR == 1 { for (i = 2; i < NF; i++) { h = $i; gsub(/ /, "", h); col[h] = i } }
        NR > 2 && /^\|/ { line = ""
            for (k = 1; k <= split(want, w, " "); k++) { v = $(col[w[k]]); gsub(/ /, "", v)
                line = line (k > 1 ? " " : "") v }
            print line }' want="$2" "$1"
}

# 1. md, lists and ranges
bench "$dir/md" -p 8,16 -n 4 -t 1-2 -r 2
got=$(md_rows "$dir/md" "threads test")
want="1 pp8
1 pp16
1 tg4
2 pp8
2 pp16
2 tg4"
[ "$got" = "$want" ] || fail "md rows: got '$got', want '$want'"
head -1 "$dir/md" | grep -q '^| model  *|  *size |  *params | backend  *| threads |  *test |  *t/s |$' ||
    fail "md header: $(head -1 "$dir/md")"
[ "$(grep -c ' [0-9]*\.[0-9][0-9] ± [0-9]*\.[0-9][0-9] |$' "$dir/md")" -eq 6 ] ||
    fail "md t/s not 'mean ± sd': $(cat "$dir/md")"
grep -q '?B' "$dir/md" && fail "md: the model column says ?B"

# 2. the optional columns, and -b/-fa outside -t
bench "$dir/md2" -p 8 -n 0 -b 8,16 -ub 8 -fa on,off -t 2 -r 1
got=$(md_rows "$dir/md2" "n_batch n_ubatch fa test")
want="8 8 1 pp8
8 8 0 pp8
16 8 1 pp8
16 8 0 pp8"
[ "$got" = "$want" ] || fail "-b/-ub/-fa rows: got '$got', want '$want'"
for fa in on off auto 1 0 -1; do
    bench "$dir/fa" -p 4 -n 0 -r 1 -t 2 -fa $fa
done

# 2a. -ctk/-ctv: their columns (llama-bench's, only when not f16) and fields
bench "$dir/ctk" -p 8 -n 0 -t 2 -r 1 -ctk q8_0 -ctv q4_0
got=$(md_rows "$dir/ctk" "type_k type_v test")
[ "$got" = "q8_0 q4_0 pp8" ] || fail "-ctk/-ctv rows: got '$got'"
bench "$dir/ctk.jsonl" -o jsonl -p 8 -n 0 -t 2 -r 1 -ctv q8_0
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert [(x["type_k"], x["type_v"]) for x in r] == [("f16", "q8_0")], r' \
    "$dir/ctk.jsonl" || fail "-ctv jsonl: $(cat "$dir/ctk.jsonl")"
"$cli" bench -m $model -p 8 -n 0 -r 1 -ctk f16,q8_0 >/dev/null 2>"$dir/err"
[ $? = 2 ] && grep -q "one type per run" "$dir/err" || fail "-ctk list: $(cat "$dir/err")"

# 2b. -d: each test after D tokens in the cache, named as llama-bench names it
bench "$dir/depth" -p 8 -n 2 -d 0,16 -t 2 -r 1
got=$(md_rows "$dir/depth" "test")
want="pp8
tg2
pp8@d16
tg2@d16"
[ "$got" = "$want" ] || fail "-d rows: got '$got', want '$want'"
bench "$dir/depth.jsonl" -o jsonl -p 8 -n 0 -d 16 -t 2 -r 1
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert [(x["n_depth"], x["n_prompt"]) for x in r] == [(16, 8)], r' \
    "$dir/depth.jsonl" || fail "-d jsonl: $(cat "$dir/depth.jsonl")"

# 3-5. csv, json, jsonl; the counts from inspect's tensor table
"$cli" inspect --json --tensors $model >"$dir/inspect.json" || fail "inspect --json: exit $?"
bench "$dir/csv" -o csv -p 8,16 -n 4 -t 2 -r 2
bench "$dir/json" -o json -p 8,16 -n 4 -t 2 -r 2
bench "$dir/jsonl" -o jsonl -p 8,16 -n 4 -t 2 -r 2
bench "$dir/md3" -p 8 -n 0 -t 2 -r 1
python3 - "$dir" <<'EOF' || exit 1
import csv, json, math, re, sys
d = sys.argv[1]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)

ins = json.load(open(d + "/inspect.json"))
total = sum(math.prod(t["shape"]) for t in ins["tensors"])
size = sum(t["bytes"] for t in ins["tensors"])
experts = sum(math.prod(t["shape"]) for t in ins["tensors"] if "_exps." in t["name"])
hp = ins["hparams"]
active = total - experts + experts // hp["expert_count"] * hp["expert_used_count"]

fields = ["cpu_info", "backends", "model_filename", "model_type", "model_size", "model_n_params",
          "model_n_params_active", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v",
          "flash_attn", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns",
          "avg_ts", "stddev_ts"]
ints = {"model_size", "model_n_params", "model_n_params_active", "n_batch", "n_ubatch",
        "n_threads", "flash_attn", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns"}
tests = [(8, 0), (16, 0), (0, 4)]

def check_rows(rows, what, samples):
    if [(r["n_prompt"], r["n_gen"]) for r in rows] != tests:
        fail(f"{what}: tests {[(r['n_prompt'], r['n_gen']) for r in rows]}, want {tests}")
    for r in rows:
        keys = list(r.keys())
        want = fields + (["samples_ns", "samples_ts"] if samples else [])
        if keys != want:
            fail(f"{what}: fields {keys}")
        if (r["model_n_params"], r["model_size"], r["model_n_params_active"]) != (total, size, active):
            fail(f"{what}: params/size/active {r['model_n_params']} {r['model_size']} "
                 f"{r['model_n_params_active']}, counted {total} {size} {active}")
        if r["n_threads"] != 2 or r["n_batch"] != 2048 or r["n_ubatch"] != 512 or r["flash_attn"] != -1:
            fail(f"{what}: threads/batch/ubatch/fa {r}")
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["test_time"]):
            fail(f"{what}: test_time {r['test_time']}")
        if not samples:
            continue
        ns, ts = r["samples_ns"], r["samples_ts"]
        n = r["n_prompt"] + r["n_gen"]
        if len(ns) != 2 or len(ts) != 2:
            fail(f"{what}: {len(ns)} samples for -r 2")
        for a, b in zip(ns, ts):
            if not math.isclose(b, 1e9 * n / a, rel_tol=1e-9):
                fail(f"{what}: samples_ts {b} for {a} ns and {n} tokens")
        mean = sum(ts) / 2
        sd = math.sqrt(sum((x - mean) ** 2 for x in ts))  # n - 1 = 1
        if not (math.isclose(r["avg_ts"], mean, rel_tol=1e-9) and
                math.isclose(r["stddev_ts"], sd, rel_tol=1e-6, abs_tol=1e-9)):
            fail(f"{what}: avg_ts/stddev_ts {r['avg_ts']} {r['stddev_ts']}, want {mean} {sd}")
        for k in fields:
            t = int if k in ints else float if k in ("avg_ts", "stddev_ts") else str
            if type(r[k]) is not t:
                fail(f"{what}: {k} is {type(r[k]).__name__}")

# csv: every value quoted, as llama-bench writes them
lines = open(d + "/csv").read().splitlines()
if lines[0] != ",".join(fields) or not all(l.startswith('"') for l in lines[1:]):
    fail("csv: header or quoting: " + lines[0])
rows = list(csv.DictReader(open(d + "/csv")))
for r in rows:
    for k in ints:
        r[k] = int(r[k])
check_rows(rows, "csv", False)

doc = json.load(open(d + "/json"))
if not isinstance(doc, list):
    fail("json: not an array")
check_rows(doc, "json", True)
check_rows([json.loads(l) for l in open(d + "/jsonl")], "jsonl", True)

# the size label: the counts in their own units, total then active
mtype = doc[0]["model_type"]
m = re.fullmatch(r"qwen3moe (\d+(?:\.\d)?)([KMBT])\.A(\d+(?:\.\d)?)([KMBT]) Q8_0", mtype)
if not m:
    fail(f"model_type '{mtype}'")
unit = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
for num, u, count in ((m[1], m[2], total), (m[3], m[4], active)):
    if abs(float(num) * unit[u] - count) > 0.05 * unit[u] * (1 if "." in num else 10):
        fail(f"label {mtype}: {num}{u} for {count}")
cells = [c.strip() for c in open(d + "/md3").read().splitlines()[2].split("|")]
if cells[1:4] != [mtype, f"{size / 1048576:.2f} MiB", f"{total / 1e6:.2f} M"]:
    fail(f"md row {cells} for {mtype}, {total} params, {size} bytes")
EOF

# 6. mistakes: one line, exit 2
for args in "-p 8,x" "-p 8," "-n 1-8*1" "-t 0" "-r 0" "-fa maybe" "-o sql" "-o" \
            "-p 0 -n 0" "-npp 8 -ntg 4 -npl 1 -t 1,2" "-npp 8 -ntg 4 -npl 1 -o json" \
            "-d x" "-npp 8 -ntg 4 -npl 1 -d 8" "-ngl 1,2"; do
    "$cli" bench -m $model $args >"$dir/out" 2>"$dir/err"
    rc=$?
    [ $rc -eq 2 ] || fail "'$args': exit $rc, want 2"
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "'$args': not one line: $(cat "$dir/err")"
done
echo "test-bench-llama: all checks passed"
