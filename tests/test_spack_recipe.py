#!/usr/bin/env python3
"""test_spack_recipe.py — kiln's Spack recipe (tools/spack/, docs/hpc.md)
against kiln's own configure (TAP).

Spack is not installed here, so the recipes are loaded against a small
model of the part of Spack's package DSL they use, written from Spack's
documentation (Packaging Guide: version, variant, depends_on, when=;
Build Systems / Autotools: configure_args and with_or_without, whose
documented behaviour for a boolean variant is `--with-NAME` when it is
on, `--without-NAME` when off, and `--with-NAME=VALUE` with an
activation_value: "prefix" gives spec[NAME].prefix, a callable is called
with the variant's name).  Then, for every combination of the recipe's
boolean variants:

* every configure flag the recipe produces is one `configure --help`
  lists (a --without-X / --disable-X form counts when --with-X /
  --enable-X is listed: autoconf accepts both), and every VAR=VALUE is
  one of configure's influential environment variables;
* each variant maps to its flag (+tcc -> --with-tcc=<kiln-libtcc's
  prefix>, ~tcc -> --without-tcc, and so on);
* the dependencies are those the variants call for (+llvm needs llvm@14,
  which is all configure accepts; ~mpi has no mpi; ...).

usage: test_spack_recipe.py SRCDIR [REPO]
SRCDIR holds configure and configure.ac; REPO is the Spack repository
(default SRCDIR/tools/spack; another one to check an edited copy).
"""
import contextlib
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import types

# ---- TAP -------------------------------------------------------------------

_n = 0
_failed = 0


def ok(cond, what):
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _n, what))
    return cond


def diag(msg):
    for line in str(msg).splitlines():
        print("# " + line)


# ---- a model of Spack's package DSL ---------------------------------------


class Version:
    def __init__(self, s):
        self.string = s

    def up_to(self, k):
        return ".".join(self.string.split(".")[:k])

    def __str__(self):
        return self.string


class Prefix(str):
    """Spack's Prefix: a str whose attributes are subdirectories."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Prefix(os.path.join(self, name))


class LibraryList:
    def __init__(self, libs):
        self.libs = list(libs)

    def __add__(self, other):
        return LibraryList(self.libs + [x for x in other.libs if x not in self.libs])

    @property
    def ld_flags(self):
        dirs = []
        for p in self.libs:
            d = os.path.dirname(p)
            if d not in dirs:
                dirs.append(d)
        names = [re.sub(r"^lib|\.so$", "", os.path.basename(p)) for p in self.libs]
        return " ".join(["-L" + d for d in dirs] + ["-l" + n for n in names])


class Dep:
    """A concrete dependency: its prefix, libraries, command, version."""

    def __init__(self, name, version="1.0"):
        self.name = name
        self.prefix = Prefix("/spack/opt/" + name + "-hash")
        self.version = Version(version)
        self.libs = LibraryList([self.prefix + "/lib/lib" + name + ".so"])
        self.command = types.SimpleNamespace(path=self.prefix + "/bin/" + name)


class Spec:
    """A concrete spec: variants on/off, version, dependencies by name.
    satisfies() understands what recipes write in when=: `+v`, `~v`,
    `@ver` and spaces between them (all must hold)."""

    def __init__(self, name, version, variants, deps):
        self.name = name
        self.version = Version(version)
        self.variants = dict(variants)
        self.deps = deps

    def satisfies(self, cond):
        for term in re.findall(r"[+~]?[^\s+~]+", cond or ""):
            if term.startswith("+"):
                if not self.variants.get(term[1:], False):
                    return False
            elif term.startswith("~"):
                if self.variants.get(term[1:], True):
                    return False
            elif term.startswith("@"):
                want = term[1:]
                have = self.version.string
                if want.endswith(":"):
                    if tuple(map(int, have.split("."))) < tuple(map(int, want[:-1].split("."))):
                        return False
                elif not (have == want or have.startswith(want + ".")):
                    return False
            else:
                raise ValueError("model of satisfies(): cannot read %r" % term)
        return True

    def __contains__(self, cond):
        return self.satisfies(cond)

    def __getitem__(self, name):
        if name not in self.deps:
            raise KeyError("%s is not a dependency of this spec" % name)
        return self.deps[name]


_directives = []  # (kind, args, kwargs) of the class body being executed
_when_stack = []


def _directive(kind):
    def record(*args, **kwargs):
        if _when_stack:
            cond = " ".join(_when_stack + ([kwargs["when"]] if "when" in kwargs else []))
            kwargs = dict(kwargs, when=cond)
        _directives.append((kind, args, kwargs))
    record.__name__ = kind
    return record


@contextlib.contextmanager
def when(cond):
    _when_stack.append(cond)
    try:
        yield
    finally:
        _when_stack.pop()


class _PackageMeta(type):
    """Like Spack's DirectiveMeta: a class body's directives become the
    class's own (versions, variants, dependencies, ...)."""

    def __new__(mcs, name, bases, attrs):
        global _directives
        taken, _directives = _directives, []
        cls = super().__new__(mcs, name, bases, attrs)
        cls.directives = taken
        cls.versions = {a[0]: k for kind, a, k in taken if kind == "version"}
        cls.variants = {a[0]: k for kind, a, k in taken if kind == "variant"}
        cls.dependencies = [(a[0], k.get("when"), k.get("type", ("build", "link")))
                            for kind, a, k in taken if kind == "depends_on"]
        return cls


