# The PIC libtcc.so kiln's tcc backend needs (docs/hpc.md "Spack"), built
# the way tools/build-libtcc.sh builds it: tcc's own configure with
# --disable-static, then `make libtcc.so`; installs lib/libtcc.so,
# include/libtcc.h and VERSION (what `configure --with-tcc=DIR` reads).
#
# Source: the tcc release Debian 12 ships (0.9.27+git20200814.62c30a4a),
# Debian's upstream tarball, checksum from Debian's signed Sources index.
# Debian's own patches (manual pages, hardening flags of the tcc binary)
# are not applied: kiln uses only the library.
from spack.package import *  # noqa: F401,F403  the package API


class KilnLibtcc(Package):
    """tcc's libtcc as a shared, position-independent library, for kiln's
    tcc backend (a dlopen'ed plugin cannot link the non-PIC libtcc.a)."""

    homepage = "https://bellard.org/tcc/"
    url = ("https://deb.debian.org/debian/pool/main/t/tcc/"
           "tcc_0.9.27%2Bgit20200814.62c30a4a.orig.tar.bz2")

    version("0.9.27-git20200814",
            sha256="d63c113bcdd657f51c8ee197a0b0a24203603313e19a52b5f678d40ab7f5df35",
            url=url)

    def install(self, spec, prefix):
        configure = Executable("./configure")
        configure("--prefix={0}".format(prefix), "--disable-static",
                  "--cc={0}".format(spack_cc))
        make("libtcc.so")
        mkdirp(prefix.lib)
        mkdirp(prefix.include)
        install("libtcc.so", prefix.lib)
        install("libtcc.h", prefix.include)
        install("VERSION", prefix)
