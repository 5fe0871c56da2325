#!/usr/bin/env python3
"""Check a Megatron-LM flag list (as `paci plan --emit megatron` prints it) with Megatron's code.

    python check_megatron.py --flags-file FILE --world N --layers-per-stage a,b,... \
        [--options interop/data/megatron_options_core_v0.16.1.json] [--tree MEGATRON_LM_CHECKOUT]

FILE holds the shell words that follow `pretrain_gpt.py` ('#' starts a comment, shlex rules).
--layers-per-stage gives paci's transformer layers per pipeline stage, in stage order (stage s
of an interleaved plan is chunk s // p of pipeline rank s % p).

Two modes:

* Default (CI; only the megatron-core wheel is installed). megatron/training is not in that
  wheel, so the option table of Megatron-LM's parser is read from --options (recorded by
  record_megatron_options.py, which runs add_megatron_arguments() on a checkout at the tag the
  file names). An argparse parser is rebuilt from it (names, arity, types, choices), the
  flags are parsed, and megatron-core's own TransformerConfig (MLATransformerConfig with
  --multi-latent-attention, its latent fields at the parser's defaults where unset; a
  --moe-layer-freq pattern evaluated as Megatron-LM's moe_freq_type does) is built from them as
  core_transformer_config_from_args() does: every parsed option whose destination is a
  TransformerConfig field, plus that function's translations (swiglu, GQA, the first/last
  stage layer counts, the pipeline dtype) and what validate_args() derives before it (the
  parameter dtype from --bf16, kv_channels, the virtual pipeline size). TransformerConfig's
  __post_init__ then runs its own checks (the layout among them), and megatron-core's
  ConstantNumMicroBatchesCalculator checks the batch. What is rebuilt here rather than run is
  said in docs/interop.md.
* --tree DIR: Megatron-LM's own parse_args(), validate_args() and
  core_transformer_config_from_args() from a checkout (by hand; not in CI).

In both, the layers each (pipeline rank, virtual stage) builds come from megatron-core
(get_num_layers_to_build / get_transformer_layer_offset, or the layout's layer id lists) and
must equal --layers-per-stage, contiguous and in order. For the interleaved schedule the
micro-batch count must satisfy the condition forward_backward_pipelining_with_interleaving
raises on (megatron/core/pipeline_parallel/schedules.py).

Output: one line, `megatron: ok ...` (exit 0) or `megatron: FAIL <what>` (exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import shlex
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OPTIONS = os.path.join(HERE, "..", "..", "interop", "data", "megatron_options_core_v0.16.1.json")


class CheckError(Exception):
    pass


def read_words(path: str) -> list[str]:
    with open(path) as f:
        return shlex.split(f.read(), comments=True)


# ------------------------------------------------------------------------------------------
# Default mode: the recorded parser and megatron-core.


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump, no exit
        raise CheckError(f"Megatron-LM's parser: {message}")


def recorded_parser(table: dict) -> _Parser:
    """An argparse parser with the recorded options; defaults suppressed, so the namespace
    holds what the flags set and nothing else."""
    p = _Parser(allow_abbrev=False, add_help=False)
    seen = set()
    for o in table["options"].values():  # one entry per name: aliases repeat it
        if o["names"][0] in seen:
            continue
        seen.add(o["names"][0])
        kw = {"dest": o["dest"], "default": argparse.SUPPRESS}
        action = o["action"]
        if action in ("store_true", "store_false", "store_const"):
            kw["action"] = "store_const"
            kw["const"] = {"store_true": True, "store_false": False}.get(action, o.get("const"))
        elif action == "help":
            continue
        elif action in ("store", "append"):
            kw["action"] = action
            if o["nargs"] not in (None, 0):
                kw["nargs"] = o["nargs"]
            t = o["type"] or "str"
            if t in ("int", "float"):
                kw["type"] = {"int": int, "float": float}[t]
            elif t.startswith("enum:"):
                kw["choices"] = t[len("enum:"):].split(",")
            if o["choices"] is not None and all(isinstance(c, (int, float, str)) for c in o["choices"]):
                kw["choices"] = o["choices"]
        else:
            kw["action"] = "store"
        p.add_argument(*o["names"], **kw)
    return p


def moe_layer_pattern(value):
    """--moe-layer-freq as Megatron-LM's parser types it (arguments.py, moe_freq_type; the
    recorded table names the callable, not its code): an int N (one expert layer in N), or a
    Python list expression of 0s and 1s such as "([0]*3+[1]*58)". The expression is evaluated
    here on list and int literals, + and * only."""
    import ast

    if isinstance(value, int):
        return value
    text = str(value).strip()
    if "[" not in text:
        return int(text)

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.List):
            return [ev(e) for e in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = ev(node.left), ev(node.right)
            size = (len(left) if isinstance(left, list) else 1) * (
                right if isinstance(node.op, ast.Mult) and isinstance(right, int) else 1) + (
                len(right) if isinstance(node.op, ast.Add) and isinstance(right, list) else 0)
            if size > 1 << 20:
                raise CheckError(f"Megatron-LM's parser: --moe-layer-freq {text!r} unrolls past "
                                 "2^20 layers")
            return left + right if isinstance(node.op, ast.Add) else left * right
        raise CheckError(f"Megatron-LM's parser: --moe-layer-freq {text!r} is not a list pattern")

    try:
        out = ev(ast.parse(text, mode="eval"))
    except SyntaxError as e:
        raise CheckError(f"Megatron-LM's parser: --moe-layer-freq {text!r}: {e.msg}")
    if not isinstance(out, list):
        raise CheckError(f"Megatron-LM's parser: --moe-layer-freq {text!r} is not a list")
    return out


def derived_config_kwargs(ns: argparse.Namespace, world: int,
                          defaults_table: dict) -> tuple[dict, dict]:
    """TransformerConfig keyword arguments as core_transformer_config_from_args() makes them
    from the namespace validate_args() leaves; returns (kwargs, facts for the report)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.enums import AttnBackend
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    a = vars(ns)
    # core_transformer_config_from_args: multi-head latent attention builds MLATransformerConfig
    # (its fields a superset); --rope-type unset keeps that class's default.
    config_class = MLATransformerConfig if a.get("multi_latent_attention") else TransformerConfig
    fields = {f.name for f in dataclasses.fields(config_class)}
    kw = {k: v for k, v in a.items() if k in fields}
    if config_class is MLATransformerConfig:
        # core_transformer_config_from_args copies every parsed option, defaults included: the
        # latent attention's fields take the parser's defaults where the flags leave them (its
        # rotary_scaling_factor 1.0, q_lora_rank None, ...), not MLATransformerConfig's; an unset
        # --rope-type is popped, so that one keeps the class default.
        tf = {f.name for f in dataclasses.fields(TransformerConfig)}
        for o in defaults_table.values():
            dest = o["dest"]
            if dest in fields and dest not in tf and dest not in kw and dest != "rope_type":
                kw[dest] = o["default"]
    t = a.get("tensor_model_parallel_size", 1)
    p = a.get("pipeline_model_parallel_size", 1)
    cp = a.get("context_parallel_size", 1)
    if world % (t * p * cp):
        raise CheckError(f"validate_args: world size ({world}) is not divisible by t*p*cp ({t * p * cp})")
    # validate_args: the parameter dtype, kv_channels, SP off at t = 1, the virtual size.
    params_dtype = torch.bfloat16 if a.get("bf16") else torch.half if a.get("fp16") else torch.float
    kw["params_dtype"] = params_dtype
    kw["pipeline_dtype"] = params_dtype
    kw["bf16"] = bool(a.get("bf16"))
    if "kv_channels" not in a and "hidden_size" in a and "num_attention_heads" in a:
        kw["kv_channels"] = a["hidden_size"] // a["num_attention_heads"]
    if t == 1:
        kw["sequence_parallel"] = False
    # validate_args: --fp8-param-gather needs the distributed optimizer (or an FSDP);
    # core_transformer_config_from_args passes it on as fp8_param.
    if a.get("fp8_param_gather") and not (a.get("use_distributed_optimizer")
                                          or a.get("use_torch_fsdp2") or a.get("use_megatron_fsdp")):
        raise CheckError("validate_args: --fp8-param-gather only supported with distributed "
                         "optimizer, torch fsdp2, megatron fsdp, or inference mode")
    kw["fp8_param"] = bool(a.get("fp8_param_gather"))
    # core_transformer_config_from_args: --num-experts is num_moe_experts; validate_args: expert
    # tensor parallelism defaults to t, and the experts must divide over expert parallelism.
    kw["num_moe_experts"] = a.get("num_experts")
    if "moe_layer_freq" in kw:
        kw["moe_layer_freq"] = moe_layer_pattern(kw["moe_layer_freq"])
    if a.get("expert_tensor_parallel_size") is None:
        kw["expert_tensor_parallel_size"] = t
    ep = a.get("expert_model_parallel_size") or 1
    if ep > 1 and not a.get("num_experts"):
        raise CheckError("validate_args: expert parallelism needs --num-experts")
    if a.get("num_experts") and a["num_experts"] % ep:
        raise CheckError("validate_args: Number of experts should be a multiple of expert model "
                         "parallel_size.")
    etp = kw.get("expert_tensor_parallel_size") or 1
    if world % (etp * ep * p):
        raise CheckError(f"parallel_state: world size ({world}) is not divisible by "
                         f"expert_tensor_parallel_size x expert_model_parallel_size x pipeline "
                         f"({etp} x {ep} x {p})")
    # validate_args: a layer count above 0 turns activation offloading on.
    if (a.get("cpu_offloading_num_layers") or 0) > 0:
        kw["cpu_offloading"] = True
    # validate_args: one --cp-comm-type value stands for every layer.
    if isinstance(kw.get("cp_comm_type"), list) and len(kw["cp_comm_type"]) == 1:
        kw["cp_comm_type"] = kw["cp_comm_type"][0]
    layout = a.get("pipeline_model_parallel_layout")
    vp = None
    if layout is not None:
        from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

        from megatron.core.transformer.enums import LayerType

        stages = PipelineParallelLayerLayout.parse_str_to_list(layout)  # megatron-core's unrolling
        vp = len(stages) // p if len(stages) // p > 1 else None
        # validate_args: the layout sets the layer count.
        kw["num_layers"] = sum(stage.count(LayerType.decoder) for stage in stages)
    elif a.get("num_virtual_stages_per_pipeline_rank") is not None:
        vp = a["num_virtual_stages_per_pipeline_rank"]
        vp = vp if vp > 1 else None
    kw["virtual_pipeline_model_parallel_size"] = vp
    # validate_args: the non-interleaved schedule cannot overlap its pipeline sends, so the overlap
    # (on unless --no-overlap-p2p-communication) is turned off without virtual stages;
    # core_transformer_config_from_args: batch_p2p_comm = not overlap_p2p_comm.
    kw["overlap_p2p_comm"] = bool(a.get("overlap_p2p_comm", True)) if vp else False
    kw["batch_p2p_comm"] = not kw["overlap_p2p_comm"]
    # validate_args: interleaved without the overlap needs more than 2 pipeline stages (else two
    # ranks would exchange several sends and receives in one batch).
    if vp and not kw["overlap_p2p_comm"] and p <= 2:
        raise CheckError("validate_args: the interleaved schedule without P2P overlap needs a "
                         "pipeline-model-parallel size above 2")
    # core_transformer_config_from_args' translations
    if a.get("swiglu"):
        kw["activation_func"] = F.silu
        kw["gated_linear_unit"] = True
    kw["num_query_groups"] = a.get("num_query_groups") if a.get("group_query_attention") else None
    kw["num_layers_in_first_pipeline_stage"] = a.get("decoder_first_pipeline_num_layers")
    kw["num_layers_in_last_pipeline_stage"] = a.get("decoder_last_pipeline_num_layers")
    if "attention_backend" in kw:
        kw["attention_backend"] = AttnBackend[kw["attention_backend"]]
    if "recompute_granularity" in a and a["recompute_granularity"] == "selective":
        kw.setdefault("recompute_modules", ["core_attn"])
    facts = {
        "t": t, "p": p, "cp": cp, "d": world // (t * p * cp), "vp": vp or 1,
        "mbs": a.get("micro_batch_size", 1), "gbs": a.get("global_batch_size"),
        "distributed_optimizer": bool(a.get("use_distributed_optimizer")),
        "instances": a.get("num_distributed_optimizer_instances") or 1,
        # validate_args: --bf16 accumulates and reduces gradients in fp32 unless
        # --grad-reduce-in-bf16 (or a bf16 --main-grads-dtype) says otherwise.
        "grad_dtype": "bf16" if a.get("grad_reduce_in_bf16") or a.get("main_grads_dtype") == "bf16"
        else "fp32",
    }
    return kw, facts


