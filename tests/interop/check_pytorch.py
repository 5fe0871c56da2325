#!/usr/bin/env python3
"""Run a compute-only pipeline schedule CSV through PyTorch's own pipelining runtime.

    python check_pytorch.py --csv FILE --microbatches M [--ranks P]

The CSV is read by PyTorch's loader (``_PipelineScheduleRuntime._load_csv(file,
format="compute_only")``), which parses every cell with ``_Action.from_str``, validates it
(``_validate_schedule``), infers the stage -> rank placement from the rows and lowers it to a
schedule with SEND/RECV/REDUCE_GRAD actions.  The script then runs ONE training step of a
tiny deterministic float64 model (one ``Linear(D, D)`` + ``tanh`` per stage, MSE loss) on a
gloo world of P CPU processes (127.0.0.1, a free port, forked workers) and compares every
micro-batch loss and every parameter gradient with a one-process reference over the same M
micro-batches: |pipeline - reference| <= atol + rtol * |reference| with atol = rtol = 1e-10.

Output: one line.  ``pytorch: ok ...`` and exit 0, or ``pytorch: FAIL <problem>`` and exit 1
(exit 2 for bad command-line use).  It never hangs: the process group has a timeout, and an
overall wall timeout (``--timeout``, 120 s) kills the workers.

Checks beyond PyTorch's own (``--strict``, on by default; PyTorch's validator counts distinct
micro-batches per stage, so it lets duplicates and out-of-range indices through to run time):
every (stage, kind, micro-batch) at most once, micro-batch indices in [0, M), no mixing of B
with I/W for one (stage, micro-batch), and ``--placement loop`` / ``v`` (default ``any``)
checks stage s sits on rank s % P (looped) or on PyTorch's V-shape rank.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import multiprocessing as mp
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
import types

DIM = 4  # width of every Linear
MB_SIZE = 2  # rows per micro-batch
SEED = 1234
ATOL = 1e-10
RTOL = 1e-10


def one_line(exc: BaseException) -> str:
    """First line of an exception message (PyTorch appends a whole formatted schedule)."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def fail(msg: str, code: int = 1) -> None:
    print(f"pytorch: FAIL {msg}", flush=True)
    sys.exit(code)


# --------------------------------------------------------------------------------------------
# Model and data (identical in every process).


def build_stage_modules(num_stages: int):
    import torch

    torch.manual_seed(SEED)
    mods = []
    for _ in range(num_stages):
        lin = torch.nn.Linear(DIM, DIM, dtype=torch.float64)
        mods.append(torch.nn.Sequential(lin, torch.nn.Tanh()))
    return mods


def build_data(m: int):
    import torch

    g = torch.Generator().manual_seed(SEED + 1)
    xs = [torch.randn(MB_SIZE, DIM, dtype=torch.float64, generator=g) for _ in range(m)]
    ts = [torch.randn(MB_SIZE, DIM, dtype=torch.float64, generator=g) for _ in range(m)]
    return xs, ts


def loss_fn(out, target):
    return ((out - target) ** 2).mean()


# --------------------------------------------------------------------------------------------
# Loading with PyTorch's own loader, without a process group (a dry run in the parent, so that
# a malformed CSV is reported without starting a world).


def fake_stage(index: int, num_stages: int, ranks: int, rank: int):
    import torch

    return types.SimpleNamespace(
        stage_index=index,
        num_stages=num_stages,
        group_size=ranks,
        group_rank=rank,
        submod=torch.nn.Identity(),
        stage_index_to_group_rank=None,
        is_first=index == 0,
        is_last=index == num_stages - 1,
    )


def read_cells(path: str) -> list[list[str]]:
    # The same reading PyTorch's _load_csv does: csv.reader, one row per rank.
    with open(path, newline="") as f:
        return [row for row in csv.reader(f)]


