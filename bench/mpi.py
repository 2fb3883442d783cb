#!/usr/bin/env python3
"""bench/mpi.py — make bench-mpi: log densities and gradients over MPI
ranks (issue 30; docs/performance.md "MPI (issue 30)", docs/hpc.md).

usage: mpi.py BUILDDIR [--quick] [--seconds S] [--only WHAT,...]
WHAT: allreduce, stream, grad, cold (default: all four).

Every process runs with one BLAS/OpenMP thread (OPENBLAS_NUM_THREADS=1,
OMP_NUM_THREADS=1), ranks are bound one per core (mpirun --bind-to core)
and the serial process is pinned to core 0 (taskset): "1 rank" and
"serial" are one core each, as every rank of "2 ranks" is.

0. stream: the memory read bandwidth of 1 and 2 ranks streaming 400 MB
   each at once (bench/mpi_stream.c): a gradient that is bound by memory
   bandwidth (the 10^7 regression reads its 400 MB design matrix twice)
   cannot gain more from the second core than this ratio.
1. allreduce: MPI_Allreduce and MPI_Bcast of k doubles, k = 2..10^4, on 2
   ranks (bench/mpi_allreduce.c): this machine's shared memory, a lower
   bound for the scaling model of docs/hpc.md.
2. grad: time per gradient (kiln_mpi_log_density: broadcast of the point,
   each rank's part, allreduce) of a generated regression with 10^6 and
   10^7 observations (y ~ normal(alpha + X beta, sigma), X: N x 5, data in
   .npy files bound by the .kg) and of posteriordb's radon_all
   (radon_hierarchical_intercept_noncentered), serially (no MPI), on 1
   and 2 ranks, and on 4 ranks oversubscribed (2 cores: for correctness
   only).  Every run's log density and gradient are compared with the
   serial one's (max |a - b| / max |b|, must be <= 1e-12).  Every kernel
   on llvm (--backend llvm: no tiers, so every rank times llvm's code), a
   warm cache (one untimed run first), so these are not compile times.
3. cold: cold start on one empty cache per run, serial and 1, 2, 4, 8
   ranks, with every kernel compiled by llvm at the start (--backend llvm)
   and, for radon_all, with the default policy (tier 0 first, tier-ups in
   the background while the program runs): wall seconds of the whole job (mpirun included), total CPU
   seconds of every process (getrusage of the children: mpirun and the
   ranks), the ranks' own CPU, and the compiles: kiln_compile_count
   summed over the ranks (during the build, from kiln_mpi_model_compiles,
   and over the whole run) and the cache's misses (the job's total on its
   own empty cache).

Data go to BUILDDIR/bench-mpi/ (reused when there).  As root, Open MPI
needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1: set here.
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# every kernel compiled with llvm when the model is made (no tiers): the
# timed calls run llvm's code on every rank, and a cold start does all the
# compile work up front (where compiling once per job matters)
LLVM = ["--backend", "llvm"]
K = 5  # covariates of the generated regression


def die(msg):
    print("bench-mpi: " + msg, file=sys.stderr)
    sys.exit(1)


def regression(workdir, n):
    """The generated regression with n observations: a .kg binding X.npy and
    y.npy next to it (made once, with numpy)."""
    d = os.path.join(workdir, "reg%d" % n)
    kg = os.path.join(d, "regression.kg")
    if os.path.exists(kg) and os.path.exists(os.path.join(d, "y.npy")):
        return kg
    import numpy as np
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(30)
    X = rng.standard_normal((n, K))
    beta = np.linspace(-1.0, 1.0, K)
    y = 0.5 + X @ beta + 0.8 * rng.standard_normal(n)
    np.save(os.path.join(d, "X.npy"), X)
    np.save(os.path.join(d, "y.npy"), y)
    with open(kg + ".tmp", "w") as f:
        f.write("""kiln 1
# bench/mpi.py: a generated linear regression, %d observations, %d covariates
graph regression
  shared X: f64[N, %d] = npy("X.npy")
  shared y: f64[N] = npy("y.npy")
  param alpha: f64
  param beta: f64[%d]
  param sigma: f64 lower=0
  lp_prior = add(add(normal_lpdf(alpha, 0, 10), normal_lpdf(beta, 0, 10)), normal_lpdf(sigma, 0, 5))
  output logp = add(lp_prior, normal_lpdf(y, add(alpha, dot(X, beta)), sigma))
