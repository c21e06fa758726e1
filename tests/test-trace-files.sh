#!/bin/sh
# test-trace-files.sh: the files `faultline trace` writes, checked from outside.
#   json  - every trace JSON (plain, or .gz: gunzip -t first) loads with python3
#           and is valid trace-event format
#   html  - the HTML report opens in headless Chromium and shows the heatmap
#           (the DOM after scripts ran: cells = rows x cols, counts that match
#           the trace, no network references; the first view is the one with
#           data, its colours the script's own, and #faults recolours every
#           cell by its faults; the no-faults line iff the trace has none);
#           exit 77 without chromium
# usage: test-trace-files.sh json|html TEST-TRACE-STATS [TEST-TRACE-LIVE TRACE-DRIVER]
# Inputs: tests/data/trace-sample.json (a saved trace: needs no privileges)
# and, where BPF tracing works (root), a fresh trace of trace-driver and,
# with FL_CLI (the faultline binary), of a --disk-moe run, written as .gz.
set -u
mode=$1 stats=$2 live=${3:-} driver=${4:-}
dir=$(mktemp -d /tmp/test-trace-files.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp tests/data/trace-sample.json "$dir/sample.trace.json"
"$stats" --make-report "$dir/sample.trace.json" "$dir/sample.report.html" >/dev/null || {
    echo "FAIL: faultline trace report on the sample"; exit 1; }
rc=77
echo "built without live tracing" >"$dir/live.log"
if [ -n "$live" ]; then
    FL_TRACE_KEEP=$dir "$live" "$driver" tests/data/qwen3moe-tiny-F16.gguf >"$dir/live.log" 2>&1
    rc=$?
fi
if [ $rc -eq 0 ] && [ -n "${FL_CLI:-}" ]; then
    # a real acquire-driven run (no faults), its trace gzip: the report's
    # first view must not be the blank faults one
    run=$dir/run-disk-moe
    "$FL_CLI" trace --quiet --out "$run.trace.json.gz" --report "$run.report.html" -- \
        "$FL_CLI" run -m tests/data/qwen3moe-tiny-F16.gguf -p "hello world" -n 16 --temp 0 \
        --disk-moe --ram-budget 600K --pager uffd >/dev/null 2>"$run.log" || {
        tail -5 "$run.log"; echo "FAIL: faultline trace -- faultline run --disk-moe"; exit 1; }
fi
if [ $rc -eq 0 ]; then
    echo "live trace of trace-driver: written"
elif [ $rc -eq 77 ]; then
    echo "live trace: skipped ($(tail -1 "$dir/live.log")); checking the sample only"
else
    cat "$dir/live.log"; echo "FAIL: live trace exited $rc"; exit 1
fi

load_py='
import gzip, json
def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        return json.load(f)
'
if [ "$mode" = json ]; then
    for gz in "$dir"/*.trace.json.gz; do
        [ -e "$gz" ] || continue
        gunzip -t "$gz" || { echo "FAIL: $gz is not valid gzip"; exit 1; }
    done
    # not exec: the EXIT trap must still remove $dir
    python3 -c "$load_py$(cat <<'PY'
import sys
bad = 0
def fail(path, msg):
    global bad
    bad += 1
    print(f"FAIL {path}: {msg}")
for path in sys.argv[1:]:
    d = load(path)
    ev = d.get("traceEvents")
    if not isinstance(ev, list) or not ev:
        fail(path, "no traceEvents list"); continue
    open_async, names, tracks = {}, {}, set()
    for i, e in enumerate(ev):
        ph = e.get("ph")
        if ph not in ("X", "i", "b", "e", "M", "C"):
            fail(path, f"event {i}: phase {ph!r}"); break
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int):
            fail(path, f"event {i}: pid/tid not integers"); break
        if not isinstance(e.get("name"), str):
            fail(path, f"event {i}: no name"); break
        if ph == "M":
            if e["name"] in ("thread_name", "process_name"):
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            fail(path, f"event {i}: bad ts"); break
        tracks.add((e["pid"], e["tid"]))
        if ph == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            fail(path, f"event {i}: X without dur"); break
        if ph == "i" and e.get("s", "t") not in ("t", "p", "g"):
            fail(path, f"event {i}: instant scope"); break
        if ph in ("b", "e"):
            key = (e["pid"], e.get("cat"), e.get("id"))
            if ph == "b":
                open_async[key] = open_async.get(key, 0) + 1
            elif open_async.get(key, 0) <= 0:
                fail(path, f"event {i}: 'e' without 'b'"); break
            else:
                open_async[key] -= 1
    if any(v for v in open_async.values()):
        fail(path, "async slices left open")
    unnamed = [t for t in tracks if t not in names]
    if unnamed:
        fail(path, f"tracks without a thread_name: {unnamed[:3]}")
    fl = d.get("faultline", {})
    if fl.get("version") != 1 or not fl.get("counts"):
        fail(path, "no faultline aggregate")
    stalls = [e for e in ev if e.get("cat") == "stall"]
    faults = sum(c["faults"] for c in fl.get("counts", []))
    if faults and not stalls:
        fail(path, "faults but no stall slices")
    # acquire waits: one slice each, on the waiting thread (exact unless the ring dropped)
    acq = sum(c.get("acquire_stalls", 0) for c in fl.get("counts", []))
    acq_sl = [e for e in stalls if e.get("name", "").startswith("acquire wait")]
    if fl.get("globals", {}).get("ring_drops", 0) == 0 and len(acq_sl) != acq:
        fail(path, f"{len(acq_sl)} acquire-wait slices, {acq} acquire stalls counted")
    print(f"{path.split('/')[-1]}: {len(ev)} events on {len(tracks)} tracks, "
          f"{len(stalls)} stall slices ({len(acq_sl)} acquire waits), {faults} faults: "
          "valid trace-event JSON")
sys.exit(1 if bad else 0)
PY
)" $(ls "$dir"/*.trace.json "$dir"/*.trace.json.gz 2>/dev/null)
    exit $?
fi

chrome=""
for c in chromium chromium-browser google-chrome; do
    command -v $c >/dev/null 2>&1 && { chrome=$c; break; }
done
if [ -z "$chrome" ]; then
    echo "skipped: no chromium (apt-get install chromium)"; exit 77
fi
dom() { # HTML URL-SUFFIX: the page's DOM after its scripts ran, in HTML.dom
    timeout 60 $chrome --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run \
        --user-data-dir="$dir/profile" --dump-dom "file://$1$2" >"$1.dom$2" 2>"$dir/chrome.log" || {
        tail -5 "$dir/chrome.log"; echo "FAIL: chromium on $1$2"; exit 1; }
}
for html in "$dir"/*.report.html; do
    trace=${html%.report.html}.trace.json
    [ -e "$trace" ] || trace=$trace.gz
    dom "$html" ""
    dom "$html" "#faults"
    python3 -c "$load_py$(cat <<'PY'
import math, re, sys
page, dom, dom_f = (open(p).read() for p in sys.argv[1:4])
trace = load(sys.argv[4])
def fail(msg):
    print(f"FAIL {sys.argv[1]}: {msg}"); sys.exit(1)
if 'data-ready="1"' not in dom or 'data-ready="1"' not in dom_f:
    fail("the report's script did not run")
m = re.search(r'<svg id="heatmap"[^>]*data-rows="(\d+)" data-cols="(\d+)"', dom)
if not m:
    fail("no heatmap")
rows, cols = int(m.group(1)), int(m.group(2))
def cells_of(html):
    return [dict(re.findall(r'(fill|data-[a-z0-9]+)="([^"]*)"', c))
            for c in re.findall(r'<rect class="cell"[^>]*>', html)]
cells = cells_of(dom)
if len(cells) != rows * cols or not cells:
    fail(f"{len(cells)} cells for {rows} x {cols}")
faults, waits = {}, {}
for a in cells:
    faults[(int(a["data-layer"]), int(a["data-expert"]))] = int(a["data-faults"])
    waits[(int(a["data-layer"]), int(a["data-expert"]))] = int(a.get("data-waits", -1))
want, want_w, total_faults, stall_ns = {}, {}, 0, 0
for c in trace["faultline"]["counts"]:
    total_faults += c["faults"]
    if c["layer"] >= 0:
        k = (c["layer"], c["expert"])
        want[k] = want.get(k, 0) + c["faults"]
        want_w[k] = want_w.get(k, 0) + c.get("acquire_stalls", 0)
        stall_ns += c.get("stall_ns", 0) + c.get("acquire_stall_ns", 0)
for k, v in want.items():
    if faults.get(k, 0) != v:
        fail(f"cell {k}: {faults.get(k)} faults, trace says {v}")
    if waits.get(k, 0) != want_w[k]:
        fail(f"cell {k}: {waits.get(k)} acquire waits, trace says {want_w[k]}")
# the first view: the one with data; drawn by the page, kept by its script
view = "waits" if any(want_w.values()) else "stall" if stall_ns else "faults"
for html, m in ((page, view), (dom, view), (dom_f, "faults")):
    if not re.search(f'<button data-m="{m}" class="on">', html):
        fail(f"view {m} is not the one shown")
if f'data-default="{view}"' not in page:
    fail(f"the first view is not {view}")
if [c["fill"] for c in cells_of(page)] != [c["fill"] for c in cells]:
    fail("the script recolours the first view otherwise than the page drew it")
def ramp(x):
    if x <= 0:
        return "#f0f0f0"
    x = min(1, x)
    return "rgb(%d,%d,%d)" % tuple(math.floor(v + 0.5) for v in (255 - 90 * x, 230 - 200 * x,
                                                                  180 - 160 * x))
fc = cells_of(dom_f)
top = max(float(c["data-faults"]) for c in fc)
for c in fc:
    if c["fill"] != ramp(math.sqrt(float(c["data-faults"]) / top) if top else 0):
        fail(f"#faults: cell {c['data-layer']}/{c['data-expert']} coloured {c['fill']}")
if f"max {top:g} faults" not in dom_f:
    fail("#faults: legend")
if ('id="no-faults"' in page) != (total_faults == 0):
    fail(f"{total_faults} faults, the no-faults line {'shown' if total_faults else 'missing'}")
if re.search(r'(src|href)="(https?:)?//', dom):
    fail("the page references the network")
print(f"{sys.argv[1].split('/')[-1]}: heatmap {rows} x {cols}, {len(cells)} cells, "
      f"{sum(faults.values())} faults as in the trace; first view {view}; #faults recolours")
PY
)" "$html" "$html.dom" "$html.dom#faults" "$trace" || exit 1
done
echo "all ok"
