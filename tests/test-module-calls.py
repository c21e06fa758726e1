#!/usr/bin/env python3
"""test-module-calls: no module calls a function of a module it does not
depend on, so the call graph between modules is the DAG that cmake/mod-*.cmake
declares (the configure step checks the includes; this checks the symbols a
module's object files leave undefined, which also catches a call through a
local declaration instead of the other module's header).

usage: test-module-calls.py BUILD_DIR   (reads BUILD_DIR/fl-modules.txt)"""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVWGS":  # global definitions (locals cannot be called from outside)
            defined.add(name)
    return defined, undefined


def main():
    build = sys.argv[1]
    mods = {}
    sources = {}
    for line in open(os.path.join(build, "fl-modules.txt")):
        name, closure, srcs = line.strip().split("|")
        mods[name] = set(filter(None, closure.split(",")))
        sources[name] = [x for x in srcs.split(",") if x]
    defined_by, uses = {}, []
    for m in mods:
        root = os.path.join(build, "CMakeFiles", "fl_%s.dir" % m)
        for src in sources[m]:
            obj = os.path.join(root, src + ".o")
            if not os.path.exists(obj):
                print("FAIL module %s: no object %s (build first)" % (m, obj))
                return 1
            defs, undefs = symbols(obj)
            for s in defs:
                defined_by.setdefault(s, set()).add(m)
            uses.append((m, src, undefs))
    bad = 0
    for m, obj, undefs in uses:
        for s in sorted(undefs):
            owners = defined_by.get(s, set())
            if owners and m not in owners and not owners & mods[m]:
                print("FAIL module %s (%s) calls %s of module %s, which it does not depend on"
                      % (m, obj, s, ",".join(sorted(owners))))
                bad += 1
    print("test-module-calls: %d modules, %d objects, %d calls across modules outside the DAG"
          % (len(mods), len(uses), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