class PackageBase(metaclass=_PackageMeta):
    def __init__(self, spec):
        self.spec = spec
        self.prefix = Prefix("/spack/opt/" + spec.name + "-hash")


class Package(PackageBase):
    pass


class AutotoolsPackage(PackageBase):
    build_directory = "."

    def _activate_or_not(self, name, on, off, activation_value, variant):
        variant = variant or name
        if variant not in type(self).variants:
            raise KeyError("variant %r is not declared" % variant)
        if activation_value == "prefix":
            def activation_value(_v):
                return str(self.spec[name].prefix)
        if self.spec.satisfies("+" + variant):
            if activation_value is None:
                return ["--%s-%s" % (on, name)]
            return ["--%s-%s=%s" % (on, name, activation_value(variant))]
        return ["--%s-%s" % (off, name)]

    def with_or_without(self, name, activation_value=None, variant=None):
        return self._activate_or_not(name, "with", "without", activation_value, variant)

    def enable_or_disable(self, name, activation_value=None, variant=None):
        return self._activate_or_not(name, "enable", "disable", activation_value, variant)


def _spack_modules():
    pkg = types.ModuleType("spack.package")
    for kind in ("version", "variant", "depends_on", "conflicts", "requires",
                 "provides", "extends", "resource", "patch", "license",
                 "maintainers"):
        setattr(pkg, kind, _directive(kind))
    pkg.when = when
    pkg.Package = Package
    pkg.AutotoolsPackage = AutotoolsPackage
    pkg.Executable = lambda path: (lambda *a, **k: None)
    pkg.make = lambda *a, **k: None
    pkg.mkdirp = lambda *a, **k: None
    pkg.install = lambda *a, **k: None
    pkg.join_path = os.path.join
    pkg.spack_cc = "cc"
    pkg.__all__ = [n for n in dir(pkg) if not n.startswith("_")]
    spack = types.ModuleType("spack")
    spack.package = pkg
    return {"spack": spack, "spack.package": pkg}


def load_recipe(path, modname):
    sys.modules.update(_spack_modules())
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- configure --help -------------------------------------------------------


