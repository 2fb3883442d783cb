#!/usr/bin/python3
"""layercheck.py — which part of libkiln uses which, read from the built objects.

Reads the defined and undefined external symbols (`nm`) of every object
libkiln is linked from (libkiln_la_OBJECTS of the build tree's Makefile), maps
each symbol to the source file that defines it, and from that builds two
graphs: file uses file, and stage folder uses stage folder.  It prints

  - every folder-level use the table below does not allow, with the
    symbols that make it;
  - every circle between stage folders (strongly connected component);
  - every circle between files, with the symbols that close it;

as TAP, and exits 1 when a folder uses a folder the table does not allow
(a circle between folders always contains such a use) or, unless
--allow-file-circles is given, when two files use each other.

THE TABLE.  core/'s stage folders in pipeline order.  A folder may use
itself and every folder before it, never one after it.  This is the one
place the order is declared; docs/architecture.md ("What each folder may
use") describes it.

usage: layercheck.py [--builddir DIR] [--srcdir DIR] [--allow-file-circles]
                     [--verbose]
"""

import argparse
import os
import re
import subprocess
import sys

# (folder, what it is) in the order the pipeline runs.
LAYERS = [
    ("core/support", "diagnostics (excerpts, did-you-mean), progress, trust"),
    ("core/ir", "graph IR, op registry, composites, gradients, parameters"),
    ("core/front", "the .kg parser and printer, data and YAML readers"),
    ("core/rewrite", "graph rewrite passes"),
    ("core/lower", "fusion plan, lowering to kernels, the C emitter"),
    ("core/plugin", "backend plugins: loader, built-in interpreter, ELF objects"),
    ("core/policy", "backend chains per kernel, user configuration"),
    ("core/cache", "cache keys, the disk store, eviction, `kiln cache`"),
    ("core/runtime", "the VM: functions, contexts, tiers, callbacks, "
     "runtime library"),
    ("core/compile", "the compile driver (kiln_compile), emitters to text"),
    ("core/check", "checks of compiled functions: gradcheck, nonfinite trace"),
    ("core/model", "models: data binding, log density and gradient"),
]

OBJ_PREFIX = "libkiln_la-"


def make_vars(makefile):
    """The plain assignments of a generated Makefile (continuations joined)."""
    text = open(makefile, encoding="utf-8", errors="replace").read()
    text = text.replace("\\\n", " ")
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def expand(value, vars_, depth=0):
    if depth > 20:
        return value
    return re.sub(r"\$\(([A-Za-z0-9_]+)\)",
                  lambda m: expand(vars_.get(m.group(1), ""), vars_, depth + 1),
                  value)


def find_objects(builddir):
    """Yield (source path relative to the tree, object path) for libkiln.

    The objects are libkiln_la_OBJECTS of the generated Makefile; an
    object dir/NAME.lo (or dir/libkiln_la-NAME.lo) is compiled from
    dir/NAME.c, and its code is in dir/.libs/NAME.o (PIC) or dir/NAME.o."""
    vars_ = make_vars(os.path.join(builddir, "Makefile"))
    for lo in expand(vars_.get("libkiln_la_OBJECTS", ""), vars_).split():
        if not lo.endswith(".lo"):
            continue
        d, f = os.path.split(lo)
        base = f[:-3]
        name = base[len(OBJ_PREFIX):] if base.startswith(OBJ_PREFIX) else base
        pic = os.path.join(builddir, d, ".libs", base + ".o")
        plain = os.path.join(builddir, d, base + ".o")
        obj = pic if os.path.exists(pic) else plain
        if os.path.exists(obj):
            yield os.path.join(d, name + ".c"), obj


