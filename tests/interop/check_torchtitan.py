#!/usr/bin/env python3
"""Check that a torchtitan 0.3.0 command line (as `paci plan --emit torchtitan`
prints it) is accepted by torchtitan's own code.

    python check_torchtitan.py --args-file FILE --world N \
        --layers-per-stage a,b,c,... [--run-steps K] [--timeout S]

FILE holds the shell words that follow the torchtitan entry point
(`torchrun ... -m torchtitan.train`), e.g.
    --module llama3 --config llama3_8b --parallelism.tensor_parallel_degree 2 ...
'#' starts a comment; words may span several lines (shlex rules).

What runs (all torchtitan 0.3.0's own code, single process, no GPU):
  (a) torchtitan.config.ConfigManager().parse_args(words) -- exactly what
      torchtitan/train.py:28-29 does; this includes tyro's option-name check and
      every dataclass __post_init__ (Trainer.Config, CompileConfig, ...).
  (b) ParallelDims.from_config(config.parallelism, N) (its _validate()), then,
      for every pipeline rank, the real device meshes on torch's "fake"
      process-group backend (torchtitan.distributed.utils.init_fake_mode, the
      same thing torchtitan's --comm.mode fake_backend uses) plus the checks
      Trainer.__init__ does inline (seq-len divisibility, batch sizes).
  (c) the model is built on the meta device and model_spec.pipelining_fn
      (torchtitan.distributed.pipeline_parallel.pipeline_llm) -- the call
      Trainer.__init__ makes, incl. parallelize_fn (TP/FSDP/AC/compile
      wrapping) and the schedule construction (incl. CSV loading) -- is run for
      every pp rank.  The resulting stages must hold exactly layers-per-stage[k]
      transformer blocks, contiguous and in order, with tok_embeddings only on
      stage 0 and norm+lm_head only on the last stage.
  (d) --run-steps K: a K-step run of the llama3 debug model on 2 ranks with
      the same kind of parallelism.  torchtitan 0.3.0 cannot train on CPU
      (torchtitan/tools/utils.py:55 falls back to device_type "cuda", and
      torchtitan/trainer.py:301 `device_module.set_device(self.device)` raises
      "Found no NVIDIA driver"), so without 2 CUDA devices this is skipped with a
      printed reason.

Output: exactly one line, `torchtitan: ok ...` (exit 0) or
`torchtitan: FAIL <what>` (exit 1).  The work happens in a child process that
is killed after --timeout seconds, so the check never hangs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

RESULT_MARK = "@@CHECK_TORCHTITAN_RESULT@@"


# --------------------------------------------------------------------------
# helpers used in the worker
# --------------------------------------------------------------------------
class CheckError(Exception):
    pass


_BOX = re.compile(r"[\u2500-\u257f]")


def _condense(text: str, limit: int = 400) -> str:
    """Turn a tyro/rich error box into one line."""
    lines = []
    for raw in text.splitlines():
        s = _BOX.sub(" ", raw).strip()
        if not s or "helptext" in s or s.startswith("initial_load_model_only"):
            continue
        if s.startswith("HF assets path") or "RuntimeWarning" in s:
            continue
        lines.append(re.sub(r"\s+", " ", s))
    out = " | ".join(lines)
    return out[:limit] + ("..." if len(out) > limit else "")


def _read_words(path: str) -> list[str]:
    with open(path) as f:
        return shlex.split(f.read(), comments=True)


def _parse(words: list[str]):
    """(a): torchtitan's own parser, as torchtitan/train.py:28-29."""
    import contextlib
    import io

    from torchtitan.config import ConfigManager

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return ConfigManager().parse_args(list(words))
    except SystemExit as e:  # tyro: unknown option, bad value, __post_init__ error
        raise CheckError(f"parse (exit {e.code}): {_condense(err.getvalue())}")
    except Exception as e:  # ConfigManager._load_config: --module/--config problems
        raise CheckError(f"parse: {type(e).__name__}: {e}")