def build_default(words: list[str], world: int, options_path: str, arch: int):
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    with open(options_path) as f:
        table = json.load(f)
    ns = recorded_parser(table).parse_args(words)
    kw, facts = derived_config_kwargs(ns, world, table["options"])
    config_class = MLATransformerConfig if getattr(ns, "multi_latent_attention", False) else TransformerConfig
    # validate_args (arguments.py, "CUDA_DEVICE_MAX_CONNECTIONS requirement"): before Blackwell,
    # TP or CP without FSDP needs the variable set to 1.
    if (facts["t"] > 1 or facts["cp"] > 1) and arch < 10 and not (
        getattr(ns, "use_torch_fsdp2", False) or getattr(ns, "use_megatron_fsdp", False)
    ):
        if os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
            raise CheckError(
                "validate_args: tensor or context parallelism before Blackwell requires "
                "CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment"
            )
    try:
        config = config_class(**kw)
    except (AssertionError, ValueError, TypeError) as e:
        raise CheckError(f"{config_class.__name__}: {type(e).__name__}: {one_line(e)}")
    how = f"recorded parser of Megatron-LM {table['tag']}"
    facts["moments_dtype"], note = optimizer_moments(ns)
    return config, facts, how + note


def optimizer_moments(ns: argparse.Namespace) -> tuple[str, str]:
    """megatron-core's AdamOptimizerConfig built as get_megatron_optimizer_config() builds it (every
    parsed option that is one of its fields, the dtypes mapped as validate_args maps them); its
    __post_init__ checks the precision-aware optimizer's options. Returns AdamW's moment dtype and
    a note for the report line."""
    import torch
    import megatron.core.optimizer.optimizer_config as optimizer_config
    from megatron.core.optimizer import AdamOptimizerConfig

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.uint8}
    a = vars(ns)
    kw = {f.name: a[f.name] for f in dataclasses.fields(AdamOptimizerConfig) if f.name in a}
    for k in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        if isinstance(kw.get(k), str):
            kw[k] = dtypes[kw[k]]
    note = ""
    te_version = optimizer_config.is_te_min_version
    try:
        import transformer_engine  # noqa: F401
    except ImportError:
        # Without Transformer Engine its version check cannot run: a cluster's (>= 2.1) is assumed.
        optimizer_config.is_te_min_version = lambda *args, **kwargs: True
    try:
        config = AdamOptimizerConfig(**kw)
    except RuntimeError as e:
        # Its last check imports Transformer Engine's FusedAdam, which this environment lacks
        # (a GPU cluster has it): every check before it passed.
        if "requires FusedAdam from TransformerEngine" not in str(e):
            raise CheckError(f"AdamOptimizerConfig: RuntimeError: {one_line(e)}")
        note = ", AdamOptimizerConfig checked up to its Transformer Engine import"
        moments = a.get("exp_avg_dtype", "fp32")
        return (moments if isinstance(moments, str) else str(moments).replace("torch.", "")), note
    except (AssertionError, ValueError, TypeError) as e:
        raise CheckError(f"AdamOptimizerConfig: {type(e).__name__}: {one_line(e)}")
    finally:
        optimizer_config.is_te_min_version = te_version
    names = {v: k for k, v in dtypes.items()}
    return names[config.exp_avg_dtype], note


