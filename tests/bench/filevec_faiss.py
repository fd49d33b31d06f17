#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""FAISS IndexFlatIP on the vectors filevec_bench wrote, one thread.

Run by filevec_bench (tests/bench/filevec_bench.c) in the same run, with
Debian's python3 and python3-faiss. Reads DIR/vectors.f32 and
DIR/queries.f32 (raw float32), times one search per query (nq = 1, as a
memd query is), and compares FAISS's top-k with DIR/filevec_top.txt.
Prints details, then "faiss_ms_median <ms> min <ms> recall <fraction>".
"""
import argparse
import statistics
import sys
import time

try:
    import faiss
    import numpy as np
except ImportError as e:  # reported by filevec_bench
    sys.exit(f"filevec_faiss.py: {e} (apt-get install python3-faiss python3-numpy)")

WARMUP = 5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--queries", type=int, required=True)
    ap.add_argument("--k", type=int, required=True)
    a = ap.parse_args()

    faiss.omp_set_num_threads(1)
    xb = np.fromfile(f"{a.dir}/vectors.f32", dtype="<f4").reshape(a.n, a.dim)
    xq = np.fromfile(f"{a.dir}/queries.f32", dtype="<f4").reshape(a.queries, a.dim)
    index = faiss.IndexFlatIP(a.dim)
    index.add(xb)

    for i in range(WARMUP):
        index.search(xq[i:i + 1], a.k)
    ms = []
    found = []
    for i in range(a.queries):
        q = xq[i:i + 1]
        t0 = time.perf_counter()
        _, ids = index.search(q, a.k)
        ms.append((time.perf_counter() - t0) * 1e3)
        found.append(ids[0])

    ours = []
    with open(f"{a.dir}/filevec_top.txt") as f:
        for line in f:
            ours.append([int(x) for x in line.split()])
    same = sum(len(set(map(int, fa)) & set(fv)) for fa, fv in zip(found, ours))
    recall = same / (a.k * a.queries)
    print(f"  faiss {faiss.__version__}: {a.queries} single-query searches, "
          f"omp threads {faiss.omp_get_max_threads()}")
    print(f"faiss_ms_median {statistics.median(ms):.3f} min {min(ms):.3f} recall {recall:.4f}")


if __name__ == "__main__":
    main()