def _trainer_inline_checks(cfg, pd) -> dict:
    """Checks Trainer.__init__ makes inline (torchtitan/trainer.py:307-443)."""
    tr, par = cfg.training, cfg.parallelism
    # trainer.py:307-315
    div = (pd.tp if par.enable_sequence_parallel else 1) * (2 * pd.cp if pd.cp > 1 else 1)
    if tr.seq_len % div != 0:
        raise CheckError(
            f"trainer: training.seq_len ({tr.seq_len}) must be divisible by {div} "
            "for the configured sequence/context parallelism"
        )
    # trainer.py:325-329 batch degree = dp_replicate * dp_shard ("batch" mesh)
    batch_degree = pd.dp_replicate * pd.dp_shard
    gbs = tr.global_batch_size
    if gbs < 0:
        gbs = tr.local_batch_size * batch_degree
    if gbs <= 0 or gbs % (tr.local_batch_size * batch_degree) != 0:  # trainer.py:420-428
        raise CheckError(
            f"trainer: global batch size must be multiple of local batch size times "
            f"data-parallel degree ({gbs} % ({tr.local_batch_size} * {batch_degree}) != 0)"
        )
    grad_accum = gbs // (tr.local_batch_size * batch_degree)
    n_mb = tr.local_batch_size // par.pipeline_parallel_microbatch_size if pd.pp > 1 else 1
    if pd.pp > 1 and not cfg.model_spec.pipelining_fn:  # trainer.py:443-448
        raise CheckError(f"trainer: {cfg.model_spec.name} does not support pipelining")
    return {"gbs": gbs, "grad_accum": grad_accum, "n_microbatches": n_mb}


def _ac_mode(ac) -> str:
    """none / selective / full, from the activation-checkpoint subcommand's config class."""
    if ac is None:
        return "none"
    name = type(ac).__qualname__.lower()
    for mode in ("none", "selective", "full", "memory_budget"):
        if mode.replace("_", "") in name.replace("_", ""):
            return mode
    return getattr(ac, "mode", name)


def _stage_report(schedule, model_parts) -> list[dict]:
    stages = getattr(schedule, "_stages", None)
    if stages is None:
        stages = [schedule._stage]
    info = []
    # pipeline_llm builds the schedule from stages[0] only for single-stage
    # schedules (pipeline_parallel.py:339-345): report what really runs.
    for stage in stages:
        part = stage.submod
        layers = getattr(part, "layers", None)
        keys = sorted(int(k) for k in layers.keys()) if layers is not None else []
        info.append(
            {
                "stage": stage.stage_index,
                "num_stages": stage.num_stages,
                "layers": keys,
                "tok_embeddings": getattr(part, "tok_embeddings", None) is not None,
                "norm": getattr(part, "norm", None) is not None,
                "lm_head": getattr(part, "lm_head", None) is not None,
            }
        )
    return info, len(model_parts)