end
""" % (n, K, K, K))
    os.replace(kg + ".tmp", kg)
    return kg


def mpirun_cmd(np_):
    """mpirun for np_ ranks on this machine: one rank per core while there
    are cores, else oversubscribed and unbound."""
    cores = os.cpu_count() or 1
    cmd = ["mpirun", "-np", str(np_)]
    if np_ > cores:
        cmd += ["--oversubscribe", "--bind-to", "none"]
    else:
        cmd += ["--bind-to", "core"]
    return cmd


def pinned(cmd):
    """cmd pinned to core 0 (taskset), as mpirun --bind-to core pins a rank:
    a serial process gets one core, like one rank."""
    if shutil.which("taskset"):
        return ["taskset", "-c", "0"] + cmd
    return cmd


def run(cmd, env):
    """Run cmd; return (stdout, wall seconds, CPU seconds of the children)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        die("%s failed (exit %d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return p.stdout, wall, cpu


def parse(line):
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}


def read_point(path):
    with open(path) as f:
        return [float(x) for x in f.read().split()]


def rel_err(a, b):
    scale = max(abs(x) for x in b) or 1.0
    return max(abs(x - y) for x, y in zip(a, b)) / scale


def fresh_cache(parent):
    d = tempfile.mkdtemp(prefix="cache-", dir=parent)
    os.chmod(d, 0o700)
    return d


# Interconnects for the paper model (docs/hpc.md, "Scaling on paper"):
# name, alpha (s, one message's latency through MPI), bandwidth (bytes/s).
# Bandwidths are the links' published rates; the latencies are typical
# MPI small-message figures (see docs/hpc.md for the sources and which
# are assumptions).
NETS = [
    ("InfiniBand HDR (200 Gb/s)", 1.0e-6, 25e9),
    ("InfiniBand NDR (400 Gb/s)", 1.0e-6, 50e9),
    ("HPE Slingshot-11 (200 Gb/s)", 2.0e-6, 25e9),
    ("100 GbE, RoCE v2", 2.0e-6, 12.5e9),
    ("100 GbE, TCP", 25e-6, 12.5e9),
]
PAPER_N = 10 ** 8
PAPER_D = 7  # alpha, beta[5], sigma


def collectives(p, alpha, bw, d=PAPER_D):
    """Broadcast of d doubles (binomial tree) plus allreduce of d + 1
    doubles (recursive doubling): ceil(log2 p) steps each of alpha + n beta
    (Thakur, Rabenseifner & Gropp 2005); the reduction's n gamma is
    nanoseconds for 64 bytes and left out."""
    steps = (p - 1).bit_length()  # ceil(log2 p)
    return steps * (alpha + 8 * d / bw) + steps * (alpha + 8 * (d + 1) / bw)


def paper(serial_ms, shm):
    """T(P) = t0 + t_obs N / P + T_bcast + T_allreduce for N = 10^8."""
    # t_obs from the largest regression, t0 (the call's fixed cost) from
    # the smallest, less its observations' share
    ns = sorted(serial_ms)
    t_obs = serial_ms[ns[-1]] / 1e3 / ns[-1]
    t0 = max(serial_ms[ns[0]] / 1e3 - t_obs * ns[0], 0.0) if len(ns) > 1 else 0.0
    print("\n## Scaling on paper: N = 10^8 observations, %d parameters\n" % PAPER_D)
    print("t_obs = %.2f ns per observation (regression 10^%d, serial, llvm), "
          "t0 = %.1f us per call (regression 10^%d less its observations)" %
          (t_obs * 1e9, len(str(ns[-1])) - 1, t0 * 1e6, len(str(ns[0])) - 1))
    if 10 in shm:
        print("this machine's MPI_Allreduce of 10 doubles, 2 ranks (one step): "
              "%.2f us, MPI_Bcast %.2f us (fastest batches)" % shm[10])
    ps = [1, 16, 256, 4096]
    print("\n| interconnect | " + " | ".join("P = %d" % p for p in ps) +
          " | collectives = t_obs N / P at P |")
    print("|---|" + "---:|" * (len(ps) + 1))
    for name, alpha, bw in NETS:
        cells = []
        for p in ps:
            comp = t0 + t_obs * PAPER_N / p
            comm = collectives(p, alpha, bw)
            cells.append("%.4g ms (%.1f %% comm.)" % ((comp + comm) * 1e3,
                                                     100 * comm / (comp + comm)))
        # the smallest power of two where the collectives cost as much as
        # the rank's share of the observations (t0 aside: it never shrinks)
        p = 1
        while p < 1 << 40 and collectives(p, alpha, bw) < t_obs * PAPER_N / p:
            p *= 2
        print("| %s | %s | %d |" % (name, " | ".join(cells), p))


