#!/usr/bin/env python3
"""Write one of PyTorch's own pipeline schedules as its compute-only CSV.

    python dump_pytorch_schedule.py --schedule NAME --ranks P --microbatches M \
        [--stages-per-rank V] --out FILE

NAME is a class torch.distributed.pipelining.schedules.get_schedule_class knows (ZBVZeroBubble,
Interleaved1F1B, DualPipeV, ...). The schedule is built for rank 0 of P with stand-in stages (no
process group: the constructor computes every rank's compute actions, pipeline_order) and
written with its own _dump_csv(format="compute_only"): one row per rank, PyTorch's cells; FILE.placement
holds each stage's rank as PyTorch maps it (generate_stage_to_rank_mapping). paci
then reads the file as any PyTorch CSV (tests/interop/run_matrix.py). Output: the file, and one
line `pytorch-schedule: ok ...` (exit 0) or `pytorch-schedule: FAIL ...` (exit 1).
"""

from __future__ import annotations

import argparse
import sys
import types


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--microbatches", type=int, required=True)
    ap.add_argument("--stages-per-rank", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    from torch.distributed.pipelining import schedules as S
    from torch.distributed.pipelining._utils import generate_stage_to_rank_mapping

    try:
        cls = S.get_schedule_class(a.schedule)
        p, v = a.ranks, a.stages_per_rank
        n = p * v
        style = "v" if a.schedule in ("ZBVZeroBubble", "DualPipeV") else "loop"
        ranks = generate_stage_to_rank_mapping(p, n, style=style)
        stages = [types.SimpleNamespace(stage_index=s, num_stages=n, group_size=p, group_rank=0,
                                        submod=torch.nn.Identity(),
                                        stage_index_to_group_rank=None, is_first=s == 0,
                                        is_last=s == n - 1)
                  for s in range(n) if ranks[s] == 0]
        sched = cls(stages, a.microbatches, loss_fn=lambda y, t: (y - t).pow(2).mean())
        sched._dump_csv(a.out, format="compute_only")
        with open(a.out + ".placement", "w") as f:  # stage s's rank, one line, comma-separated
            f.write(",".join(str(ranks[s]) for s in range(n)) + "\n")
    except Exception as e:  # noqa: BLE001
        text = str(e).strip().splitlines()
        print(f"pytorch-schedule: FAIL {a.schedule}: {type(e).__name__}: {text[0] if text else ''}")
        return 1
    print(f"pytorch-schedule: ok {a.schedule} P={p} stages={n} M={a.microbatches} ({style})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