def _run_one_rank(words, world, rank):
    """Meshes + pipelining_fn (or parallelize_fn) for one global rank, as
    Trainer.__init__ (trainer.py:296-520) does, but on fake PGs and meta."""
    import torch
    import torch.distributed as dist

    from torchtitan.config import TORCH_DTYPE_MAP
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.tools import utils as tt_utils

    cfg = _parse(words)  # fresh config: update_from_config mutates it
    if not torch.cuda.is_available():
        # The only patch: torchtitan picks device_type "cuda" even without a GPU
        # (tools/utils.py:55) and fully_shard() then asks torch.cuda for the
        # current device.  Build the (fake-PG) meshes as CPU meshes instead;
        # every check below is still torchtitan's / torch's own code.
        import torchtitan.distributed.parallel_dims as tt_pd

        tt_pd.device_type = "cpu"
    if dist.is_initialized():
        dist.destroy_process_group()
    dist_utils.init_fake_mode(world, "fake_backend", rank=rank)
    pd = ParallelDims.from_config(cfg.parallelism, world)
    pd.build_mesh()
    dist_utils.set_spmd_backend(cfg.parallelism.spmd_backend)
    model_spec = cfg.model_spec
    model_config = model_spec.model
    model_config.update_from_config(config=cfg)
    cfg._validate_cuda_graphs()
    with torch.device("meta"), tt_utils.set_default_dtype(TORCH_DTYPE_MAP[cfg.training.dtype]):
        model = model_config.build()
    model.verify_module_protocol()
    loss_fn = cfg.loss.build(compile_config=cfg.compile)
    if pd.pp_enabled:
        schedule, parts, has_first, has_last = model_spec.pipelining_fn(
            model,
            parallel_dims=pd,
            training=cfg.training,
            parallelism=cfg.parallelism,
            compile_config=cfg.compile,
            ac_config=cfg.activation_checkpoint,
            dump_folder=cfg.dump_folder,
            device=torch.device("meta"),
            model_config=model_config,
            parallelize_fn=model_spec.parallelize_fn,
            loss_fn=loss_fn,
        )
        return cfg, pd, schedule, parts
    model = model_spec.parallelize_fn(
        model,
        parallel_dims=pd,
        training=cfg.training,
        parallelism=cfg.parallelism,
        compile_config=cfg.compile,
        ac_config=cfg.activation_checkpoint,
        dump_folder=cfg.dump_folder,
    )
    return cfg, pd, None, [model]


def _rank_job(job) -> dict:
    """Runs in a forked child: one pp rank; returns its stages or an error."""
    words, world, rank, pp_rank = job
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class

    try:
        cfg, pd, schedule, parts = _run_one_rank(words, world, rank)
        if schedule is None:
            m = parts[0]
            return {
                "schedule": "none",
                "stages": [{
                    "stage": 0,
                    "num_stages": 1,
                    "layers": sorted(int(k) for k in m.layers.keys()),
                    "tok_embeddings": m.tok_embeddings is not None,
                    "norm": m.norm is not None,
                    "lm_head": m.lm_head is not None,
                }],
            }
        name = type(schedule).__name__
        info, nparts = _stage_report(schedule, parts)
        if len(info) != nparts:
            par = cfg.parallelism
            cls = get_schedule_class(par.pipeline_parallel_schedule)
            kind = "single" if issubclass(cls, PipelineScheduleSingle) else "multi"
            return {"error": (
                f"pp rank {pp_rank} holds {nparts} model parts but the {name} schedule "
                f"drives only {len(info)} ('{par.pipeline_parallel_schedule}' is "
                f"{kind}-stage; module_fqns_per_model_part must give 1 part per pp rank "
                "for single-stage schedules, >=2 per rank for multi-stage ones)")}
        # With a CSV, _load_csv re-derives stage->rank from the file
        # (schedules.py PipelineScheduleMulti._load_csv); it must agree with
        # where pipeline_llm built the stages (schedule-name based mapping).
        mapping = getattr(schedule, "stage_index_to_group_rank", None)
        for st in info:
            if mapping is not None and mapping.get(st["stage"], pp_rank) != pp_rank:
                return {"error": (
                    f"schedule maps stage {st['stage']} to pp rank {mapping[st['stage']]} but "
                    f"torchtitan built it on pp rank {pp_rank} (schedule name "
                    f"'{cfg.parallelism.pipeline_parallel_schedule}' decides the placement; "
                    "it must match the CSV's stage layout)")}
        return {"schedule": name, "stages": info}
    except CheckError as e:
        return {"error": f"pp rank {pp_rank}: {e}"}
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return {"error": f"pp rank {pp_rank}: {type(e).__name__}: {msg}"[:500]}


