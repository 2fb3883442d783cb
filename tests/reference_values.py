#!/usr/bin/env python3
"""Independent reference values for tests/test_cli.sh.

Computed with Python's math module straight from the model formulas in the
.kg comments and the CSV file, sharing no code with kiln:
    python3 tests/reference_values.py
prints the radon logp at the README's point and eight schools' logp at the
origin.
"""
import csv
import math
import os

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C = 0.5 * math.log(2 * math.pi)


def normal(x, m, s):
    return -0.5 * ((x - m) / s) ** 2 - math.log(s) - C


rows = list(csv.DictReader(open(os.path.join(top, "examples/data/radon.csv"))))
mu_a, lsa, b, lsy = 1.5, -0.5, -0.7, -0.3
sa, sy = math.exp(lsa), math.exp(lsy)
lp = normal(mu_a, 0, 10) + 85 * normal(0, 0, 1) + normal(b, 0, 10)
lp += math.log(2) + normal(sa, 0, 5) + lsa + math.log(2) + normal(sy, 0, 5) + lsy
for r in rows:  # a_t = 0, so a_j = mu_a for every county
    lp += normal(float(r["log_radon"]), mu_a + b * float(r["floor"]), sy)
print("radon", repr(lp))

y = [28, 8, -3, 7, -1, 1, 18, 12]
s = [15, 10, 16, 11, 9, 11, 10, 18]
lp = normal(0, 0, 5) + math.log(2) - math.log(math.pi) - math.log(5) - math.log1p(1 / 25)
lp += 8 * normal(0, 0, 1) + sum(normal(y[j], 0, s[j]) for j in range(8))
print("eight_schools", repr(lp))