def read_symbols(obj):
    """The external symbols obj defines and the ones it needs."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRGSVWC" or kind in "iu":
            defined.add(name)
    return defined, undefined


def folder_of(src):
    return os.path.dirname(src)


def sccs(nodes, edges):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, onstack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        onstack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in onstack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def show_syms(syms, limit=6):
    s = sorted(syms)
    more = "" if len(s) <= limit else " (+%d more)" % (len(s) - limit)
    return ", ".join(s[:limit]) + more


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--builddir", default=os.environ.get("KILN_BUILDDIR", "."))
    ap.add_argument("--srcdir", default=os.path.dirname(here))
    ap.add_argument("--allow-file-circles", action="store_true")
    ap.add_argument("--verbose", action="store_true",
                    help="also print every folder-level use")
    args = ap.parse_args()

    objs = list(find_objects(args.builddir))
    print("1..3")
    if not objs:
        print("not ok 1 - libkiln objects under %s/core (build first)"
              % args.builddir)
        print("ok 2 # SKIP no objects")
        print("ok 3 # SKIP no objects")
        return 1

    owner = {}          # symbol -> source file
    needs = {}          # source file -> undefined symbols
    for src, obj in objs:
        d, u = read_symbols(obj)
        for s in d:
            owner.setdefault(s, src)
        needs[src] = u

    # file -> file -> symbols
    fedges = {}
    for src, und in needs.items():
        for s in und:
            dst = owner.get(s)
            if dst and dst != src:
                fedges.setdefault(src, {}).setdefault(dst, set()).add(s)

    rank = {name: i for i, (name, _) in enumerate(LAYERS)}
    dedges = {}
    for a, outs in fedges.items():
        for b, syms in outs.items():
            fa, fb = folder_of(a), folder_of(b)
            if fa != fb:
                dedges.setdefault(fa, {}).setdefault(fb, {}).setdefault(
                    (a, b), syms)

    print("# %d objects, %d file-to-file uses, %d folders"
          % (len(objs), sum(len(v) for v in fedges.values()),
             len({folder_of(s) for s in needs})))
    if args.verbose:
        for fa in sorted(dedges):
            for fb in sorted(dedges[fa]):
                print("# uses: %s -> %s" % (fa, fb))

    # 1: every folder is in the table, every use allowed by it
    bad = []
    unknown = sorted({folder_of(s) for s in needs} - set(rank))
    for fa in sorted(dedges):
        for fb in sorted(dedges[fa]):
            if fa in rank and fb in rank and rank[fb] > rank[fa]:
                bad.append((fa, fb))
    for f in unknown:
        print("# folder %s is not in the table (tools/layercheck.py LAYERS)"
              % f)
    for fa, fb in bad:
        print("# %s uses the later stage %s:" % (fa, fb))
        for (a, b), syms in sorted(dedges[fa][fb].items()):
            print("#   %s -> %s: %s" % (a, b, show_syms(syms)))
    ok1 = not bad and not unknown
    print("%s 1 - every stage folder uses only itself and earlier stages"
          % ("ok" if ok1 else "not ok"))

    # 2: folder-level circles
    folders = set(dedges) | {b for v in dedges.values() for b in v}
    fsimple = {a: set(v) for a, v in dedges.items()}
    dcirc = sccs(folders, fsimple)
    for comp in dcirc:
        print("# folder circle: %s" % " <-> ".join(comp))
        for fa in comp:
            for fb in comp:
                if fb in dedges.get(fa, {}):
                    for (a, b), syms in sorted(dedges[fa][fb].items()):
                        print("#   %s -> %s: %s" % (a, b, show_syms(syms)))
    print("%s 2 - no circle between stage folders (%d)"
          % ("ok" if not dcirc else "not ok", len(dcirc)))

    # 3: file-level circles
    fsimple = {a: set(v) for a, v in fedges.items()}
    files = set(fedges) | {b for v in fedges.values() for b in v}
    fcirc = sccs(files, fsimple)
    for comp in fcirc:
        print("# file circle: %s" % " <-> ".join(comp))
        for a in comp:
            for b in comp:
                if b in fedges.get(a, {}):
                    print("#   %s -> %s: %s"
                          % (a, b, show_syms(fedges[a][b])))
    ok3 = not fcirc or args.allow_file_circles
    print("%s 3 - no circle between files (%d)%s"
          % ("ok" if ok3 else "not ok", len(fcirc),
             " # TODO allowed by --allow-file-circles"
             if fcirc and args.allow_file_circles else ""))
    return 0 if (ok1 and not dcirc and ok3) else 1


if __name__ == "__main__":
    sys.exit(main())