def worker(words: list[str], world: int, lps: list[int]) -> dict:
    import logging

    from torchtitan.distributed import ParallelDims
    from torchtitan.tools.logging import logger as tt_logger

    tt_logger.setLevel(logging.ERROR)

    # (a)
    cfg = _parse(words)
    par = cfg.parallelism
    # (b) ParallelDims validation (parallel_dims.py:170-189)
    try:
        pd = ParallelDims.from_config(par, world)
    except AssertionError as e:
        raise CheckError(f"ParallelDims(world={world}): {e}")
    inline = _trainer_inline_checks(cfg, pd)
    n_layers = len(cfg.model_spec.model.layers)
    if sum(lps) != n_layers:
        raise CheckError(
            f"layers-per-stage sums to {sum(lps)} but {cfg.model_spec.name} "
            f"{cfg.model_spec.flavor} has {n_layers} layers"
        )

    # (c) one global rank per pp rank: pp is the outermost mesh axis
    # (parallel_dims.py:284-288 unflattens world as pp,batch,cp,tp).
    per_pp = world // pd.pp
    stages: dict[int, dict] = {}
    # Each pp rank runs in a forked child: fake process groups and torchtitan's
    # mesh caches must start fresh per rank (re-initialising in one process
    # trips fully_shard's "same mesh" check).
    import multiprocessing as mp

    jobs = [(words, world, r * per_pp, r) for r in range(pd.pp)]
    ctx = mp.get_context("fork")
    with ctx.Pool(processes=min(2, len(jobs)), maxtasksperchild=1) as pool:
        results = pool.map(_rank_job, jobs, chunksize=1)
    sched_cls_name = None
    for pp_rank, res in enumerate(results):
        if "error" in res:
            raise CheckError(res["error"])
        sched_cls_name = res["schedule"]
        for s in res["stages"]:
            if s["stage"] in stages:
                raise CheckError(f"stage {s['stage']} built on two pp ranks")
            s["pp_rank"] = pp_rank
            stages[s["stage"]] = s

    num = len(stages)
    if sorted(stages) != list(range(num)):
        raise CheckError(f"stages built: {sorted(stages)}")
    if num != len(lps):
        raise CheckError(
            f"torchtitan builds {num} stages, layers-per-stage has {len(lps)}: "
            f"got {[len(stages[k]['layers']) for k in range(num)]}"
        )
    got = [len(stages[k]["layers"]) for k in range(num)]
    if got != lps:
        raise CheckError(f"layers per stage: torchtitan {got}, expected {lps}")
    order = [i for k in range(num) for i in stages[k]["layers"]]
    if order != list(range(n_layers)):
        raise CheckError(f"layers are not contiguous/in order across stages: {order}")
    for k in range(num):
        s = stages[k]
        if s["tok_embeddings"] != (k == 0):
            raise CheckError(f"stage {k}: tok_embeddings present={s['tok_embeddings']}")
        if s["norm"] != (k == num - 1) or s["lm_head"] != (k == num - 1):
            raise CheckError(f"stage {k}: norm={s['norm']} lm_head={s['lm_head']}")
    rank_of = {k: stages[k].get("pp_rank", 0) for k in range(num)}
    ac = cfg.activation_checkpoint
    # The ZeRO stage in paci's terms (docs/interop.md), from torchtitan's own resharding policy:
    # replicated (DDP, or HSDP with one shard) 0; FSDP with PP and the weights kept whole 1;
    # resharded after every forward, or any FSDP without PP (it regathers per micro-batch) 3.
    from torchtitan.distributed.fsdp import get_fsdp_reshard_after_forward_policy

    if pd.dp_shard * pd.cp > 1:  # FSDP shards over data x context
        reshard = get_fsdp_reshard_after_forward_policy(par.fsdp_reshard_after_forward, pd.pp > 1)
        zero = 3 if reshard or pd.pp == 1 else 1
    else:
        zero = 0
    return {
        # What torchtitan made of the words, for --expect: the degrees, the batch, the
        # micro-batches of a step (the pipeline's times the accumulation), the checkpointing.
        "facts": {"tp": pd.tp, "pp": pd.pp, "cp": pd.cp, "dp": pd.dp_replicate * pd.dp_shard,
                  "dp_shard": pd.dp_shard, "dp_replicate": pd.dp_replicate,
                  "gbs": inline["gbs"], "seq_len": cfg.training.seq_len,
                  "M": inline["n_microbatches"] * inline["grad_accum"],
                  "sp": bool(par.enable_sequence_parallel and pd.tp > 1),
                  "recompute": _ac_mode(ac), "schedule": sched_cls_name or "none",
                  "zero": zero, "ep": pd.ep,
                  # FSDP's group: data_parallel_shard x cp (HSDP when replicated as well).
                  "shard_group": pd.dp_shard * pd.cp if pd.dp_shard * pd.cp > 1 else 0},
        "ok": True,
        "model": f"{cfg.model_spec.name}/{cfg.model_spec.flavor}",
        "dims": f"dp_replicate={pd.dp_replicate} dp_shard={pd.dp_shard} cp={pd.cp} "
        f"tp={pd.tp} pp={pd.pp}" + (f" ep={pd.ep}" if pd.ep > 1 else ""),
        "schedule": sched_cls_name,
        "stages": got,
        "stage_to_pp_rank": [rank_of[k] for k in range(num)],
        "ac": type(cfg.activation_checkpoint).__qualname__
        if cfg.activation_checkpoint is not None
        else "None",
        **inline,
    }