def configure_help(srcdir):
    out = subprocess.run([os.path.join(srcdir, "configure"), "--help"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    opts = set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", out, re.M))
    envs = set()
    in_env = False
    for line in out.splitlines():
        if line.startswith("Some influential environment variables"):
            in_env = True
            continue
        if in_env:
            m = re.match(r"^\s{2}([A-Z_][A-Z0-9_]*)\s", line)
            if m:
                envs.add(m.group(1))
            elif line and not line.startswith(" "):
                in_env = False
    return opts, envs


def accepted(arg, opts, envs):
    m = re.match(r"^(--[a-z][a-z0-9-]*)(=.*)?$", arg)
    if m:
        flag = m.group(1)
        if flag in opts:
            return True
        for neg, pos in (("--without-", "--with-"), ("--disable-", "--enable-")):
            if flag.startswith(neg) and pos + flag[len(neg):] in opts:
                return m.group(2) is None
        return False
    m = re.match(r"^([A-Z_][A-Z0-9_]*)=", arg)
    return bool(m) and m.group(1) in envs


# ---- the checks -------------------------------------------------------------

DEP_VERSIONS = {"python": "3.11.4", "llvm": "14.0.6", "sundials": "6.4.1"}


def concretize(cls, variants):
    """A concrete spec of the recipe: its dependencies active under these
    variants (and their names for the providers of virtuals)."""
    spec = Spec("kiln", next(iter(cls.versions)), variants, {})
    active = [(name, t) for name, cond, t in cls.dependencies if spec.satisfies(cond)]
    for name, _t in active:
        base = re.split(r"[@\s+~]", name, 1)[0]
        spec.deps[base] = Dep(base, DEP_VERSIONS.get(base, "1.0"))
    return spec, active


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KILN_SRCDIR", ".")
    repo = sys.argv[2] if len(sys.argv) > 2 else os.path.join(src, "tools", "spack")
    if not os.path.exists(os.path.join(src, "configure")):
        print("1..0 # SKIP no configure in %s (run autoreconf -fi)" % src)
        return 0
    try:
        opts, envs = configure_help(src)
    except (OSError, subprocess.CalledProcessError) as e:
        ok(False, "configure --help runs (%s)" % e)
        print("1..%d" % _n)
        return 1

    # the repository: repo.yaml names a namespace, packages/NAME/package.py
    text = open(os.path.join(repo, "repo.yaml")).read()
    ok(re.search(r"^repo:\s*\n\s+namespace:\s*'?kiln'?\s*$", text, re.M) is not None,
       "tools/spack/repo.yaml declares the namespace kiln")

    kiln = load_recipe(os.path.join(repo, "packages", "kiln", "package.py"), "kiln_recipe")
    Kiln = kiln.Kiln
    ok(issubclass(Kiln, AutotoolsPackage), "Kiln is an AutotoolsPackage")
    libtcc = load_recipe(os.path.join(repo, "packages", "kiln-libtcc", "package.py"),
                         "kiln_libtcc_recipe")
    KilnLibtcc = libtcc.KilnLibtcc
    ok(all(re.fullmatch(r"[0-9a-f]{64}", v.get("sha256", ""))
           for v in KilnLibtcc.versions.values()) and KilnLibtcc.versions,
       "kiln-libtcc: every version has a sha256")

    ac_version = re.search(r"AC_INIT\(\[kiln\],\s*\[([^]]+)\]",
                           open(os.path.join(src, "configure.ac")).read()).group(1)
    ok(ac_version in Kiln.versions,
       "the recipe's version %s is configure.ac's (%s)" % (list(Kiln.versions), ac_version))

    want_variants = {"tcc", "llvm", "mpi", "ode", "python"}
    ok(set(Kiln.variants) == want_variants,
       "variants: %s" % sorted(Kiln.variants))
    bools = sorted(v for v, k in Kiln.variants.items() if isinstance(k.get("default"), bool))
    ok(bools == sorted(Kiln.variants), "every variant is boolean")

    # what each variant must give configure, on and off
    expect = {
        "tcc": (lambda s: "--with-tcc=" + s["kiln-libtcc"].prefix, "--without-tcc"),
        "llvm": (lambda s: "--with-llvm=" + s["llvm"].prefix, "--without-llvm"),
        "mpi": (lambda s: "--with-mpi", "--without-mpi"),
        "ode": (lambda s: "--with-sundials", "--without-sundials"),
        "python": (lambda s: "PYTHON=" + s["python"].command.path, "PYTHON=:"),
    }
    # the dependencies each variant brings (name as written, with versions)
    expect_deps = {
        "tcc": ["kiln-libtcc"],
        "llvm": ["llvm@14"],
        "mpi": ["mpi"],
        "ode": ["sundials@6 precision=double"],
        "python": ["python@3.6:", "py-numpy"],
    }
    always = ["libyaml", "json-c", "xxhash", "blas", "lapack", "pkgconfig"]

    bad_flags, bad_map, bad_deps, bad_blas = [], [], [], []
    combos = list(itertools.product([False, True], repeat=len(bools)))
    for values in combos:
        variants = dict(zip(bools, values))
        spec, active = concretize(Kiln, variants)
        args = Kiln(spec).configure_args()
        label = " ".join(("+" if variants[v] else "~") + v for v in bools)
        for a in args:
            if not accepted(a, opts, envs):
                bad_flags.append("%s: %s" % (label, a))
        for v in bools:
            on, off = expect[v]
            want = on(spec) if variants[v] else off
            if want not in args:
                bad_map.append("%s: %s missing from %s" % (label, want, args))
            other = off if variants[v] else None
            if other is not None and other in args:
                bad_map.append("%s: %s given with +%s" % (label, other, v))
        if len([a for a in args if a.startswith("PYTHON=")]) != 1:
            bad_map.append("%s: PYTHON= not given exactly once: %s" % (label, args))
        names = [n for n, _t in active]
        for v in bools:
            for d in expect_deps[v]:
                if (d in names) != variants[v]:
                    bad_deps.append("%s: %s %s" % (label, d, "missing" if variants[v] else "present"))
        for d in always:
            if d not in names:
                bad_deps.append("%s: %s missing" % (label, d))
        blas = [a for a in args if a.startswith("--with-blas=")]
        if len(blas) != 1 or "-llapack" not in blas[0] or "-lblas" not in blas[0]:
            bad_blas.append("%s: %s" % (label, blas))
    n = len(combos)
    ok(not bad_flags, "%d variant combinations: every flag is in configure --help" % n)
    for b in bad_flags[:10]:
        diag(b)
    ok(not bad_map, "%d variant combinations: each variant maps to its flag" % n)
    for b in bad_map[:10]:
        diag(b)
    ok(not bad_deps, "%d variant combinations: the dependencies follow the variants" % n)
    for b in bad_deps[:10]:
        diag(b)
    ok(not bad_blas, "--with-blas= carries the lapack and blas providers' libraries")
    for b in bad_blas[:10]:
        diag(b)

    # configure accepts LLVM 14 only: the recipe must not allow another
    llvm = [n for n, c, _t in Kiln.dependencies if n.startswith("llvm")]
    ok(llvm == ["llvm@14"], "llvm is pinned to 14, what configure accepts (%s)" % llvm)
    # python and numpy are needed when kiln runs, not only to build it
    types_ = {n: t for n, c, t in Kiln.dependencies}
    ok("run" in types_.get("python@3.6:", ()) and "run" in types_.get("py-numpy", ()),
       "python and py-numpy are run dependencies")

    # the model of the DSL itself can fail: a flag configure does not know
    ok(not accepted("--with-cuda", opts, envs) and not accepted("--enable-llvm", opts, envs)
       and not accepted("NOSUCHVAR=1", opts, envs) and accepted("--without-tcc", opts, envs),
       "the checker refuses flags configure does not list")

    # run environment: PYTHONPATH points at $(pythondir)
    spec, _ = concretize(Kiln, {v: True for v in bools})
    calls = []
    env = types.SimpleNamespace(prepend_path=lambda k, v: calls.append((k, v)),
                                set=lambda k, v: calls.append((k, v)))
    Kiln(spec).setup_run_environment(env)
    ok(("PYTHONPATH", "/spack/opt/kiln-hash/lib/python3.11/site-packages") in calls,
       "+python: PYTHONPATH is the install's site-packages (%s)" % calls)

    print("1..%d" % _n)
    return 1 if _failed else 0


if __name__ == "__main__":
    sys.exit(main())
