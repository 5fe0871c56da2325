#!/usr/bin/env python3
"""Write the compute-only CSV of a torch pipeline schedule as torchtitan 0.3.0
would build it for an args file (used to make test CSVs for
--parallelism.pipeline_parallel_schedule_csv).

    python dump_torchtitan_pp_csv.py --args-file FILE --world N --out OUT.csv

FILE must name a built-in multi-stage schedule (e.g. ZBVZeroBubble,
InterleavedZeroBubble) and no CSV.  Runs on fake process groups, no GPU.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("COLUMNS", "300")

import check_torchtitan as ct  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--args-file", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    words = ct._read_words(a.args_file)
    cfg, pd, schedule, parts = ct._run_one_rank(words, a.world, 0)
    if schedule is None or not hasattr(schedule, "_dump_csv"):
        print(f"no multi-stage schedule: {type(schedule).__name__}")
        return 1
    schedule._dump_csv(a.out, format="compute_only")
    print(f"wrote {a.out} ({type(schedule).__name__}, {len(schedule.pipeline_order)} ranks)")
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