def main():
    args = sys.argv[1:]
    if not args:
        die("usage: mpi.py BUILDDIR [--quick] [--seconds S] [--only WHAT,...]")
    build = os.path.abspath(args[0])
    quick = "--quick" in args
    seconds = 1.0 if quick else 3.0
    only = {"allreduce", "stream", "grad", "cold"}
    for i, a in enumerate(args):
        if a == "--seconds":
            seconds = float(args[i + 1])
        if a == "--only":
            only = set(args[i + 1].split(","))
    bench = os.path.join(build, "bench", "bench_mpi")
    allreduce = os.path.join(build, "bench", "mpi_allreduce")
    stream = os.path.join(build, "bench", "mpi_stream")
    for p in (bench, allreduce, stream):
        if not os.access(p, os.X_OK):
            die("%s is not built (make bench-mpi builds it; configure --with-mpi)" % p)
    if not shutil.which("mpirun"):
        die("no mpirun on PATH")
    env = dict(os.environ)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    for k in ("KILN_CACHE", "KILN_CACHE_PATH", "KILN_BACKEND", "KILN_POLICY"):
        env.pop(k, None)
    # One BLAS/OpenMP thread per process: otherwise OpenBLAS gives the one
    # process both cores for X @ beta and X^T r, and "1 rank" is 2 cores.
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    work = os.path.join(build, "bench-mpi")
    os.makedirs(work, exist_ok=True)
    try:
        load = open("/proc/loadavg").read().split()[0]
    except OSError:
        load = "?"
    print("# bench-mpi: %s, %d cores, load average %s at the start" %
          (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count() or 0, load))

    shm = {}     # k -> (allreduce fastest batch, bcast fastest batch), us
    serial_ms = {}   # observations -> serial ms per gradient
    if "allreduce" in only:
        out, _w, _c = run(mpirun_cmd(2) + [allreduce, "0.3" if quick else "1.0"], env)
        print("\n## MPI_Allreduce / MPI_Bcast of k doubles, 2 ranks (this machine)\n")
        print("| k | bytes | allreduce, median (us) | allreduce, fastest batch (us) "
              "| bcast, median (us) | bcast, fastest batch (us) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for line in out.splitlines():
            r = parse(line)
            if "k" in r:
                shm[int(r["k"])] = (float(r["allreduce_min_us"]), float(r["bcast_min_us"]))
                print("| %s | %s | %s | %s | %s | %s |" %
                      (r["k"], r["bytes"], r["allreduce_us"], r["allreduce_min_us"],
                       r["bcast_us"], r["bcast_min_us"]))

    if "stream" in only:
        # the ceiling of a memory-bound gradient's speed-up: what two cores
        # read together over what one reads alone
        print("\n## Memory read bandwidth, R ranks streaming at once (mpi_stream, 400 MB per rank)\n")
        print("| ranks | GB/s per rank (min-max) | GB/s, all ranks | vs 1 rank |")
        print("|---:|---:|---:|---:|")
        one = None
        for np_ in (1, 2):
            out, _w, _c = run(mpirun_cmd(np_) + [stream, "400", "5" if quick else "10"], env)
            r = parse(out)
            tot = float(r["gbs_total"])
            one = one or tot
            print("| %d | %s-%s | %.1f | %.2f |" % (np_, r["gbs_rank_min"], r["gbs_rank_max"],
                                                  tot, tot / one))

    pdb = os.path.join(SRC, "examples", "posteriordb")
    models = [("regression 10^3", regression(work, 10 ** 3), "-"),
              ("regression 10^6", regression(work, 10 ** 6), "-")]
    if not quick:  # --quick: not the 10^7 one (400 MB of data)
        models.append(("regression 10^7", regression(work, 10 ** 7), "-"))
    models.append(("radon_all (hierarchical intercept, noncentered)",
                   os.path.join(pdb, "radon_hierarchical_intercept_noncentered.kg"),
                   os.path.join(pdb, "data", "radon_all.json")))
    bad = []

    if "grad" in only:
        print("\n## Time per gradient (kiln_mpi_log_density), warm cache\n")
        print("| model | ranks | ms per gradient | speed-up vs serial | max rel. error vs serial |")
        print("|---|---:|---:|---:|---:|")
        cache = fresh_cache(work)
        env_g = dict(env, KILN_CACHE_DIR=cache)
        for name, kg, data in models:
            ser_pt = os.path.join(work, "point-serial.txt")
            # untimed: fills the cache
            run(pinned([bench, kg, data, "--serial", "--seconds", "0"] + LLVM), env_g)
            out, _w, _c = run(pinned([bench, kg, data, "--serial", "--seconds", str(seconds),
                                      "--out", ser_pt] + LLVM), env_g)
            ser = parse(out)
            base = float(ser["ms_per_grad"])
            m = re.match(r"regression 10\^(\d+)$", name)
            if m:
                serial_ms[10 ** int(m.group(1))] = base
            want = read_point(ser_pt)
            print("| %s | serial | %.3f | 1.00 | |" % (name, base))
            for np_ in (1, 2, 4):
                pt = os.path.join(work, "point-%d.txt" % np_)
                out, _w, _c = run(mpirun_cmd(np_) + [bench, kg, data, "--axis", "N",
                                                     "--seconds", str(seconds), "--out", pt]
                                  + LLVM, env_g)
                r = parse(out)
                ms = float(r["ms_per_grad"])
                err = rel_err(read_point(pt), want)
                if err > 1e-12:
                    bad.append("%s, %d ranks: relative error %.3g" % (name, np_, err))
                note = " (oversubscribed)" if np_ > (os.cpu_count() or 1) else ""
                print("| %s | %d%s | %.3f | %.2f | %.2g |" % (name, np_, note, ms, base / ms, err))
        shutil.rmtree(cache, ignore_errors=True)

    if "cold" in only:
        print("\n## Cold start on one empty cache\n")
        print("| model | ranks | wall (s) | CPU, all processes (s) | CPU, ranks (s) "
              "| build (s) | compiles in the build | compiles, whole run | cache misses |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        runs = [(models[0], LLVM, "llvm"), (models[-1], LLVM, "llvm"),
                (models[-1], [], "policy")]
        for (name, kg, data), flags, how in runs:
            for np_ in (0, 1, 2, 4, 8):
                cache = fresh_cache(work)
                env_c = dict(env, KILN_CACHE_DIR=cache)
                if np_ == 0:
                    cmd = [bench, kg, data, "--serial", "--seconds", "0"] + flags
                else:
                    cmd = mpirun_cmd(np_) + [bench, kg, data, "--axis", "N",
                                             "--seconds", "0"] + flags
                out, wall, cpu = run(cmd, env_c)
                r = parse(out)
                label = "serial" if np_ == 0 else str(np_) + (
                    " (oversubscribed)" if np_ > (os.cpu_count() or 1) else "")
                print("| %s, %s | %s | %.2f | %.2f | %s | %s | %s | %s | %s |" %
                      (name, how, label, wall, cpu, r["cpu_s"], r["build_s"],
                       r["compiles_build"], r["compiles"], r["misses"]))
                shutil.rmtree(cache, ignore_errors=True)

    if serial_ms:
        paper(serial_ms, shm)

    if bad:
        for b in bad:
            print("bench-mpi: NOT EQUAL: " + b, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