# ------------------------------------------------------------------------------------------
# --tree mode: Megatron-LM's own argument handling.


def build_tree(words: list[str], world: int, tree: str, arch: int):
    sys.path.insert(0, os.path.abspath(tree))
    os.environ["WORLD_SIZE"] = str(world)
    os.environ.setdefault("RANK", "0")
    import megatron.training.arguments as margs
    from megatron.training.arguments import (
        core_transformer_config_from_args,
        parse_args,
        validate_args,
    )

    # validate_args asks the GPU for its architecture; there is none here: the planned GPU's.
    margs.get_device_arch_version = lambda: arch

    note = ""
    try:
        import transformer_engine  # noqa: F401
    except ImportError:
        # Without Transformer Engine, TransformerConfig refuses the rope fusion Megatron-LM turns
        # on by default; a cluster has TE. The flag is the only change to the launch.
        words = [*words, "--no-rope-fusion"]
        note = ", no TE here: --no-rope-fusion added"
    argv = sys.argv
    sys.argv = ["pretrain_gpt.py", *words]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args, {})
            config = core_transformer_config_from_args(args)
    except SystemExit:
        msg = [l for l in err.getvalue().splitlines() if l.strip()]
        raise CheckError(f"Megatron-LM parse_args: {msg[-1] if msg else 'exit'}")
    except (AssertionError, ValueError, TypeError, RuntimeError) as e:
        raise CheckError(f"Megatron-LM validate_args/config: {type(e).__name__}: {one_line(e)}")
    finally:
        sys.argv = argv
    facts = {
        "t": args.tensor_model_parallel_size, "p": args.pipeline_model_parallel_size,
        "cp": args.context_parallel_size, "d": args.data_parallel_size,
        "vp": args.virtual_pipeline_model_parallel_size or 1,
        "mbs": args.micro_batch_size, "gbs": args.global_batch_size,
        "distributed_optimizer": bool(args.use_distributed_optimizer),
        "instances": getattr(args, "num_distributed_optimizer_instances", 1) or 1,
        "grad_dtype": "fp32" if args.accumulate_allreduce_grads_in_fp32 else "bf16",
    }
    facts["moments_dtype"], more = optimizer_moments(args)
    return config, facts, f"Megatron-LM's own parse_args/validate_args from {tree}{note}{more}"


