#!/usr/bin/env python3
"""The interop matrix: plans paci emits, run through PyTorch's, torchtitan's and Megatron-LM's code.

    python run_matrix.py --paci build/cli/paci --python VENV/bin/python [--work DIR]
                         [--megatron-lm TREE] [--jobs N] [--only SUBSTRING]

For every case, `paci plan ... -o DIR` (with --emit TOOL for the searched cases) writes the plan
and its launch files. Then, for each file the case expects:

  schedule.csv   check_pytorch.py: PyTorch's own CSV loader and runtime on a gloo world of p
                 processes, loss and gradients against a one-process reference;
  megatron.sh    run with PACI_DRY_RUN=1; the words after pretrain_gpt.py and the variables it
                 exports go to check_megatron.py (with --megatron-lm also with Megatron-LM's own
                 parse_args/validate_args from that checkout);
  torchtitan.sh  run with PACI_DRY_RUN=1; the words after torchtitan.train go to
                 check_torchtitan.py (ConfigManager, ParallelDims, the pipeline split);

each against the plan's own partition (plan.json), micro-batches and GPU count. A file the case
does not expect must be absent, and --emit's output must be the words of its file. Refusal
cases must exit 2 with one line on stderr naming the reason, print nothing, and leave no -o DIR.
Then launches as users write them (READS) go through `paci plan --from-megatron/--from-torchtitan`,
and what paci read (degrees, micro-batches, SP, recomputation, each stage's layers) must be what
the same checkers get from the tool's own code for the same words (--expect); launches paci must
refuse (READ_REFUSALS) must exit 2 with one line. Last, a self-test: each checker must fail on a wrong partition, a missing variable, a wrong
precision, a CSV with
an action dropped.

Prints one line per check and a summary; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

H100 = ["--gpu", "h100-80gb"]
# A mixture of experts' facts check_megatron.py reports and plan.json's model holds: the router,
# the expert width and DeepSeek-V3's pieces (0 for the other models), as megatron-core built them.
MOE_FACTS = ("router", "ffn", "dense_layers", "dense_ffn", "q_lora_rank", "kv_lora_rank",
             "rope_head_dim", "mtp_layers")
L8 = ["--preset", "llama3-8b", *H100]


# name, paci plan arguments, the files expected (the others must be absent), --emit or None
CASES = [
    ("llama3-8b 1f1b uneven SP selective",
     [*L8, "--gpus", "8", "--global-batch", "32", "--tp", "2", "--pp", "2",
      "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "selective",
      "--sequence-parallel", "--partition", "15,17", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("llama3-8b interleaved v2 even",
     [*L8, "--gpus", "16", "--global-batch", "64", "--tp", "2", "--pp", "4",
      "--microbatch-size", "1", "--kind", "interleaved", "--chunks", "2", "--recompute", "none",
      "--sequence-parallel", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("llama3-8b interleaved v2 uneven",
     [*L8, "--gpus", "8", "--global-batch", "32", "--tp", "1", "--pp", "4",
      "--microbatch-size", "2", "--kind", "interleaved", "--chunks", "2", "--recompute", "full",
      "--partition", "3,5,4,4,4,4,5,3", "--distributed-optimizer", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("llama3-8b interleaved v2, pipeline sends waited on",
     [*L8, "--gpus", "16", "--global-batch", "64", "--tp", "2", "--pp", "4",
      "--microbatch-size", "1", "--kind", "interleaved", "--chunks", "2", "--recompute", "none",
      "--sequence-parallel", "--zero", "1", "--cp", "1", "--overlap-p2p", "off"],
     {"megatron"}, None),
    ("llama3-8b zb-h1",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "1", "--pp", "4",
      "--microbatch-size", "1", "--kind", "zb-h1", "--recompute", "full", "--zero", "1", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b zb-h2 async TP",
     [*L8, "--gpus", "8", "--global-batch", "8", "--tp", "2", "--pp", "4",
      "--microbatch-size", "1", "--kind", "zb-h2", "--recompute", "selective",
      "--sequence-parallel", "--tp-comm-overlap", "--zero", "1", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b gpipe p8",
     [*L8, "--gpus", "8", "--global-batch", "8", "--tp", "1", "--pp", "8",
      "--microbatch-size", "1", "--kind", "gpipe", "--recompute", "full", "--zero", "1", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b 1f1b M<p",
     [*L8, "--gpus", "8", "--global-batch", "4", "--tp", "1", "--pp", "8",
      "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full", "--zero", "1", "--cp", "1"],
     {"megatron"}, None),
    ("llama3-8b paci (asynchronous)",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "1", "--pp", "4",
      "--microbatch-size", "1", "--kind", "paci", "--recompute", "full", "--cp", "1"],
     set(), None),
    ("llama3-70b 1f1b TP overlap, dist-opt, grad overlap, full",
     ["--preset", "llama3-70b", *H100, "--gpus", "64", "--global-batch", "128", "--tp", "8",
      "--pp", "4", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full",
      "--sequence-parallel", "--tp-comm-overlap", "--distributed-optimizer",
      "--overlap-grad-reduce", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("llama3-70b 1f1b ZeRO 3 (FSDP resharded)",
     ["--preset", "llama3-70b", *H100, "--gpus", "64", "--global-batch", "128", "--tp", "8",
      "--pp", "4", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full",
      "--sequence-parallel", "--zero", "3", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b context parallel ring",
     [*L8, "--gpus", "16", "--global-batch", "32", "--tp", "2", "--cp", "2", "--cp-comm", "p2p",
      "--pp", "2", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "selective",
      "--sequence-parallel", "--zero", "1"],
     {"pytorch", "megatron"}, None),
    ("llama3-8b context parallel all-gather",
     [*L8, "--gpus", "16", "--global-batch", "32", "--tp", "2", "--cp", "2", "--cp-comm",
      "all-gather", "--pp", "2", "--microbatch-size", "1", "--kind", "1f1b", "--recompute",
      "selective", "--sequence-parallel", "--zero", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("llama3-405b 126 layers on p=8",
     ["--preset", "llama3-405b", *H100, "--gpus", "512", "--global-batch", "512", "--tp", "8",
      "--pp", "8", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full",
      "--sequence-parallel", "--distributed-optimizer", "--cp", "1"],
     {"pytorch", "megatron"}, None),
    ("gpt3-175b interleaved v3 A100",
     ["--preset", "gpt3-175b", "--gpu", "a100-80gb", "--gpus", "1024", "--global-batch", "1536",
      "--tp", "8", "--pp", "8", "--microbatch-size", "1", "--kind", "interleaved", "--chunks",
      "3", "--recompute", "selective", "--sequence-parallel", "--distributed-optimizer", "--cp", "1"],
     {"pytorch", "megatron"}, None),
    ("llama3-70b 1f1b fp8 (Transformer Engine, delayed scaling)",
     ["--preset", "llama3-70b", *H100, "--gpus", "64", "--global-batch", "128", "--tp", "8",
      "--pp", "4", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "selective",
      "--sequence-parallel", "--tp-comm-overlap", "--zero", "1", "--overlap-grad-reduce",
      "--cp", "1", "--precision", "fp8", "--grad-dtype", "bf16"],
     {"pytorch", "megatron"}, None),
    ("llama3-70b fp8 weights and bf16 AdamW moments (Megatron-LM)",
     ["--preset", "llama3-70b", *H100, "--gpus", "64", "--global-batch", "128", "--tp", "8",
      "--pp", "4", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "selective",
      "--sequence-parallel", "--tp-comm-overlap", "--zero", "1", "--overlap-grad-reduce",
      "--cp", "1", "--precision", "fp8", "--fp8-param-gather", "--moments-dtype", "bf16"],
     {"pytorch", "megatron"}, None),
    ("llama3-8b zb-v (V-shaped: stages s and 2p-1-s on rank s)",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "2", "--pp", "4",
      "--microbatch-size", "1", "--kind", "zb-v", "--recompute", "selective",
      "--sequence-parallel", "--zero", "1", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b dualpipev (overlapped pairs in the V)",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "2", "--pp", "4",
      "--microbatch-size", "1", "--kind", "dualpipev", "--recompute", "selective",
      "--sequence-parallel", "--zero", "1", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b interleaved mxfp8 on B200",
     [*L8[:2], "--gpu", "b200", "--gpus", "16", "--global-batch", "64", "--tp", "2", "--pp", "2",
      "--microbatch-size", "1", "--kind", "interleaved", "--chunks", "2", "--recompute", "none",
      "--sequence-parallel", "--zero", "1", "--cp", "2", "--precision", "mxfp8"],
     {"pytorch", "megatron"}, None),
    ("llama3-8b HSDP: FSDP over 4, replicated 2x (torchtitan)",
     [*L8, "--gpus", "16", "--global-batch", "32", "--tp", "2", "--pp", "1",
      "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full", "--sequence-parallel",
      "--zero", "3", "--shard-group", "4", "--cp", "1"],
     {"pytorch", "torchtitan"}, None),
    ("llama3-8b HSDP: 2 distributed-optimizer instances (Megatron-LM)",
     [*L8, "--gpus", "32", "--global-batch", "64", "--tp", "2", "--pp", "2",
      "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "selective",
      "--sequence-parallel", "--zero", "1", "--shard-group", "4", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("llama3-8b activation offloading, 16 of 32 layers (Megatron-LM)",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "2", "--pp", "1",
      "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "none", "--sequence-parallel",
      "--zero", "1", "--offload-layers", "16", "--cp", "1"],
     {"pytorch", "megatron"}, None),
    ("mixtral-8x7b, expert parallelism 4 (Megatron-LM)",
     ["--preset", "mixtral-8x7b", "--gpu", "h100-80gb", "--gpus", "16", "--global-batch", "32",
      "--tp", "2", "--pp", "2", "--ep", "4", "--microbatch-size", "1", "--kind", "1f1b",
      "--recompute", "full", "--sequence-parallel", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron"}, None),
    ("qwen3-30b-a3b, expert parallelism 8 (torchtitan's qwen3 and Megatron-LM)",
     ["--preset", "qwen3-30b-a3b", "--gpu", "h100-80gb", "--gpus", "16", "--global-batch", "32",
      "--tp", "1", "--pp", "2", "--ep", "8", "--microbatch-size", "1", "--kind", "1f1b",
      "--recompute", "full", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("deepseek-v3 pp16 ep8: latent attention, dense first layers, MTP (Megatron-LM)",
     ["--preset", "deepseek-v3", "--gpu", "h100-80gb", "--gpus", "256", "--global-batch", "1024",
      "--tp", "1", "--pp", "16", "--ep", "8", "--microbatch-size", "1", "--kind", "1f1b",
      "--recompute", "full", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron"}, None),
    ("deepseek-v3 without MTP pp16 ep8 (torchtitan's deepseek_v3_671b and Megatron-LM)",
     ["--preset", "deepseek-v3", "--mtp-layers", "0", "--gpu", "h100-80gb", "--gpus", "256",
      "--global-batch", "512", "--tp", "1", "--pp", "16", "--ep", "8", "--microbatch-size", "1",
      "--kind", "1f1b", "--recompute", "full", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron", "torchtitan"}, None),
    ("gpt2-medium 1f1b d2",
     ["--preset", "gpt2-medium", "--gpu", "a100-40gb", "--gpus", "8", "--global-batch", "64",
      "--tp", "1", "--pp", "4", "--microbatch-size", "4", "--kind", "1f1b", "--recompute",
      "none", "--zero", "1", "--cp", "1"],
     {"pytorch", "megatron"}, None),
    # Searches for one tool: the best plan it can run, at staleness 0 and 1.
    ("search llama3-8b 64 GPUs --max-staleness 0 --emit pytorch",
     [*L8, "--gpus", "64", "--global-batch", "256", "--max-staleness", "0"], None, "pytorch"),
    ("search llama3-8b 64 GPUs --max-staleness 1 --emit megatron",
     [*L8, "--gpus", "64", "--global-batch", "256", "--max-staleness", "1"], None, "megatron"),
    ("search llama3-70b 128 GPUs --max-staleness 1 --emit torchtitan",
     ["--preset", "llama3-70b", *H100, "--gpus", "128", "--global-batch", "256",
      "--max-staleness", "1", "--sequence-parallel", "on,off"], None, "torchtitan"),
    ("search gpt3-13b 32 GPUs --max-staleness 1 --emit megatron",
     ["--preset", "gpt3-13b", *H100, "--gpus", "32", "--global-batch", "256",
      "--max-staleness", "1", "--distributed-optimizer", "on,off"], None, "megatron"),
    ("search gpt3-1.3b 8 GPUs --max-staleness 1 --emit pytorch",
     ["--preset", "gpt3-1.3b", "--gpu", "a100-40gb", "--gpus", "8", "--global-batch", "64",
      "--max-staleness", "1"], None, "pytorch"),
]

# name, paci plan arguments (with --emit), a word the one-line reason must contain
_ASYNC = [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "1", "--pp", "4",
          "--microbatch-size", "1", "--recompute", "full"]
REFUSALS = [
    ("paci for PyTorch", [*_ASYNC, "--kind", "paci", "--emit", "pytorch"], "weight"),
    ("pipedream for Megatron-LM", [*_ASYNC, "--kind", "pipedream", "--emit", "megatron"], "1F1B"),
    ("2bw for torchtitan", [*_ASYNC, "--kind", "2bw", "--emit", "torchtitan"], "flush"),
    ("zb-h1 for Megatron-LM", [*_ASYNC, "--kind", "zb-h1", "--emit", "megatron"], "zb-h1"),
    ("1f1b with overlapped sends for Megatron-LM",
     [*_ASYNC, "--kind", "1f1b", "--overlap-p2p", "on", "--emit", "megatron"], "--overlap-p2p off"),
    ("interleaved with waited sends for torchtitan",
     [*_ASYNC, "--kind", "interleaved", "--overlap-p2p", "off", "--emit", "torchtitan"],
     "--overlap-p2p on"),
    ("dualpipe for PyTorch", [*_ASYNC, "--kind", "dualpipe", "--emit", "pytorch"], "two copies"),
    ("dualpipe for torchtitan", [*_ASYNC, "--kind", "dualpipe", "--emit", "torchtitan"],
     "one copy"),
    ("1f1b M<p for PyTorch",
     [*L8, "--gpus", "8", "--global-batch", "4", "--tp", "1", "--pp", "8", "--microbatch-size", "1",
      "--kind", "1f1b", "--recompute", "full", "--emit", "pytorch"], "gpipe"),
    ("1f1b M<p for torchtitan",
     [*L8, "--gpus", "8", "--global-batch", "4", "--tp", "1", "--pp", "8", "--microbatch-size", "1",
      "--kind", "1f1b", "--recompute", "full", "--emit", "torchtitan"], "gpipe"),
    ("mixture of experts for torchtitan",
     ["--preset", "mixtral-8x7b", *H100, "--gpus", "16", "--global-batch", "32", "--tp", "2",
      "--pp", "2", "--ep", "4", "--microbatch-size", "1", "--kind", "1f1b", "--recompute",
      "full", "--sequence-parallel", "--emit", "torchtitan"], "cannot train mixtral-8x7b"),
    ("deepseek-v3 with multi-token prediction for torchtitan",
     ["--preset", "deepseek-v3", *H100, "--gpus", "256", "--global-batch", "512", "--tp", "1",
      "--pp", "16", "--ep", "8", "--microbatch-size", "1", "--kind", "1f1b", "--recompute",
      "full", "--zero", "1", "--emit", "torchtitan"], "with multi-token prediction"),
    ("GPT for torchtitan",
     ["--preset", "gpt3-13b", *H100, "--gpus", "8", "--global-batch", "64", "--tp", "2", "--pp",
      "4", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full", "--emit",
      "torchtitan"], "own configs"),
    ("activation offloading for torchtitan",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "2", "--pp", "1", "--microbatch-size",
      "1", "--kind", "1f1b", "--recompute", "none", "--offload-layers", "16", "--emit",
      "torchtitan"], "offloads no activations"),
    ("bf16 AdamW moments for torchtitan",
     [*L8, "--gpus", "8", "--global-batch", "16", "--tp", "2", "--pp", "1", "--microbatch-size",
      "1", "--kind", "1f1b", "--recompute", "none", "--zero", "3", "--moments-dtype", "bf16",
      "--emit", "torchtitan"], "fp32 moments"),
    ("405B for torchtitan",
     ["--preset", "llama3-405b", *H100, "--gpus", "512", "--global-batch", "512", "--tp", "8",
      "--pp", "8", "--microbatch-size", "1", "--kind", "1f1b", "--recompute", "full",
      "--emit", "torchtitan"], "float8"),
]

# Launches as users write them, read by `paci plan --from-megatron/--from-torchtitan`: what paci
# reads (degrees, micro-batches, sequence parallelism, recomputation, each stage's layers) must be
# what the tool's own code makes of the same words. name, tool, GPUs, the launch.
_LLAMA8B_MEGATRON = (
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
    "--num-query-groups 8 --ffn-hidden-size 14336 --swiglu --normalization RMSNorm "
    "--position-embedding-type rope --untie-embeddings-and-output-weights --bf16 "
    "--vocab-size 128256 --seq-length 8192 --max-position-embeddings 8192 ")
READS = [
    ("megatron llama3-8b t2 p2 torchrun world", "megatron", None,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py "
     + _LLAMA8B_MEGATRON + "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
     "--sequence-parallel --micro-batch-size 1 --global-batch-size 64 "
     "--recompute-granularity selective --lr 3e-4 --train-iters 100 --mock-data"),
    ("megatron llama3-8b first/last stage layers", "megatron", 16,
     _LLAMA8B_MEGATRON + "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 6 "
     "--decoder-last-pipeline-num-layers 6 --micro-batch-size 2 --global-batch-size 64 "
     "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"),
    ("megatron llama3-8b activation offloading", "megatron", 8,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 " + _LLAMA8B_MEGATRON + "--tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 1 "
     "--global-batch-size 16 --use-distributed-optimizer --cpu-offloading-num-layers 12"),
    ("megatron llama3-8b fp8 weights, bf16 moments", "megatron", 16,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 " + _LLAMA8B_MEGATRON + "--tensor-model-parallel-size 2 "
     "--pipeline-model-parallel-size 2 --sequence-parallel --micro-batch-size 1 "
     "--global-batch-size 64 --use-distributed-optimizer --fp8-format hybrid --fp8-recipe delayed "
     "--fp8-param-gather --use-precision-aware-optimizer --exp-avg-dtype bf16 "
     "--exp-avg-sq-dtype bf16"),
    ("megatron mixtral-8x7b, expert parallelism 8", "megatron", 16,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 pretrain_gpt.py --bf16 --num-layers 32 --hidden-size 4096 "
     "--num-attention-heads 32 --group-query-attention --num-query-groups 8 "
     "--ffn-hidden-size 14336 --swiglu --normalization RMSNorm --position-embedding-type rope "
     "--disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 32000 "
     "--seq-length 4096 --max-position-embeddings 4096 --tensor-model-parallel-size 2 "
     "--sequence-parallel --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
     "--expert-tensor-parallel-size 1 --moe-grouped-gemm --moe-token-dispatcher-type alltoall "
     "--micro-batch-size 1 --global-batch-size 32 --use-distributed-optimizer"),
    ("megatron mixtral-8x7b shape, 64 experts on DeepSeek-V3's router", "megatron", 16,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 pretrain_gpt.py --bf16 --num-layers 32 --hidden-size 4096 "
     "--num-attention-heads 32 --group-query-attention --num-query-groups 8 "
     "--ffn-hidden-size 14336 --swiglu --normalization RMSNorm --position-embedding-type rope "
     "--disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 32000 "
     "--seq-length 4096 --max-position-embeddings 4096 --tensor-model-parallel-size 2 "
     "--sequence-parallel --num-experts 64 --moe-router-topk 6 --moe-ffn-hidden-size 1408 "
     "--moe-router-score-function sigmoid --moe-router-enable-expert-bias "
     "--moe-router-num-groups 8 --moe-router-group-topk 4 --moe-router-topk-scaling-factor 2.5 "
     "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --moe-grouped-gemm "
     "--moe-token-dispatcher-type alltoall --micro-batch-size 1 --global-batch-size 32 "
     "--use-distributed-optimizer"),
    ("megatron deepseek-v3 pp16 ep8: latent attention, dense layers, MTP, its router",
     "megatron", 256,
     "pretrain_gpt.py --bf16 --num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
     "--kv-channels 128 --ffn-hidden-size 18432 --seq-length 4096 --max-position-embeddings 4096 "
     "--vocab-size 129280 --swiglu --normalization RMSNorm --position-embedding-type rope "
     "--disable-bias-linear --untie-embeddings-and-output-weights --multi-latent-attention "
     "--q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 "
     "--v-head-dim 128 --qk-layernorm --rope-type yarn --rotary-scaling-factor 40 --mscale 1.0 "
     "--mscale-all-dim 1.0 --num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 "
     "--moe-shared-expert-intermediate-size 2048 --moe-layer-freq '([0]*3+[1]*58)' "
     "--moe-router-score-function sigmoid --moe-router-enable-expert-bias "
     "--moe-router-num-groups 8 --moe-router-group-topk 4 --moe-router-topk-scaling-factor 2.5 "
     "--moe-router-dtype fp32 --moe-router-load-balancing-type seq_aux_loss "
     "--moe-aux-loss-coeff 1e-4 --mtp-num-layers 1 --expert-model-parallel-size 8 "
     "--expert-tensor-parallel-size 1 --moe-grouped-gemm --moe-token-dispatcher-type alltoall "
     "--pipeline-model-parallel-size 16 --pipeline-model-parallel-layout "
     "'Et*4|(t*4|)*14tmL' --micro-batch-size 1 --global-batch-size 1024 "
     "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
     "--use-distributed-optimizer --lr 2.2e-4 --mock-data"),
    ("megatron gpt3-175b interleaved v3", "megatron", 1024,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
     "--max-position-embeddings 2048 --vocab-size 50257 --bf16 --micro-batch-size 1 "
     "--global-batch-size 1536 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
     "--num-virtual-stages-per-pipeline-rank 3 --sequence-parallel --use-distributed-optimizer"),
    ("megatron gpt3-175b interleaved v3, sends waited on", "megatron", 1024,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
     "--max-position-embeddings 2048 --vocab-size 50257 --bf16 --micro-batch-size 1 "
     "--global-batch-size 1536 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
     "--num-virtual-stages-per-pipeline-rank 3 --sequence-parallel --use-distributed-optimizer "
     "--no-overlap-p2p-communication"),
    ("megatron layout, account for embedding", "megatron", 8,
     "--num-layers 30 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
     "--max-position-embeddings 2048 --vocab-size 50257 --bf16 --micro-batch-size 1 "
     "--global-batch-size 32 --pipeline-model-parallel-size 4 "
     "--pipeline-model-parallel-layout 'Et*6|t*8|t*9|t*7,L'"),
    ("megatron llama3-8b context parallel all_gather", "megatron", 32,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 " + _LLAMA8B_MEGATRON + "--tensor-model-parallel-size 2 "
     "--context-parallel-size 4 --cp-comm-type all_gather --sequence-parallel "
     "--micro-batch-size 1 --global-batch-size 32 --use-distributed-optimizer"),
    ("megatron llama3-8b fp8 hybrid, delayed scaling", "megatron", 16,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 " + _LLAMA8B_MEGATRON + "--tensor-model-parallel-size 2 "
     "--sequence-parallel --micro-batch-size 1 --global-batch-size 64 --fp8-format hybrid "
     "--fp8-amax-history-len 1024 --fp8-amax-compute-algo max --use-distributed-optimizer "
     "--grad-reduce-in-bf16"),
    ("megatron llama3-8b 2 distributed-optimizer instances", "megatron", 32,
     "CUDA_DEVICE_MAX_CONNECTIONS=1 " + _LLAMA8B_MEGATRON + "--tensor-model-parallel-size 2 "
     "--sequence-parallel --micro-batch-size 1 --global-batch-size 64 "
     "--use-distributed-optimizer --num-distributed-optimizer-instances 2"),
    ("torchtitan llama3_8b as shipped", "torchtitan", 8, "--module llama3 --config llama3_8b"),
    ("torchtitan llama3_8b context parallel", "torchtitan", 16,
     "--module llama3 --config llama3_8b --parallelism.context-parallel-degree 2 "
     "--parallelism.tensor-parallel-degree 2"),
    ("torchtitan llama3_70b as shipped", "torchtitan", 32, "--module llama3 --config llama3_70b"),
    ("torchtitan llama3_8b pp4 default split", "torchtitan", 8,
     "--module llama3 --config llama3_8b --parallelism.pipeline-parallel-degree 4 "
     "--training.disable-cuda-graphs --training.local-batch-size 8"),
    ("torchtitan llama3_8b tp2 pp2 interleaved", "torchtitan", 16,
     "--module llama3 --config llama3_8b --parallelism.tensor-parallel-degree 2 "
     "--parallelism.pipeline-parallel-degree 2 --parallelism.pipeline-parallel-schedule "
     "Interleaved1F1B --training.disable-cuda-graphs --training.local-batch-size 8 "
     "--training.seq-len 4096 activation-checkpoint:none"),
    ("torchtitan llama3_8b replicate beside tp", "torchtitan", 16,
     "--module llama3 --config llama3_8b --parallelism.tensor-parallel-degree 2 "
     "--parallelism.data-parallel-replicate-degree 8 --parallelism.data-parallel-shard-degree 1"),
    ("torchtitan llama3_70b pp4 resharded", "torchtitan", 64,
     "--module llama3 --config llama3_70b --parallelism.pipeline-parallel-degree 4 "
     "--parallelism.tensor-parallel-degree 8 --parallelism.fsdp-reshard-after-forward always "
     "--training.local-batch-size 8 --training.disable-cuda-graphs"),
    ("torchtitan qwen3_30b_a3b pp2 ep8", "torchtitan", 16,
     "--module qwen3 --config qwen3_30b_a3b --parallelism.pipeline-parallel-degree 2 "
     "--parallelism.expert-parallel-degree 8 --parallelism.pipeline-parallel-microbatch-size 1 "
     "--training.local-batch-size 4 --training.disable-cuda-graphs"),
    ("torchtitan deepseek_v3_671b pp16 ep8 1F1B", "torchtitan", 256,
     "--module deepseek_v3 --config deepseek_v3_671b --parallelism.pipeline-parallel-degree 16 "
     "--parallelism.pipeline-parallel-schedule 1F1B --parallelism.expert-parallel-degree 8 "
     "--training.local-batch-size 32 activation-checkpoint:full"),
    ("torchtitan llama3_70b tp8 pp4 hsdp", "torchtitan", 128,
     "--module llama3 --config llama3_70b --parallelism.pipeline-parallel-degree 4 "
     "--parallelism.data-parallel-replicate-degree 2 --parallelism.data-parallel-shard-degree 2 "
     "--parallelism.pipeline-parallel-microbatch-size 2 --training.local-batch-size 16 "
     "--training.disable-cuda-graphs activation-checkpoint:selective"),
]
# Launches paci must refuse in one line (exit 2): what the tool refuses or paci does not model.
READ_REFUSALS = [
    ("megatron interleaved p2 with sends waited on", "megatron", 16, "CUDA_DEVICE_MAX_CONNECTIONS=1 "
     + _LLAMA8B_MEGATRON + "--micro-batch-size 1 --global-batch-size 64 "
     "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
     "--no-overlap-p2p-communication", "more than 2 pipeline stages"),
    ("megatron unknown flag", "megatron", 16, _LLAMA8B_MEGATRON +
     "--micro-batch-size 1 --global-batch-size 64 --tensor-parallel-size 2", "no option"),
    ("megatron context parallelism a2a", "megatron", 16, _LLAMA8B_MEGATRON +
     "--micro-batch-size 1 --global-batch-size 64 --context-parallel-size 2 --cp-comm-type a2a",
     "p2p (a ring) and all_gather"),
    ("megatron layers not divisible", "megatron", 12, _LLAMA8B_MEGATRON +
     "--micro-batch-size 1 --global-batch-size 64 --pipeline-model-parallel-size 3", "divisible"),
    ("megatron fp8 blockwise recipe", "megatron", 16, _LLAMA8B_MEGATRON +
     "--micro-batch-size 1 --global-batch-size 64 --fp8-format e4m3 --fp8-recipe blockwise",
     "per-tensor scales"),
    ("megatron bf16 moments without the precision-aware optimizer", "megatron", 16,
     _LLAMA8B_MEGATRON + "--micro-batch-size 1 --global-batch-size 64 --use-distributed-optimizer "
     "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16", "--use-precision-aware-optimizer"),
    ("megatron experts split by tensor parallelism", "megatron", 16, _LLAMA8B_MEGATRON +
     "--micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 2 "
     "--sequence-parallel --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2",
     "--expert-tensor-parallel-size 1"),
    ("torchtitan qwen3 experts not dividing the shards", "torchtitan", 16,
     "--module qwen3 --config qwen3_30b_a3b --parallelism.pipeline-parallel-degree 2 "
     "--parallelism.data-parallel-replicate-degree 2 --parallelism.data-parallel-shard-degree 4 "
     "--parallelism.expert-parallel-degree 8 --parallelism.pipeline-parallel-microbatch-size 1 "
     "--training.local-batch-size 4 --training.disable-cuda-graphs",
     "takes its ranks from FSDP's shards"),
    ("torchtitan deepseek_v3_671b split leaving a stage no layer", "torchtitan", 256,
     "--module deepseek_v3 --config deepseek_v3_671b --parallelism.pipeline-parallel-degree 16 "
     "--training.local-batch-size 32", "no transformer layer"),
    ("torchtitan PP with CUDA graphs", "torchtitan", 8,
     "--module llama3 --config llama3_8b --parallelism.pipeline-parallel-degree 2", "cuda-graphs"),
]

# Schedules `paci schedule --format pytorch` writes for kinds `paci plan` does not plan yet, run
# on PyTorch's gloo pipelines with the stage placement PyTorch's runtime must infer from the rows.
# name, paci schedule arguments, ranks, micro-batches, placement.
SCHEDULES = [
    ("zb-v P=4 M=8 (V-shaped)", ["--kind", "zb-v", "--stages", "4", "--microbatches", "8"], 4, 8,
     "v"),
    ("zb-v P=2 M=2 (V-shaped, M = P)", ["--kind", "zb-v", "--stages", "2", "--microbatches", "2"],
     2, 2, "v"),
    ("dualpipev P=2 M=4 (overlapped pairs, M = 2P)",
     ["--kind", "dualpipev", "--stages", "2", "--microbatches", "4"], 2, 4, "v"),
    ("dualpipev P=4 M=10 (overlapped pairs)",
     ["--kind", "dualpipev", "--stages", "4", "--microbatches", "10"], 4, 10, "v"),
]

# PyTorch's own schedules, written by its code as compute-only CSVs (dump_pytorch_schedule.py) and
# read by `paci simulate`: every cell read (each compute action, plus the U paci appends per
# stage), each stage on the rank PyTorch maps it to; where paci generates the same schedule, its
# own CSV must hold the same actions in the same order on every rank. name, schedule class, ranks,
# micro-batches, paci's kind (or None).
PYTORCH_SCHEDULES = [
    ("PyTorch's ZBVZeroBubble P=4 M=8", "ZBVZeroBubble", 4, 8, "zb-v"),
    ("PyTorch's ZBVZeroBubble P=2 M=2", "ZBVZeroBubble", 2, 2, "zb-v"),
    ("PyTorch's ZBVZeroBubble P=8 M=20", "ZBVZeroBubble", 8, 20, "zb-v"),
    ("PyTorch's Interleaved1F1B P=4 M=8", "Interleaved1F1B", 4, 8, None),
    ("PyTorch's DualPipeV P=4 M=8", "DualPipeV", 4, 8, "dualpipev"),
    ("PyTorch's DualPipeV P=3 M=7", "DualPipeV", 3, 7, "dualpipev"),
    ("PyTorch's DualPipeV P=8 M=20", "DualPipeV", 8, 20, "dualpipev"),
]
# ... and what paci cannot read, refused in one line naming it (none at present: DualPipeV's
# overlapped pairs, once refused, now read). name, class, ranks, micro-batches, kind, word.
PYTORCH_SCHEDULE_REFUSALS: list[tuple] = []

TOOL_FILE = {"pytorch": "schedule.csv", "megatron": "megatron.sh", "torchtitan": "torchtitan.sh"}


class Runner:
    def case_dir(self, name: str, prefix: str = "") -> str:
        return os.path.join(self.a.work, prefix + name.replace(" ", "_").replace("/", "_"))

    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.gloo = threading.Lock()  # one gloo world at a time: p processes on few cores
        self.results: list[tuple[bool, str]] = []

    def report(self, ok: bool, line: str) -> None:
        with self.lock:
            self.results.append((ok, line))
            print(("PASS " if ok else "FAIL ") + line, flush=True)

    def paci(self, args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([self.a.paci, "plan", *args], capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)

    def tool(self, script: str, args: list[str], timeout: int) -> tuple[bool, str]:
        cmd = [self.a.python, os.path.join(HERE, script), *args]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL,
                               env={k: v for k, v in os.environ.items()
                                    if k != "CUDA_DEVICE_MAX_CONNECTIONS"} |
                               {"PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            return False, f"{script}: timeout after {timeout} s"
        lines = [l for l in p.stdout.splitlines() if l.strip()]
        last = lines[-1] if lines else (p.stderr.strip().splitlines() or ["no output"])[-1]
        return p.returncode == 0, last

    # ------------------------------------------------------------------------------------
    def dry_run(self, path: str) -> tuple[list[str], dict]:
        env = dict(os.environ, PACI_DRY_RUN="1", MEGATRON_LM="/megatron-lm")
        for k in ("DATA_PATH", "TOKENIZER_MODEL", "NODE_RANK", "MASTER_ADDR", "SLURM_NODEID",
                  "SLURM_JOB_NODELIST"):
            env.pop(k, None)
        p = subprocess.run(["bash", path], capture_output=True, text=True, env=env, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"PACI_DRY_RUN=1 bash {os.path.basename(path)}: rc {p.returncode}: "
                               f"{p.stderr.strip()[:200]}")
        exports = {}
        with open(path) as f:
            for line in f:
                if line.startswith("export "):
                    k, _, v = line[len("export "):].strip().partition("=")
                    exports[k] = shlex.split(v)[0] if v else ""
        return p.stdout.splitlines(), exports

    def check_case(self, name, args, expected, emit) -> None:
        work = self.case_dir(name)
        shutil.rmtree(work, ignore_errors=True)
        out = os.path.join(work, "plan")
        call = [*args, "-o", out, "-q"] + (["--emit", emit] if emit else [])
        p = self.paci(call)
        if p.returncode != 0:
            self.report(False, f"{name}: paci plan rc {p.returncode}: {p.stderr.strip()[:300]}")
            return
        with open(os.path.join(out, "plan.json")) as f:
            document = json.load(f)
        plan = dict(document["plans"][0], model=document.get("model", {}))
        if expected is None:  # a search for one tool: its file, and every other file written
            expected = {emit} | {t for t, f in TOOL_FILE.items()
                                 if os.path.exists(os.path.join(out, f))}
        desc = (f"{plan['kind']} t={plan['tp']} c={plan['cp']} p={plan['pp']} d={plan['dp']} v={plan['chunks']} "
                f"M={plan['microbatches']} partition={','.join(map(str, plan['partition']))}")
        gpus = plan["tp"] * plan["cp"] * plan["pp"] * plan["dp"]
        for tool, file in TOOL_FILE.items():
            present = os.path.exists(os.path.join(out, file))
            if present != (tool in expected):
                self.report(False, f"{name}: {file} {'written' if present else 'missing'} ({desc})")
        lps = ",".join(map(str, plan["partition"]))
        jobs = []
        if "pytorch" in expected and os.path.exists(os.path.join(out, "schedule.csv")):
            jobs.append(("pytorch", lambda: self.pytorch(out, plan)))
        if "megatron" in expected and os.path.exists(os.path.join(out, "megatron.sh")):
            jobs.append(("megatron", lambda: self.megatron(out, gpus, lps, emit == "megatron",
                                                            p.stdout, plan)))
        if "torchtitan" in expected and os.path.exists(os.path.join(out, "torchtitan.sh")):
            jobs.append(("torchtitan", lambda: self.torchtitan(out, gpus, lps,
                                                                emit == "torchtitan", p.stdout,
                                                                plan["zero"],
                                                                plan["shard_group"],
                                                                plan.get("ep", 1))))
        if emit == "pytorch" and os.path.exists(os.path.join(out, "schedule.csv")):
            body = [l for l in p.stdout.splitlines() if l and not l.startswith("#")]
            with open(os.path.join(out, "schedule.csv")) as f:
                if body != [l for l in f.read().splitlines() if l]:
                    self.report(False, f"{name}: --emit pytorch differs from schedule.csv")
        for tool, job in jobs:
            try:
                ok, line = job()
            except Exception as e:  # a dry run that failed, a file that is not there
                ok, line = False, f"{type(e).__name__}: {e}"
            self.report(ok, f"{name} [{desc}] {tool}: {line}")

    def pytorch(self, out, plan):
        with self.gloo:
            return self.tool("check_pytorch.py", [
                "--csv", os.path.join(out, "schedule.csv"), "--microbatches",
                str(plan["microbatches"]), "--ranks", str(plan["pp"]), "--placement",
                "v" if plan["kind"] in ("zb-v", "dualpipev") else "loop",
                "--timeout", "240", "--pg-timeout", "120"], 300)

    def megatron(self, out, gpus, lps, emitted, stdout, plan):
        words, env = self.dry_run(os.path.join(out, "megatron.sh"))
        i = words.index("/megatron-lm/pretrain_gpt.py")
        flags = words[i + 1:]
        if emitted:
            printed = shlex.split(stdout, comments=True)
            if flags[:len(printed)] != printed:
                return False, "--emit megatron's flags are not megatron.sh's"
        path = os.path.join(out, "megatron.flags")
        with open(path, "w") as f:
            f.write(shlex.join(flags) + "\n")
        # The plan's ZeRO stage and GEMM precision must be what Megatron-LM makes of the flags.
        base = ["--flags-file", path, "--world", str(gpus), "--layers-per-stage", lps]
        for key in ("zero", "precision", "grad_dtype", "shard_group", "offload_layers",
                    "fp8_param_gather", "moments_dtype", "ep"):
            base += ["--expect", f"{key}={plan[key]}"]
        if plan["pp"] > 1:  # the pipeline sends overlapped or waited on, as planned
            base += ["--expect", f"overlap_p2p={plan['overlap_p2p']}"]
        if plan.get("model", {}).get("experts"):
            base += ["--expect", f"experts={plan['model']['experts']}",
                     "--expect", f"top_k={plan['model']['top_k']}", "--expect", "etp=1"]
            for key in MOE_FACTS:
                base += ["--expect", f"{key}={plan['model'][key]}"]
        for k, v in env.items():
            base += ["--env", f"{k}={v}"]
        ok, line = self.tool("check_megatron.py", base, 300)
        if ok and self.a.megatron_lm:
            ok, line2 = self.tool("check_megatron.py", [*base, "--tree", self.a.megatron_lm], 300)
            line = f"{line} | {line2}"
        return ok, line

    def torchtitan(self, out, gpus, lps, emitted, stdout, zero, shards, ep=1):
        words, _ = self.dry_run(os.path.join(out, "torchtitan.sh"))
        i = words.index("torchtitan.train")
        args = words[i + 1:]
        if emitted:
            printed = shlex.split(stdout, comments=True)
            rest = list(args)
            at = rest.index("--training.steps") if "--training.steps" in rest else -1
            if at >= 0:
                del rest[at:at + 2]  # the script's TRAIN words, not --emit's
            if rest != printed:
                return False, "--emit torchtitan's words are not torchtitan.sh's"
        path = os.path.join(out, "torchtitan.args")
        with open(path, "w") as f:
            f.write(shlex.join(args) + "\n")
        return self.tool("check_torchtitan.py", ["--args-file", path, "--world", str(gpus),
                                                 "--layers-per-stage", lps, "--timeout", "300",
                                                 "--expect", f"zero={zero}",
                                                 "--expect", f"shard_group={shards}",
                                                 "--expect", f"ep={ep}"], 330)

    def self_test(self) -> None:
        """Each checker must fail on a plan it should refuse: the first case's files with a
        wrong partition (16,16 for paci's 15,17) and a CSV with one action dropped."""
        name = CASES[0][0]
        out = os.path.join(self.case_dir(name), "plan")
        if not os.path.exists(os.path.join(out, "torchtitan.args")):
            self.report(False, f"self-test: {name} left no files to mutate")
            return
        wrong = "16,16"
        for script, args in (
            ("check_torchtitan.py", ["--args-file", os.path.join(out, "torchtitan.args"),
                                     "--world", "8", "--layers-per-stage", wrong]),
            ("check_megatron.py", ["--flags-file", os.path.join(out, "megatron.flags"), "--world",
                                   "8", "--layers-per-stage", wrong,
                                   "--env", "CUDA_DEVICE_MAX_CONNECTIONS=1"]),
            ("check_megatron.py", ["--flags-file", os.path.join(out, "megatron.flags"), "--world",
                                   "8", "--layers-per-stage", "15,17"]),  # no env variable
            ("check_megatron.py", ["--flags-file", os.path.join(out, "megatron.flags"), "--world",
                                   "8", "--layers-per-stage", "15,17",
                                   "--env", "CUDA_DEVICE_MAX_CONNECTIONS=1",
                                   "--expect", "precision=fp8"]),  # a bf16 plan read as FP8
        ):
            ok, line = self.tool(script, args, 300)
            self.report(not ok, f"self-test {script} {' '.join(args[-3:])} must fail: {line}")
        # DeepSeek-V3's dense first layers: a pattern with one fewer must be caught by
        # megatron-core's layer specs, on the plan's own split.
        ds = os.path.join(self.case_dir(next(c[0] for c in CASES if c[0].startswith("deepseek"))),
                          "plan")
        try:
            with open(os.path.join(ds, "megatron.flags")) as f:
                words = shlex.split(f.read())
            with open(os.path.join(ds, "plan.json")) as f:
                split = json.load(f)["plans"][0]["partition"]
            words[words.index("--moe-layer-freq") + 1] = "([0]*2+[1]*59)"
        except (OSError, ValueError, KeyError, IndexError) as e:
            self.report(False, f"self-test: the deepseek-v3 case left no flags to mutate: {e}")
        else:
            bad_flags = os.path.join(ds, "two_dense.flags")
            with open(bad_flags, "w") as f:
                f.write(shlex.join(words) + "\n")
            ok, line = self.tool("check_megatron.py", [
                "--flags-file", bad_flags, "--world", "256", "--layers-per-stage",
                ",".join(map(str, split)), "--expect", "dense_layers=3"], 300)
            self.report(not ok and "dense_layers" in line,
                        f"self-test check_megatron.py with 2 dense layers for 3 must fail on "
                        f"them: {line}")
        with open(os.path.join(out, "schedule.csv")) as f:
            rows = [r.split(",") for r in f.read().splitlines()]
        rows[1] = [c for c in rows[1] if c != "1B3"]  # stage 1 never runs micro-batch 3 back
        bad = os.path.join(out, "dropped.csv")
        with open(bad, "w") as f:
            f.write("\n".join(",".join(r) for r in rows) + "\n")
        with self.gloo:
            ok, line = self.tool("check_pytorch.py", ["--csv", bad, "--microbatches", "16",
                                                      "--ranks", "2", "--timeout", "120"], 150)
        self.report(not ok, f"self-test check_pytorch.py with 1B3 dropped must fail: {line}")

    def from_args(self, tool, gpus, launch) -> list[str]:
        return [f"--from-{tool}", launch, *H100] + (["--gpus", str(gpus)] if gpus else [])

    def check_read(self, name, tool, gpus, launch) -> None:
        """paci's reading of a user's launch against the tool's own reading of the same words."""
        work = self.case_dir(name, "read_")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        doc = os.path.join(work, "plan.json")
        p = self.paci([*self.from_args(tool, gpus, launch), "--json", doc, "-q", "--top", "1"])
        if p.returncode != 0:
            self.report(False, f"read {name}: paci plan rc {p.returncode}: {p.stderr.strip()[:300]}")
            return
        with open(doc) as f:
            read = json.load(f)["launch"]
        plan = read["plan"]
        world = plan["tp"] * plan["cp"] * plan["pp"] * plan["dp"]
        lps = ",".join(map(str, plan["partition"]))
        words = shlex.split(launch)
        if tool == "megatron":
            # The launch's leading NAME=VALUE words are its environment; the flags follow the
            # program (pretrain_gpt.py) when there is one, else the environment.
            n_env = next((i for i, w in enumerate(words) if not ENV_WORD.match(w)), len(words))
            env = words[:n_env]
            at = next((i for i, w in enumerate(words) if w.endswith(".py")), n_env - 1)
            path = os.path.join(work, "megatron.flags")
            with open(path, "w") as f:
                f.write(shlex.join(words[at + 1:]) + "\n")
            expect = {"t": plan["tp"], "p": plan["pp"], "vp": plan["chunks"], "d": plan["dp"],
                      "M": plan["microbatches"], "mbs": plan["microbatch_size"],
                      "sp": plan["sequence_parallel"], "recompute": plan["recompute"],
                      "zero": plan["zero"], "cp": plan["cp"], "cp_comm": plan["cp_comm"],
                      "precision": plan["precision"], "grad_dtype": plan["grad_dtype"],
                      "shard_group": plan["shard_group"],
                      "offload_layers": plan["offload_layers"],
                      "fp8_param_gather": plan["fp8_param_gather"],
                      "moments_dtype": plan["moments_dtype"], "ep": plan["ep"]}
            if plan["pp"] > 1:
                expect["overlap_p2p"] = plan["overlap_p2p"]
            with open(doc) as f:
                model = json.load(f).get("model", {})
            if model.get("experts"):
                expect.update(experts=model["experts"], top_k=model["top_k"], etp=1,
                              **{key: model[key] for key in MOE_FACTS})
            args = ["--flags-file", path, "--world", str(world), "--layers-per-stage", lps]
            for e in env:
                args += ["--env", e]
            script = "check_megatron.py"
        else:
            path = os.path.join(work, "torchtitan.args")
            with open(path, "w") as f:
                f.write(shlex.join(words) + "\n")
            expect = {"tp": plan["tp"], "pp": plan["pp"], "dp": plan["dp"],
                      "M": plan["microbatches"], "sp": plan["sequence_parallel"],
                      "recompute": plan["recompute"], "gbs": read["global_batch"],
                      "seq_len": read["seq_len"], "zero": plan["zero"], "cp": plan["cp"],
                      "shard_group": plan["shard_group"], "ep": plan["ep"]}
            args = ["--args-file", path, "--world", str(world), "--layers-per-stage", lps,
                    "--timeout", "300"]
            script = "check_torchtitan.py"
        for k, v in expect.items():
            args += ["--expect", f"{k}={v}"]
        ok, line = self.tool(script, args, 330)
        self.report(ok, f"read {name} [paci: {plan['kind']} t={plan['tp']} p={plan['pp']} "
                        f"d={plan['dp']} v={plan['chunks']} M={plan['microbatches']} "
                        f"partition={lps}] {tool}: {line}")

    def check_read_refusal(self, name, tool, gpus, launch, word) -> None:
        p = self.paci(self.from_args(tool, gpus, launch))
        err = [l for l in p.stderr.splitlines() if l.strip()]
        ok = p.returncode == 2 and len(err) == 1 and word in err[0] and not p.stdout.strip()
        self.report(ok, f"read refusal {name}: rc {p.returncode}: {' | '.join(err)[:300]}")

    def check_schedule(self, name, args, ranks, m, placement) -> None:
        work = self.case_dir(name, "schedule_")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        path = os.path.join(work, "schedule.csv")
        p = subprocess.run([self.a.paci, "schedule", *args, "--format", "pytorch", "-o", path],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            self.report(False, f"schedule {name}: paci schedule rc {p.returncode}: "
                               f"{p.stderr.strip()[:300]}")
            return
        with self.gloo:
            ok, line = self.tool("check_pytorch.py", [
                "--csv", path, "--microbatches", str(m), "--ranks", str(ranks), "--placement",
                placement, "--timeout", "240", "--pg-timeout", "120"], 300)
        self.report(ok, f"schedule {name} pytorch: {line}")

    def check_pytorch_schedule(self, name, cls, ranks, m, kind, refused_word=None) -> None:
        work = self.case_dir(name, "torch_")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        path = os.path.join(work, f"{cls}.csv")
        ok, line = self.tool("dump_pytorch_schedule.py", ["--schedule", cls, "--ranks", str(ranks),
                                                          "--microbatches", str(m), "--out", path],
                             120)
        if not ok:
            self.report(False, f"{name}: {line}")
            return
        report = os.path.join(work, "report.json")
        p = subprocess.run([self.a.paci, "simulate", path, "--tf", "1", "--tb", "2", "--tw", "1",
                            "--json", report, "-q"], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        err = [l for l in p.stderr.splitlines() if l.strip()]
        if refused_word is not None:
            good = p.returncode == 2 and len(err) == 1 and refused_word in err[0]
            self.report(good, f"{name} refused: rc {p.returncode}: {' | '.join(err)[:300]}")
            return
        if p.returncode != 0:
            self.report(False, f"{name}: paci simulate rc {p.returncode}: {' | '.join(err)[:300]}")
            return
        with open(report) as f:
            r = json.load(f)
        with open(path + ".placement") as f:
            ranks_of = [int(x) for x in f.read().strip().split(",")]
        with open(path, newline="") as f:  # an overlapped pair's cell holds two actions
            cells = sum(2 if "OVERLAP_F_B" in c else 1
                        for row in csv.reader(f) for c in row if c.strip())
        devices = [st["device"] for st in sorted(r["stages"], key=lambda st: st["stage"])]
        problems = []
        if devices != ranks_of:
            problems.append(f"stage devices {devices}, PyTorch's ranks {ranks_of}")
        if r["schedule"]["actions"] != cells + len(ranks_of):
            problems.append(f"{r['schedule']['actions']} actions read of {cells} in the cells "
                            f"+ {len(ranks_of)} U")
        same = ""
        if kind is not None:
            own = os.path.join(work, "paci.csv")
            q = subprocess.run([self.a.paci, "schedule", "--kind", kind, "--stages", str(ranks),
                                "--microbatches", str(m), "--format", "pytorch", "-o", own],
                               capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
            if q.returncode != 0:
                problems.append(f"paci schedule --kind {kind}: rc {q.returncode}")
            else:
                def rows(file):
                    with open(file, newline="") as f:
                        return [[c for c in row if c.strip()] for row in csv.reader(f)]
                theirs, mine = rows(path), rows(own)
                if theirs != mine:
                    at = next((i for i, (x, y) in enumerate(zip(theirs, mine)) if x != y), 0)
                    problems.append(f"paci's {kind} differs on rank {at}")
                else:
                    same = f"; paci's {kind} is the same order, cell for cell"
        self.report(not problems, f"{name}: paci read {cells} actions, {len(ranks_of)} stages on "
                                  f"{r['schedule']['devices']} ranks as PyTorch places them, "
                                  f"makespan {r['makespan_s']:g} at F=I=W=1{same}"
                                  + (f": {'; '.join(problems)}" if problems else ""))

    def check_refusal(self, name, args, word) -> None:
        work = self.case_dir(name, "refuse_")
        shutil.rmtree(work, ignore_errors=True)
        out = os.path.join(work, "plan")
        for call in (args, [*args, "-o", out]):
            p = self.paci(call)
            err = [l for l in p.stderr.splitlines() if l.strip()]
            problems = []
            if p.returncode != 2:
                problems.append(f"rc {p.returncode}")
            if len(err) != 1 or word not in err[0]:
                problems.append(f"stderr {err!r:.300}")
            if p.stdout.strip():
                problems.append(f"stdout {p.stdout.strip()[:100]!r}")
            if os.path.exists(out) and os.listdir(out):
                problems.append(f"-o DIR holds {sorted(os.listdir(out))}")
            with_o = " with -o DIR" if "-o" in call else ""
            if problems:
                self.report(False, f"refusal {name}{with_o}: {'; '.join(problems)}")
            else:
                self.report(True, f"refusal {name}{with_o}: {err[0]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paci", required=True)
    ap.add_argument("--python", default=sys.executable, help="python with the pinned tools")
    ap.add_argument("--work", help="folder for the plans (default: a temporary one, removed)")
    ap.add_argument("--megatron-lm", help="a Megatron-LM checkout: also its own parse_args")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="cases whose name contains this")
    ap.add_argument("--summary", help="write the counts here as JSON (docs/results/interop.json, "
                    "which the README's line is made from)")
    a = ap.parse_args()
    a.paci = os.path.abspath(a.paci)
    keep = a.work is not None
    a.work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="paci-interop-"))
    os.makedirs(a.work, exist_ok=True)
    r = Runner(a)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = [pool.submit(r.check_case, *c) for c in CASES if a.only in c[0]]
        futures += [pool.submit(r.check_refusal, *c) for c in REFUSALS if a.only in c[0]]
        futures += [pool.submit(r.check_schedule, *c) for c in SCHEDULES if a.only in c[0]]
        futures += [pool.submit(r.check_pytorch_schedule, *c) for c in
                    PYTORCH_SCHEDULES + PYTORCH_SCHEDULE_REFUSALS if a.only in c[0]]
        futures += [pool.submit(r.check_read, *c) for c in READS if a.only in c[0]]
        futures += [pool.submit(r.check_read_refusal, *c) for c in READ_REFUSALS
                    if a.only in c[0]]
        for f in futures:
            f.result()
    if not a.only:
        r.self_test()
    failed = sum(1 for ok, _ in r.results if not ok)
    seconds = time.monotonic() - start
    print(f"interop: {len(r.results) - failed} of {len(r.results)} checks passed in "
          f"{seconds:.0f} s" + (f"; plans in {a.work}" if keep else ""))
    if a.summary and not a.only:
        with open(a.summary + ".tmp", "w") as f:
            json.dump({"checks": len(r.results), "passed": len(r.results) - failed,
                       "seconds": round(seconds), "plans": len(CASES), "schedules": len(SCHEDULES),
                       "pytorch_schedules": len(PYTORCH_SCHEDULES),
                       "pytorch_schedule_refusals": len(PYTORCH_SCHEDULE_REFUSALS),
                       "refusals": len(REFUSALS),
                       "launches": len(READS), "refused_launches": len(READ_REFUSALS),
                       "self_tests": sum(1 for _, line in r.results if line.startswith("self-test"))},
                      f, indent=2)
            f.write("\n")
        os.replace(a.summary + ".tmp", a.summary)
    if not keep:
        shutil.rmtree(a.work, ignore_errors=True)
    return 1 if failed or not r.results else 0


if __name__ == "__main__":
    sys.exit(main())
