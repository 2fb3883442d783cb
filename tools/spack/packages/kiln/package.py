# kiln's Spack recipe (docs/hpc.md "Spack"; issue 30 item 3).
#
# Written against Spack's documented package API (the Packaging Guide and
# "Build Systems: Autotools"): directives version/variant/depends_on/
# conflicts, AutotoolsPackage.configure_args, with_or_without.  Every flag
# it gives configure is one `./configure --help` lists: tests/
# test_spack_recipe.py loads this file against a small model of Spack's
# DSL and checks that, for every combination of the variants.
#
#   spack repo add tools/spack
#   spack install kiln +mpi +llvm          (after a version is fetchable:
#                                           see "Versions" below)
from spack.package import *  # noqa: F401,F403  the package API

try:  # Spack >= 1.0: the build systems live in the builtin repository
    from spack_repo.builtin.build_systems.autotools import AutotoolsPackage  # noqa: F811
except ImportError:  # Spack 0.x: spack.package exports them
    pass


class Kiln(AutotoolsPackage):
    """A per-node compiler for tensor computation graphs and statistical
    models: interpreter, tcc and LLVM backends, a disk cache of compiled
    kernels shareable read-only across a cluster, BridgeStan libraries,
    and (+mpi) log densities and gradients summed over MPI ranks."""

    # Versions.  kiln has no public release tarball yet: a site builds a
    # checkout with `spack develop` (docs/hpc.md), or hosts the tarball
    # `make dist` makes and adds `url` and the version's sha256 here.
    version("0.1.0")

    # A checkout has no configure script: Spack's autoreconf phase makes
    # it (Spack runs autoreconf when configure is missing).
    depends_on("autoconf", type="build")
    depends_on("automake@1.16:", type="build")
    depends_on("libtool", type="build")
    depends_on("m4", type="build")
    depends_on("pkgconfig", type="build")

    # kiln builds out of the source tree (the checkout stays clean).
    build_directory = "spack-build"

    variant("tcc", default=True,
            description="the tcc backend (fast compiles; needs a PIC libtcc.so: kiln-libtcc)")
    variant("llvm", default=True,
            description="the llvm backend (LLVM 14's C API; optimised code, tier-up)")
    variant("mpi", default=False,
            description="libkiln-mpi and `kiln run --mpi-axis`: data-parallel log densities over MPI")
    variant("ode", default=True,
            description="the ODE ops (ode_rk45, ode_bdf) through SUNDIALS 6 CVODES and ARKODE")
    variant("python", default=True,
            description="install the Python package (ctypes + numpy) for this Python")

    # Always: YAML (policies), CmdStan JSON data, XXH3 cache keys, a CBLAS
    # and LAPACK.  The BLAS provider must carry CBLAS (cblas.h and
    # cblas_dgemm): OpenBLAS, BLIS, AMD AOCL-BLIS, Intel MKL do;
    # configure stops with "no cblas_dgemm with these flags" otherwise.
    depends_on("libyaml")
    depends_on("json-c")
    depends_on("xxhash")
    depends_on("blas")
    depends_on("lapack")

    # The tcc backend is a dlopen'ed plugin and needs tcc's shared,
    # position-independent libtcc.so (distributions ship a non-PIC
    # libtcc.a): the kiln-libtcc package next to this one builds it the
    # way tools/build-libtcc.sh does.
    depends_on("kiln-libtcc", when="+tcc")
    # configure accepts LLVM 14 only (its C API of that release).
    depends_on("llvm@14", when="+llvm")
    depends_on("mpi", when="+mpi")
    depends_on("sundials@6 precision=double", when="+ode")
    depends_on("python@3.6:", type=("build", "run"), when="+python")
    depends_on("py-numpy", type="run", when="+python")

    def configure_args(self):
        spec = self.spec
        args = []
        # BLAS and LAPACK as linker flags (--with-blas=FLAGS); LAPACK's
        # dpotrf_ is then found in them.
        libs = spec["lapack"].libs + spec["blas"].libs
        args.append("--with-blas={0}".format(libs.ld_flags))
        # --with-tcc=DIR (DIR/include/libtcc.h, DIR/lib/libtcc.so)
        args.extend(self.with_or_without("tcc", activation_value=self._dep_prefix("kiln-libtcc")))
        # --with-llvm=DIR: configure runs DIR/bin/llvm-config
        args.extend(self.with_or_without("llvm", activation_value="prefix"))
        args.extend(self.with_or_without("mpi"))
        args.extend(self.with_or_without("sundials", variant="ode"))
        # PYTHON=: is configure's "no Python": the package is not installed
        # (otherwise configure would take whichever python3 it finds)
        if spec.satisfies("+python"):
            args.append("PYTHON={0}".format(spec["python"].command.path))
        else:
            args.append("PYTHON=:")
        return args

    def _dep_prefix(self, name):
        """An activation_value for with_or_without: the prefix of the
        dependency `name` (the variant is named after what it enables,
        not after the package providing it)."""
        return lambda _value: str(self.spec[name].prefix)

    def setup_run_environment(self, env):
        # The Python package is installed in $(pythondir).
        if self.spec.satisfies("+python"):
            env.prepend_path(
                "PYTHONPATH",
                join_path(self.prefix.lib,
                          "python{0}".format(self.spec["python"].version.up_to(2)),
                          "site-packages"))
