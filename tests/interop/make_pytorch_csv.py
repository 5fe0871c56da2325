#!/usr/bin/env python3
"""Write the compute-only schedule CSV that PyTorch itself generates for a schedule class.

    python make_pytorch_csv.py CLASS P M [--stages-per-rank V] [-o FILE]

CLASS is a torch.distributed.pipelining schedule class name: ScheduleGPipe, Schedule1F1B
(single stage per rank), or ScheduleInterleaved1F1B, ScheduleLoopedBFS,
ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV (V stages per rank).
No process group is needed: the schedules are built on stub stages and their
``pipeline_order`` is written exactly as ``PipelineScheduleMulti._dump_csv`` does (csv.writer,
one row per rank, ``None`` -> empty cell).  For the single-stage classes, whose
``pipeline_order`` already contains REDUCE_GRAD/WAIT_REDUCE_GRAD (not compute-only, so PyTorch's
own compute_only loader refuses them), those two actions are dropped; pass --raw to keep them.
"""

from __future__ import annotations

import argparse
import csv
import sys
import types


def stub(index, num_stages, p, rank):
    import torch

    return types.SimpleNamespace(stage_index=index, num_stages=num_stages, group_size=p,
                                 group_rank=rank, submod=torch.nn.Identity(),
                                 stage_index_to_group_rank=None, is_first=index == 0,
                                 is_last=index == num_stages - 1)


def pipeline_order(name: str, p: int, m: int, v: int, raw: bool = False):
    from torch.distributed.pipelining import schedules as S
    from torch.distributed.pipelining._utils import generate_rank_to_stage_mapping

    cls = getattr(S, name, None)
    if cls is None or not isinstance(cls, type):
        raise SystemExit(f"make_pytorch_csv: no schedule class {name} in torch 2.15")
    loss = lambda out, tgt: out.sum()  # noqa: E731 - only makes the schedule a training one
    if issubclass(cls, S.PipelineScheduleSingle):
        if v != 1:
            raise SystemExit(f"make_pytorch_csv: {name} is single-stage; use --stages-per-rank 1")
        order = cls(stub(0, p, p, 0), m, loss_fn=loss).pipeline_order
        if not raw:
            order = {r: [a for a in acts if a is None or a.is_compute_op]
                     for r, acts in order.items()}
        return order
    style = "v" if name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV") else "loop"
    local = generate_rank_to_stage_mapping(p, p * v, style=style)[0]
    sched = cls([stub(s, p * v, p, 0) for s in local], m, loss_fn=loss)
    return sched.pipeline_order


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cls")
    ap.add_argument("P", type=int)
    ap.add_argument("M", type=int)
    ap.add_argument("--stages-per-rank", "-v", type=int, default=None,
                    help="default 1 for single-stage classes, 2 otherwise")
    ap.add_argument("--raw", action="store_true", help="keep REDUCE_GRAD actions")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    from torch.distributed.pipelining import schedules as S

    cls = getattr(S, a.cls, None)
    single = isinstance(cls, type) and issubclass(cls, S.PipelineScheduleSingle)
    v = a.stages_per_rank if a.stages_per_rank is not None else (1 if single else 2)
    order = pipeline_order(a.cls, a.P, a.M, v, a.raw)
    out = sys.stdout if a.output == "-" else open(a.output, "w", newline="")
    writer = csv.writer(out)
    for rank in order:  # as PipelineScheduleMulti._dump_csv
        writer.writerow(order[rank])
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