# --------------------------------------------------------------------------
# (d) short real run of the debug model on 2 ranks
# --------------------------------------------------------------------------
def _no_run_reason(world_needed: int = 2) -> str | None:
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < world_needed:
        return (
            "torchtitan 0.3.0 cannot train on CPU: tools/utils.py:55 falls back to "
            "device_type 'cuda' and trainer.py:301 device_module.set_device() raises "
            "'Found no NVIDIA driver' (also dist backend is nccl, utils.py:512-520)"
        )
    return None


def _scaled_debug_words(words: list[str], steps: int) -> list[str]:
    """Same kind of parallelism, scaled to 2 ranks, on llama3_debugmodel (6 layers)."""
    cfg = _parse(words)
    par = cfg.parallelism
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class

    out = ["--module", "llama3", "--config", "llama3_debugmodel",
           "--training.steps", str(steps), "--training.disable_cuda_graphs",
           "--training.seq_len", "256", "--training.local_batch_size", "8",
           "--checkpoint.no-enable", "--validator.no-enable",
           "--metrics.no-enable-tensorboard", "--profiler.no-enable-profiling"]
    if par.pipeline_parallel_degree > 1:
        out += ["--parallelism.pipeline_parallel_degree", "2",
                "--parallelism.data_parallel_shard_degree", "1",
                "--parallelism.pipeline_parallel_schedule", par.pipeline_parallel_schedule]
        single = issubclass(get_schedule_class(par.pipeline_parallel_schedule), PipelineScheduleSingle)
        split = [[3, 3]] if single else [[2, 1, 1, 2]]
        parts, layer = [], 0
        for k, n in enumerate(split[0]):
            p = (["tok_embeddings"] if k == 0 else []) + [f"layers.{layer + i}" for i in range(n)]
            layer += n
            if k == len(split[0]) - 1:
                p += ["norm", "lm_head"]
            parts.append(",".join(p))
        out += ["--parallelism.module_fqns_per_model_part", *parts]
    elif par.tensor_parallel_degree > 1:
        out += ["--parallelism.tensor_parallel_degree", "2",
                "--parallelism.data_parallel_shard_degree", "1"]
    else:
        out += ["--parallelism.data_parallel_shard_degree", "2"]
    if cfg.compile.enable:
        out += ["--compile.enable"]
    # the subcommand goes last (tyro applies later options to it)
    ac = type(cfg.activation_checkpoint).__qualname__
    sub = {"SelectiveAC.Config": "activation-checkpoint:selective",
           "FullAC.Config": "activation-checkpoint:full"}.get(ac, "activation-checkpoint:none")
    return out + [sub]


