"""Where a probe's time goes in the front (outside the worker): cProfile of ``dx.probe`` asked
of a warm worker (op trace on, no cache), in a front that has not imported Keras.

    python benchmarks/probe_profile.py numpy MultiHeadAttention     # backend, layer
    python benchmarks/probe_profile.py torch LSTM --repeats 20

Prints the wall time per probe, the front's own CPU per probe, and the profile by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from probe_wait import LAYERS  # benchmarks/, beside this script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend")
    parser.add_argument("layer", choices=sorted(LAYERS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    import dtype_explorer as dx

    kwargs, shapes, dtype = LAYERS[args.layer]

    def probe() -> object:
        result = dx.probe(
            args.layer,
            dtype,
            backend=args.backend,
            kwargs=kwargs,
            shape=list(shapes),
            use_cache=False,
        )
        assert result.status == "ok", result
        return result

    probe(), probe()  # the worker started, its caches filled
    profile = cProfile.Profile()
    wall, cpu = time.perf_counter(), time.process_time()
    profile.enable()
    for _ in range(args.repeats):
        result = probe()
    profile.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{args.backend} {args.layer}: {wall / args.repeats * 1000:.1f} ms wall a probe, front CPU "
        f"{cpu / args.repeats * 1000:.1f} ms, {len(result.trace)} trace steps"
    )
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.rows)


if __name__ == "__main__":
    main()
