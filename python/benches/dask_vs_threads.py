"""A Dask campaign against the same runs on threads, on the same cores, in one run.

    python python/benches/dask_vs_threads.py [RUNS] [REPEATS]

Runs RUNS short runs (default 1000: 10 kB downloads over the MSS preset at its loss, one
seed each) REPEATS times (default 3) both ways: `qfec.lab.run(threads=N)` and
`qfec.lab.campaign(spec, client)` on a `LocalCluster` of N single-thread worker processes,
N = the machine's cores, alternating. Prints each wall time and the ratio of the medians
(Dask / threads); the cluster's start-up is outside the timing. Checks that both give the
same rows.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from dask.distributed import Client, LocalCluster

from qfec import lab


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    cores = os.cpu_count() or 1
    spec = dict(preset="mss", workload="files:10kB", seeds=runs)
    threads, dask = [], []
    with LocalCluster(
        n_workers=cores, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as client:
        client.wait_for_workers(cores)
        # Workers import the package once before the timed runs.
        lab.campaign(dict(spec, seeds=cores), client)
        for _ in range(repeats):
            t = time.perf_counter()
            a = lab.run(**spec, threads=cores)
            threads.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = lab.campaign(spec, client)
            dask.append(time.perf_counter() - t)
            assert a.drop(columns="wall_time_s").equals(b.drop(columns="wall_time_s"))
    simulated = a["completion_time_s"].sum()
    print(f"{runs} runs ({simulated:.0f} s simulated), {cores} cores, {repeats} repeats")
    print("threads:", " ".join(f"{x:.2f}" for x in threads), "s")
    print("dask:   ", " ".join(f"{x:.2f}" for x in dask), "s")
    print(f"dask / threads (medians): {statistics.median(dask) / statistics.median(threads):.2f}")


if __name__ == "__main__":
    main()