def run_steps(words, steps, timeout) -> str:
    reason = _no_run_reason()
    if reason:
        return f"run skipped: {reason}"
    run_words = _scaled_debug_words(words, steps)
    exe = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [exe, "--nproc-per-node", "2", "--master-port", "29517", "-m", "torchtitan.train", *run_words]
    with tempfile.TemporaryDirectory() as d:
        # llama3_debugmodel reads ./tests/assets/{tokenizer,c4_test}, which the
        # torchtitan wheel does not ship: point TT_ASSETS at a torchtitan checkout.
        assets = os.environ.get("TT_ASSETS")
        if not assets or not os.path.isdir(os.path.join(assets, "tests", "assets")):
            return "run skipped: set TT_ASSETS to a torchtitan v0.3.0 checkout (tests/assets not in the wheel)"
        try:
            p = subprocess.run(cmd + [f"--dump-folder={d}"], cwd=assets, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CheckError(f"run: timeout after {timeout}s: {' '.join(run_words)}")
        if p.returncode != 0:
            tail = [l for l in (p.stdout + p.stderr).splitlines() if "Error" in l][-1:] or ["?"]
            raise CheckError(f"run rc={p.returncode}: {tail[0][:300]}")
    return f"ran {steps} steps on 2 ranks"


# --------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--args-file", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--layers-per-stage", required=True,
                    help="comma-separated transformer layers per pipeline stage (one value when pp=1)")
    ap.add_argument("--run-steps", type=int, default=0)
    ap.add_argument("--expect", action="append", default=[], metavar="KEY=VALUE",
                    help="a fact that must come out: tp, pp, cp, dp, dp_shard, dp_replicate, gbs, "
                    "seq_len, M, sp, recompute, schedule, zero, shard_group")  # cp as well
    ap.add_argument("--timeout", type=int, default=600, help="seconds for the whole check")
    ap.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a._worker:
        res: dict
        try:
            words = _read_words(a.args_file)
            lps = [int(x) for x in a.layers_per_stage.split(",") if x.strip()]
            res = worker(words, a.world, lps)
            if a.run_steps:
                res["run"] = run_steps(words, a.run_steps, max(60, a.timeout // 2))
        except CheckError as e:
            res = {"ok": False, "error": str(e)}
        except Exception as e:  # anything unexpected is a failure, not a crash
            res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
        sys.stdout.flush()
        print(RESULT_MARK + json.dumps(res), flush=True)
        os._exit(0)  # fake PGs / compile threads must not delay the exit

    env = dict(os.environ, COLUMNS="300", TORCHINDUCTOR_COMPILE_THREADS="1",
               PYTHONWARNINGS="ignore")
    cmd = [sys.executable, os.path.abspath(__file__), "--_worker", "--args-file", os.path.abspath(a.args_file),
           "--world", str(a.world), "--layers-per-stage", a.layers_per_stage,
           "--run-steps", str(a.run_steps), "--timeout", str(a.timeout)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env,
                           cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        print(f"torchtitan: FAIL timeout after {a.timeout}s ({a.args_file})")
        return 1
    line = next((l for l in p.stdout.splitlines() if l.startswith(RESULT_MARK)), None)
    if line is None:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"torchtitan: FAIL worker rc={p.returncode}: {tail[0][:300]}")
        return 1
    res = json.loads(line[len(RESULT_MARK):])
    if not res.get("ok"):
        print(f"torchtitan: FAIL {res.get('error')}")
        return 1
    for kv in a.expect:  # another program's reading of the same words: paci's --from-torchtitan
        k, _, v = kv.partition("=")
        seen = res["facts"].get(k)
        if seen is None:
            print(f"torchtitan: FAIL --expect {k}: no such fact (of {', '.join(res['facts'])})")
            return 1
        if str(seen).lower() != v.lower():
            print(f"torchtitan: FAIL {k}: torchtitan {seen}, expected {v}")
            return 1
    extra = f" [{res['run']}]" if "run" in res else ""
    print(
        f"torchtitan: ok {res['model']} world={a.world} {res['dims']} schedule={res['schedule']} "
        f"stages={','.join(map(str, res['stages']))} "
        f"stage_pp_rank={','.join(map(str, res['stage_to_pp_rank']))} ac={res['ac']} "
        f"gbs={res['gbs']} grad_accum={res['grad_accum']} microbatches={res['n_microbatches']}{extra}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