# ------------------------------------------------------------------------------------------


def one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def stage_layers(config, p: int, vp: int) -> list[list[int]]:
    """Layer ids per stage, stage = virtual stage * p + pipeline rank, from megatron-core."""
    from megatron.core import parallel_state
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    parallel_state.set_virtual_pipeline_model_parallel_world_size(vp if vp > 1 else None)
    parallel_state.set_pipeline_model_parallel_world_size(p)
    out = [[] for _ in range(p * vp)]
    for v in range(vp):
        for r in range(p):
            parallel_state.set_pipeline_model_parallel_rank(r)
            vs = v if vp > 1 else None
            layout = config.pipeline_model_parallel_layout
            if layout is not None:
                ids = layout.get_layer_id_list(LayerType.decoder, vp_stage=vs, pp_rank=r)
            else:
                n = get_num_layers_to_build(config, vp_stage=vs, pp_rank=r)
                off = get_transformer_layer_offset(config, vp_stage=vs, pp_rank=r)
                ids = list(range(off, off + n))
            out[v * p + r] = list(ids)
    return out


def dense_layers_of(config) -> int:
    """The layers megatron-core builds with a dense MLP: its own decoder layer specs
    (get_gpt_decoder_layer_specs, which reads moe_layer_freq and checks the pattern's length
    against the layer count), counted by their MLP module."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_layer_specs

    if not config.num_moe_experts:
        return config.num_layers
    try:
        specs = get_gpt_decoder_layer_specs(config, use_transformer_engine=False,
                                            normalization=config.normalization)
    except (AssertionError, ValueError) as e:
        raise CheckError(f"megatron-core's layer specs: {type(e).__name__}: {one_line(e)}")
    dense = [i for i, spec in enumerate(specs) if spec.submodules.mlp.module.__name__ == "MLP"]
    if dense != list(range(len(dense))):
        raise CheckError(f"megatron-core builds dense MLPs in layers {dense[:8]}, not the first "
                         f"{len(dense)} (paci's dense layers come first)")
    return len(dense)


def router_of(config) -> str:
    """paci's name for the router TransformerConfig holds: none without experts; deepseek-v3 for
    DeepSeek-V3's (sigmoid scores with the balancing expert bias, 8 groups keeping 4, routed
    outputs scaled by 2.5); softmax for Megatron-LM's default; anything else by its parts."""
    if not config.num_moe_experts:
        return "none"
    parts = (config.moe_router_score_function, bool(config.moe_router_enable_expert_bias),
             config.moe_router_num_groups, config.moe_router_group_topk,
             config.moe_router_topk_scaling_factor)
    if parts == ("sigmoid", True, 8, 4, 2.5):
        return "deepseek-v3"
    if parts == ("softmax", False, None, None, None):
        return "softmax"
    return "/".join(map(str, parts))