def dry_run_load(path: str, m: int, ranks: int | None, strict: bool, placement: str):
    """Returns (P, num_stages, stage_to_rank, per-rank compute-action counts) or fails."""
    from torch.distributed.pipelining import schedules as S

    try:
        rows = read_cells(path)
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        fail(f"cannot read {path}: {one_line(e)}")
    if not rows:
        fail(f"{path} is empty (PyTorch wants one row per pipeline rank)")
    p = len(rows) if ranks is None else ranks
    if len(rows) != p:
        fail(f"{path} has {len(rows)} rows but --ranks {p} (PyTorch wants one row per rank)")

    # Parse every cell with PyTorch's parser to learn the stage count.
    actions: dict[int, list] = {}
    for r, row in enumerate(rows):
        actions[r] = []
        for c, cell in enumerate(row):
            try:
                actions[r].append(S._Action.from_str(cell))
            except Exception as e:  # noqa: BLE001 - PyTorch raises RuntimeError/ValueError
                fail(f"row {r} (rank {r}) cell {c} {cell!r}: PyTorch cannot parse it: {one_line(e)}")
            a = actions[r][-1]
            if a is not None and a.sub_actions is None and repr(a) != cell.strip():
                # _action_regex.match() (not fullmatch) ignores trailing text: '0F0x' -> 0F0.
                fail(f"row {r} cell {c} {cell!r}: PyTorch reads it as {repr(a)!r}, ignoring the rest")
    leaves = [
        (r, a2)
        for r in actions
        for a in actions[r]
        if a is not None
        for a2 in (a.sub_actions or (a,))
    ]
    for r, a in leaves:
        if not a.is_compute_op:
            fail(f"rank {r}: {a} is not a compute action (format compute_only allows F, B, I, W)")
    if not leaves:
        fail("no actions in the CSV")
    num_stages = max(a.stage_index for _, a in leaves) + 1

    if strict:
        seen = set()
        for r, a in leaves:
            if a.microbatch_index is None:
                fail(f"rank {r}: {a} has no micro-batch index")
            if not 0 <= a.microbatch_index < m:
                fail(f"rank {r}: {a} has micro-batch {a.microbatch_index} outside [0, {m})")
            key = (a.stage_index, a.computation_type, a.microbatch_index)
            if key in seen:
                fail(f"rank {r}: {a} appears twice")
            seen.add(key)
        for s, kind, mb in seen:
            if kind == S.FULL_BACKWARD and (s, S.BACKWARD_INPUT, mb) in seen:
                fail(f"stage {s} micro-batch {mb} has both B and I")
        # The runtime appends the last stage's losses in the order its forwards run and reads
        # them back as _internal_losses[mb]: the k-th forward of the last stage must be mb k.
        last = [a.microbatch_index for _, a in leaves
                if a.stage_index == num_stages - 1 and a.computation_type == S.FORWARD]
        if last != sorted(last):
            fail(f"the last stage {num_stages - 1} runs its forwards in the order {last}; "
                 "PyTorch indexes losses by forward order, so they must be 0, 1, 2, ...")

    # PyTorch's own loader on stub stages: parse + _validate_schedule + lowering (SEND/RECV).
    stage_to_rank = None
    for r in range(p):
        # Every rank must hold a stage for the runtime to be constructed; find them by parsing.
        local = sorted({a.stage_index for rr, a in leaves if rr == r})
        if not local:
            fail(f"rank {r} holds no stage (PyTorch's runtime needs at least one stage per rank)")
        stubs = [fake_stage(s, num_stages, p, r) for s in local]
        try:
            sched = S._PipelineScheduleRuntime(stubs, m, loss_fn=loss_fn)
            with contextlib.redirect_stderr(io.StringIO()):
                sched._load_csv(path, format="compute_only")
        except Exception as e:  # noqa: BLE001
            fail(f"PyTorch's _load_csv rejects it: {one_line(e)}")
        stage_to_rank = dict(sched.stage_index_to_group_rank)
        if r == 0:
            with_comms = {rr: len(v) for rr, v in sched.pipeline_order_with_comms.items()}

    loop = {s: s % p for s in range(num_stages)}
    try:
        from torch.distributed.pipelining._utils import generate_stage_to_rank_mapping

        vmap = generate_stage_to_rank_mapping(p, num_stages, style="v")
    except Exception:  # noqa: BLE001 - num_stages % P != 0
        vmap = None
    style = "loop" if stage_to_rank == loop else "v" if stage_to_rank == vmap else "other"
    if placement != "any" and style != placement:
        fail(f"placement is {style} {stage_to_rank}, expected {placement}")
    per_rank = {r: sorted(s for s, rr in stage_to_rank.items() if rr == r) for r in range(p)}
    return p, num_stages, stage_to_rank, style, per_rank, with_comms


