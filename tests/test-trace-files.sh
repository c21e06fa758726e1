#!/bin/sh
# test-trace-files.sh: the files `faultline trace` writes, checked from outside.
#   json  - every trace JSON loads with python3 and is valid trace-event format
#   html  - the HTML report opens in headless Chromium and shows the heatmap
#           (the DOM after scripts ran: cells = rows x cols, counts that match
#           the trace, no network references); exit 77 without chromium
# usage: test-trace-files.sh json|html TEST-TRACE-STATS [TEST-TRACE-LIVE TRACE-DRIVER]
# Inputs: tests/data/trace-sample.json (a saved trace: needs no privileges)
# and, where BPF tracing works (root), a fresh trace of trace-driver.
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
if [ $rc -eq 0 ]; then
    echo "live trace of trace-driver: written"
elif [ $rc -eq 77 ]; then
    echo "live trace: skipped ($(tail -1 "$dir/live.log")); checking the sample only"
else
    cat "$dir/live.log"; echo "FAIL: live trace exited $rc"; exit 1
fi

if [ "$mode" = json ]; then
    exec python3 - "$dir"/*.trace.json <<'PY'
import json, sys
bad = 0
def fail(path, msg):
    global bad
    bad += 1
    print(f"FAIL {path}: {msg}")
for path in sys.argv[1:]:
    d = json.load(open(path))
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
        if ph == "i" and e.get("s") not in ("t", "p", "g"):
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
fi

chrome=""
for c in chromium chromium-browser google-chrome; do
    command -v $c >/dev/null 2>&1 && { chrome=$c; break; }
done
if [ -z "$chrome" ]; then
    echo "skipped: no chromium (apt-get install chromium)"; exit 77
fi
for html in "$dir"/*.report.html; do
    timeout 60 $chrome --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run \
        --user-data-dir="$dir/profile" --dump-dom "file://$html" >"$html.dom" 2>"$dir/chrome.log" || {
        tail -5 "$dir/chrome.log"; echo "FAIL: chromium on $html"; exit 1; }
    python3 - "$html.dom" "${html%.report.html}.trace.json" <<'PY' || exit 1
import json, re, sys
dom, trace = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
def fail(msg):
    print(f"FAIL {sys.argv[1]}: {msg}"); sys.exit(1)
if 'data-ready="1"' not in dom:
    fail("the report's script did not run")
m = re.search(r'<svg id="heatmap"[^>]*data-rows="(\d+)" data-cols="(\d+)"', dom)
if not m:
    fail("no heatmap")
rows, cols = int(m.group(1)), int(m.group(2))
cells = re.findall(r'<rect class="cell"[^>]*>', dom)
if len(cells) != rows * cols or not cells:
    fail(f"{len(cells)} cells for {rows} x {cols}")
faults, waits = {}, {}
for c in cells:
    a = dict(re.findall(r'data-([a-z0-9]+)="([^"]*)"', c))
    faults[(int(a["layer"]), int(a["expert"]))] = int(a["faults"])
    waits[(int(a["layer"]), int(a["expert"]))] = int(a.get("waits", -1))
want, want_w = {}, {}
for c in trace["faultline"]["counts"]:
    if c["layer"] >= 0:
        k = (c["layer"], c["expert"])
        want[k] = want.get(k, 0) + c["faults"]
        want_w[k] = want_w.get(k, 0) + c.get("acquire_stalls", 0)
for k, v in want.items():
    if faults.get(k, 0) != v:
        fail(f"cell {k}: {faults.get(k)} faults, trace says {v}")
    if waits.get(k, 0) != want_w[k]:
        fail(f"cell {k}: {waits.get(k)} acquire waits, trace says {want_w[k]}")
if re.search(r'(src|href)="(https?:)?//', dom):
    fail("the page references the network")
print(f"{sys.argv[1].split('/')[-1]}: heatmap {rows} x {cols}, {len(cells)} cells, "
      f"{sum(faults.values())} faults as in the trace")
PY
done
echo "all ok"