def precision_of(config) -> str:
    """The GEMMs' format as TransformerConfig holds it: no fp8 format is bf16; Transformer
    Engine's per-tensor recipes (delayed, tensorwise) paci's fp8; mxfp8 itself; others by name."""
    if not getattr(config, "fp8", None):
        return "bf16"
    recipe = str(getattr(config, "fp8_recipe", "delayed") or "delayed")
    recipe = recipe.split(".")[-1].lower()  # an enum prints as Fp8Recipe.delayed
    return "fp8" if recipe in ("delayed", "tensorwise") else recipe


def check_expected(expect: list[str], seen: dict, tool: str) -> None:
    """--expect KEY=VALUE: what the tool's own code made of the flags must be VALUE (another
    program's reading of the same launch: paci plan --from-megatron's)."""
    for kv in expect:
        k, _, v = kv.partition("=")
        if k not in seen:
            raise CheckError(f"--expect {k}: no such fact (of {', '.join(seen)})")
        if str(seen[k]).lower() != v.lower():
            raise CheckError(f"{k}: {tool} {seen[k]}, expected {v}")


def check(a) -> str:
    words = read_words(a.flags_file)
    lps = [int(x) for x in a.layers_per_stage.split(",") if x.strip()]
    for kv in a.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    if a.tree:
        config, f, how = build_tree(words, a.world, a.tree, a.gpu_arch)
    else:
        config, f, how = build_default(words, a.world, a.options, a.gpu_arch)
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator

    if f["gbs"] is None:
        raise CheckError("no --global-batch-size")
    try:
        calc = ConstantNumMicroBatchesCalculator(f["gbs"], f["mbs"], f["d"], None, 0)
    except AssertionError as e:
        raise CheckError(f"ConstantNumMicroBatchesCalculator: {one_line(e) or 'global batch not divisible'}")
    m = calc.get()
    p, vp = f["p"], f["vp"]
    if vp > 1:  # schedules.py, forward_backward_pipelining_with_interleaving
        group = config.microbatch_group_size_per_vp_stage or p
        if group > m or group < p:
            raise CheckError(f"interleaved schedule: micro-batch group {group} not in [p={p}, M={m}]")
        if 0 < m % group < p:
            raise CheckError(f"interleaved schedule: M={m} leaves a last group of {m % group} < p={p}")
    try:
        stages = stage_layers(config, p, vp)
    except (AssertionError, ValueError) as e:
        raise CheckError(f"megatron-core's stage split: {type(e).__name__}: {one_line(e)}")
    got = [len(s) for s in stages]
    if got != lps:
        raise CheckError(f"layers per stage: Megatron {got}, paci {lps}")
    order = [i for s in stages for i in s]
    if order != list(range(config.num_layers)):
        raise CheckError(f"layers not contiguous and in order across stages: {order[:40]}")
    mla = bool(getattr(config, "multi_latent_attention", False))
    dense_layers = dense_layers_of(config)  # builds megatron-core's layer specs: once
    seen = {"t": f["t"], "p": p, "vp": vp, "d": f["d"], "cp": f["cp"], "M": m, "mbs": f["mbs"],
            "gbs": f["gbs"], "sp": bool(config.sequence_parallel),
            "recompute": config.recompute_granularity or "none",
            "zero": 1 if f.get("distributed_optimizer") else 0,
            # The distributed optimizer shards over d·cp / instances replicas (HSDP when above 1).
            "shard_group": f["d"] * f["cp"] // f["instances"] if f.get("distributed_optimizer")
            else 0,
            "cp_comm": (config.cp_comm_type if f["cp"] > 1 else None) or "p2p",
            "precision": precision_of(config), "grad_dtype": f["grad_dtype"],
            "offload_layers": config.cpu_offloading_num_layers if config.cpu_offloading else 0,
            "fp8_param_gather": bool(config.fp8_param),
            "moments_dtype": f.get("moments_dtype", "fp32"),
            "experts": config.num_moe_experts or 0,
            "top_k": config.moe_router_topk if config.num_moe_experts else 0,
            "ep": config.expert_model_parallel_size,
            # With one stage nothing is sent: whether sends would overlap does not apply.
            "overlap_p2p": bool(config.overlap_p2p_comm) if p > 1 else None,
            "etp": config.expert_tensor_parallel_size,
            # DeepSeek-V3's pieces: the dense first layers (0s of megatron-core's MoE pattern),
            # the latent attention's widths, the multi-token-prediction modules.
            "dense_layers": dense_layers,
            "q_lora_rank": (getattr(config, "q_lora_rank", None) or 0) if mla else 0,
            "kv_lora_rank": getattr(config, "kv_lora_rank", 0) if mla else 0,
            "rope_head_dim": getattr(config, "qk_pos_emb_head_dim", 0) if mla else 0,
            "mtp_layers": config.mtp_num_layers or 0,
            # The MLP widths: an expert's (or the dense MLP's without experts), the dense first
            # layers' (0 without them).
            "ffn": (config.moe_ffn_hidden_size if config.num_moe_experts else config.ffn_hidden_size),
            "dense_ffn": config.ffn_hidden_size if config.num_moe_experts and dense_layers else 0,
            "router": router_of(config)}
    check_expected(a.expect, seen, "Megatron")
    return (
        f"megatron: ok ({how}) t={f['t']} p={p} vp={vp} d={f['d']} M={m} "
        f"stages={','.join(map(str, got))} dtype={str(config.params_dtype).replace('torch.', '')} "
        f"sp={config.sequence_parallel} recompute={config.recompute_granularity}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flags-file", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--layers-per-stage", required=True)
    ap.add_argument("--options", default=DEFAULT_OPTIONS, help="recorded option table (JSON)")
    ap.add_argument("--tree", help="a Megatron-LM checkout: run its own parse_args/validate_args")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="the launch's environment (as its script exports it)")
    ap.add_argument("--expect", action="append", default=[], metavar="KEY=VALUE",
                    help="a fact that must come out: t, p, vp, d, cp, M, mbs, gbs, sp, recompute, zero, "
                    "shard_group, offload_layers, fp8_param_gather, moments_dtype, experts, top_k, "
                    "ep, etp, overlap_p2p, dense_layers, q_lora_rank, kv_lora_rank, "
                    "rope_head_dim, mtp_layers, router, ffn, dense_ffn")
    ap.add_argument("--gpu-arch", type=int, default=9,
                    help="the planned GPU's compute capability major (A100 8, H100/H200 9)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            line = check(a)
    except CheckError as e:
        print(f"megatron: FAIL {e}")
        return 1
    except Exception as e:  # anything unexpected is a failure with its name, not a traceback
        print(f"megatron: FAIL {type(e).__name__}: {one_line(e)}")
        return 1
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
