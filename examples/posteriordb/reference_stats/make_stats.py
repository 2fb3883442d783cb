"""make_stats.py — reduce posteriordb's reference draws to the summary
statistics tests/test_posteriordb_sample.py compares with, one small JSON
per posterior in this directory (NAME.json).

Usage: python3 make_stats.py DRAWS_DIR NAME...   (DRAWS_DIR holds
posteriordb's reference_draws/NAME.json.zip: a JSON list of chains, each
{"param[1]": [draws...]}; ../shared/posteriordb/reference_draws here).

Per parameter, over all chains' draws pooled: mean, sd (ddof 1), m4 (the
fourth central moment, for the standard error of sd), and ess_bulk, the
bulk effective sample size as Stan and posterior::ess_bulk define it
(Vehtari, Gelman, Simpson, Carpenter, Buerkner 2021): the chains split in
halves, the draws rank-normalised (Blom's fractional ranks through the
normal quantile), then the multi-chain ESS with autocorrelations from
FFTs and Geyer's initial monotone sequence.  posteriordb's own
NAME.info.json reports the same quantity (effective_sample_size_bulk);
it is printed next to ours as a check.
"""
import io
import json
import os
import statistics
import sys
import zipfile

import numpy as np


def autocov(x):
    """Autocovariances of x at lags 0..n-1 (biased, as Stan's)."""
    n = x.size
    m = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(x - x.mean(), m)
    return np.fft.irfft(f * np.conj(f), m)[:n] / n


def ess(chains):
    """Multi-chain ESS of chains (m, n), Stan's estimator."""
    m, n = chains.shape
    acov = np.array([autocov(c) for c in chains])
    w = acov[:, 0].mean() * n / (n - 1)                 # within-chain var
    var_plus = w * (n - 1) / n + (chains.mean(axis=1).var(ddof=1)
                                  if m > 1 else 0.0)
    rho = 1.0 - (w - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    # Geyer: sums of pairs while positive, made monotone
    t = 0
    pairs = []
    while t + 1 < n:
        p = rho[t] + rho[t + 1]
        if p <= 0:
            break
        pairs.append(p)
        t += 2
    for i in range(1, len(pairs)):
        pairs[i] = min(pairs[i], pairs[i - 1])
    tau = -1.0 + 2.0 * sum(pairs)
    return m * n / max(tau, 1.0 / np.log10(m * n))


def ess_bulk(chains):
    """Rank-normalised split-chain ESS of chains (m, n)."""
    m, n = chains.shape
    h = n // 2
    split = np.concatenate([chains[:, :h], chains[:, n - h:]])
    flat = split.ravel()
    order = flat.argsort(kind="stable")
    ranks = np.empty(flat.size)
    ranks[order] = np.arange(1, flat.size + 1)
    # average ranks of ties
    _, inv, cnt = np.unique(flat, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=ranks)
    ranks = (sums / cnt)[inv]
    nd = statistics.NormalDist()
    z = np.array([nd.inv_cdf(p) for p in (ranks - 0.375) / (flat.size + 0.25)])
    return ess(z.reshape(split.shape))


def stats_of(path):
    name = os.path.basename(path)[:-len(".json.zip")]
    with zipfile.ZipFile(path) as z:
        chains = json.load(io.TextIOWrapper(z.open(name + ".json")))
    out = {}
    for k in chains[0]:
        c = np.array([ch[k] for ch in chains], dtype=float)
        x = c.ravel()
        out[k] = {"mean": float(x.mean()), "sd": float(x.std(ddof=1)),
                  "m4": float(np.mean((x - x.mean()) ** 4)),
                  "ess_bulk": float(ess_bulk(c))}
    return name, len(chains), c.shape[1], out


def main():
    src = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sys.argv[2:]:
        name, m, n, st = stats_of(os.path.join(src, name + ".json.zip"))
        info = os.path.join(src, name + ".info.json")
        if os.path.exists(info):
            d = json.load(open(info))["diagnostics"]
            for k, e in zip(d["diagnostic_information"]["names"],
                            d["effective_sample_size_bulk"]):
                if k in st:
                    print("%s %s: ess_bulk %.1f (posteriordb %.1f)" %
                          (name, k, st[k]["ess_bulk"], e))
        doc = {"source": "posteriordb (https://github.com/stan-dev/"
                         "posteriordb, BSD-3-Clause) reference_draws/"
                         "%s.json.zip: Stan NUTS, %d chains x %d draws; "
                         "reduced by make_stats.py" %
                         (name, m, n),
               "n_draws": m * n, "stats": st}
        with open(os.path.join(here, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