# --------------------------------------------------------------------------------------------
# One worker of the gloo world.


def worker(rank: int, p: int, port: int, path: str, m: int, num_stages: int, local: list[int],
           outdir: str, pg_timeout: float) -> None:
    import datetime

    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    torch.set_num_threads(1)
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=p,
            timeout=datetime.timedelta(seconds=pg_timeout),
        )
        mods = build_stage_modules(num_stages)
        xs, ts = build_data(m)
        dev = torch.device("cpu")
        stages = [PipelineStage(mods[s], s, num_stages, dev) for s in local]
        sched = S._PipelineScheduleRuntime(stages, m, loss_fn=loss_fn, scale_grads=True)
        sched._load_csv(path, format="compute_only")
        has_first = 0 in local
        has_last = (num_stages - 1) in local
        kw = {}
        if has_first:
            kw["arg_mbs"] = [(x,) for x in xs]
        if has_last:
            kw["target_mbs"] = list(ts)
        losses: list = []
        sched.step(losses=losses if has_last else None, **kw)
        result = {
            "grads": {
                s: [(n, q.grad.detach().clone() if q.grad is not None else None)
                    for n, q in mods[s].named_parameters()]
                for s in local
            },
            "losses": [float(x.detach()) for x in losses] if has_last else None,
        }
        torch.save(result, os.path.join(outdir, f"rank{rank}.pt"))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001
        with open(os.path.join(outdir, f"rank{rank}.err"), "w") as f:
            f.write(one_line(e) + "\n")
            f.write(traceback.format_exc())
        os._exit(1)
    os._exit(0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(p, path, m, num_stages, per_rank, outdir, wall, pg_timeout, start_method):
    ctx = mp.get_context(start_method)
    port = free_port()
    procs = []
    for r in range(p):
        pr = ctx.Process(target=worker,
                         args=(r, p, port, path, m, num_stages, per_rank[r], outdir, pg_timeout))
        pr.start()
        procs.append(pr)
    deadline = time.monotonic() + wall
    problem = None
    try:
        while True:
            alive = [pr for pr in procs if pr.exitcode is None]
            bad = [(r, pr.exitcode) for r, pr in enumerate(procs)
                   if pr.exitcode not in (None, 0)]
            if bad:
                r, code = bad[0]
                err = os.path.join(outdir, f"rank{r}.err")
                why = open(err).readline().strip() if os.path.exists(err) else f"exit code {code}"
                problem = f"rank {r} failed in PyTorch's runtime: {why}"
                break
            if not alive:
                break
            if time.monotonic() > deadline:
                problem = f"timeout: the world did not finish within {wall:g} s (hang?)"
                break
            time.sleep(0.02)
    finally:
        for pr in procs:
            if pr.exitcode is None:
                with contextlib.suppress(Exception):
                    os.kill(pr.pid, signal.SIGKILL)
        for pr in procs:
            pr.join(5)
    return problem


# --------------------------------------------------------------------------------------------


def reference(num_stages: int, m: int):
    import torch

    mods = build_stage_modules(num_stages)
    xs, ts = build_data(m)
    model = torch.nn.Sequential(*mods)
    losses = [loss_fn(model(x), t) for x, t in zip(xs, ts)]
    (sum(losses) / m).backward()
    grads = {s: [(n, q.grad.detach().clone()) for n, q in mods[s].named_parameters()]
             for s in range(num_stages)}
    return [float(x.detach()) for x in losses], grads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", required=True)
    ap.add_argument("--microbatches", type=int, required=True)
    ap.add_argument("--ranks", type=int, default=None, help="default: the CSV's row count")
    ap.add_argument("--placement", choices=["any", "loop", "v"], default="any")
    ap.add_argument("--no-strict", dest="strict", action="store_false")
    ap.add_argument("--timeout", type=float, default=120.0, help="overall wall seconds")
    ap.add_argument("--pg-timeout", type=float, default=60.0, help="process-group seconds")
    ap.add_argument("--start-method", default="fork", choices=["fork", "forkserver", "spawn"])
    ap.add_argument("--keep", action="store_true", help="keep the worker output folder")
    a = ap.parse_args()
    if a.microbatches < 1:
        fail("--microbatches must be >= 1", 2)
    if a.ranks is not None and a.ranks < 1:
        fail("--ranks must be >= 1", 2)

    t0 = time.monotonic()
    # Alarm as a last resort: whatever happens the parent exits within the wall timeout + 30 s.
    signal.signal(signal.SIGALRM, lambda *_: (print(f"pytorch: FAIL timeout after "
                                                      f"{a.timeout + 30:g} s", flush=True),
                                                os._exit(1)))
    signal.alarm(int(a.timeout) + 30)
    try:
        import torch  # noqa: F401
        import torch.distributed.pipelining  # noqa: F401
    except Exception as e:  # noqa: BLE001
        fail(f"cannot import torch.distributed.pipelining: {one_line(e)}")

    p, num_stages, stage_to_rank, style, per_rank, with_comms = dry_run_load(
        a.csv, a.microbatches, a.ranks, a.strict, a.placement)

    outdir = tempfile.mkdtemp(prefix="paci-check-pytorch-")
    try:
        remaining = a.timeout - (time.monotonic() - t0)
        problem = run_world(p, a.csv, a.microbatches, num_stages, per_rank, outdir,
                            max(remaining, 1.0), min(a.pg_timeout, a.timeout), a.start_method)
        if problem:
            fail(problem)
        import torch

        got_grads: dict = {}
        got_losses = None
        for r in range(p):
            res = torch.load(os.path.join(outdir, f"rank{r}.pt"), weights_only=False)
            got_grads.update(res["grads"])
            if res["losses"] is not None:
                got_losses = res["losses"]
    finally:
        if not a.keep:
            shutil.rmtree(outdir, ignore_errors=True)
        else:
            print(f"(kept {outdir})", file=sys.stderr)

    ref_losses, ref_grads = reference(num_stages, a.microbatches)
    if got_losses is None or len(got_losses) != a.microbatches:
        fail(f"the last stage returned {None if got_losses is None else len(got_losses)} "
             f"losses, expected {a.microbatches}")
    max_diff = 0.0
    for i, (g, r) in enumerate(zip(got_losses, ref_losses)):
        d = abs(g - r)
        max_diff = max(max_diff, d)
        if d > ATOL + RTOL * abs(r):
            fail(f"loss of micro-batch {i} differs: pipeline {g!r} reference {r!r} (|diff| {d:.3g})")
    n_params = 0
    for s in range(num_stages):
        for (n, g), (_, r) in zip(got_grads[s], ref_grads[s]):
            n_params += 1
            if g is None:
                fail(f"stage {s} parameter {n} has no gradient after the step")
            d = (g - r).abs()
            dm = float(d.max())
            max_diff = max(max_diff, dm)
            if bool((d > ATOL + RTOL * r.abs()).any()):
                fail(f"stage {s} gradient of {n} differs from the reference: max |diff| {dm:.3g}")
    loss = sum(got_losses) / a.microbatches
    stages_str = " ".join(f"r{r}:{','.join(map(str, per_rank[r]))}" for r in range(p))
    print(f"pytorch: ok P={p} M={a.microbatches} stages={num_stages} placement={style} "
          f"[{stages_str}] loss={loss:.12g} params={n_params} max_abs_diff={max_diff:.3g} "
          f"tol=1e-10(abs+rel) actions_with_comms={sum(with_comms.values())} "
          f"time={time.monotonic() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
