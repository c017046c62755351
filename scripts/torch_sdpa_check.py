"""Runs SGLang's real VisionSdpaAttention under real torch on generated calls
and compares each outcome with varlen's faithful mode.

For every generated call it writes a varlen case (the ground-truth geometry,
exactly what the caller passes, no expectation), runs the same call through
the VisionSdpaAttention class taken verbatim from SGLang's vision.py, and
classifies torch's outcome:

  error        the exception's class and message;
  success      the output matches a float64 per-sequence reference of the
               ground truth;
  corruption   it does not.

Then `varlen repro --json` runs every case, and the two outcomes must be the
same (for errors: the same class and message). Disagreements are printed and
the script exits 1.

Usage (scripts/torch-sdpa-check sets up the environment):
  python torch_sdpa_check.py --vision vision.py --varlen build/release/cli/varlen \
      --sglang 0.5.23 [--calls 400] [--seed 1] [--keep DIR]
"""

import argparse
import ast
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from functools import lru_cache
from typing import Any, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

DTYPES = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
}
INT_DTYPES = {"int32": torch.int32, "int64": torch.int64, "bool": torch.bool}


def load_sglang_classes(vision_py):
    """VisionSdpaAttention and SingletonCache, executed from SGLang's source."""
    tree = ast.parse(open(vision_py).read())
    wanted = {"VisionSdpaAttention", "SingletonCache"}
    nodes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in wanted]
    if {n.name for n in nodes} != wanted:
        sys.exit(f"{vision_py}: expected classes {sorted(wanted)}")
    import dataclasses

    namespace = dict(math=math, torch=torch, nn=nn, F=F, lru_cache=lru_cache, Optional=Optional,
                     Any=Any, rearrange=rearrange, dataclasses=dataclasses)
    exec(compile(ast.Module(body=nodes, type_ignores=[]), vision_py, "exec"), namespace)
    return namespace["VisionSdpaAttention"], namespace["SingletonCache"]


# ---------------------------------------------------------------------------
# Generation: one call = the case JSON plus the Python values it spells.


def offsets_of(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def gen_cu(rng, lengths, tokens, bsz):
    """A cu_seqlens argument: mostly tensors, right or wrong."""
    true_offsets = offsets_of(lengths)
    kind = rng.choices(["none", "tensor", "not_tensor"], [2, 12, 1])[0]
    if kind == "none":
        return None
    if kind == "not_tensor":
        return rng.choice([{"json": [0, tokens]}, {"json": tokens}, {"json": "0,5"},
                           {"json": True}, {"json": {"singleton_cache": None}}])
    shape = None
    choice = rng.randrange(10)
    if choice < 4:
        values = true_offsets
    elif choice == 4:  # one sequence per batch item
        s = tokens // bsz
        values = [i * s for i in range(bsz + 1)]
    elif choice == 5:  # a boundary dropped or added
        values = list(true_offsets)
        if len(values) > 2 and rng.random() < 0.5:
            del values[rng.randrange(1, len(values) - 1)]
        else:
            values.insert(rng.randrange(1, len(values)), rng.randrange(0, tokens + 1))
            values.sort()
    elif choice == 6:  # ends short or long
        values = list(true_offsets)
        values[-1] = max(0, values[-1] + rng.choice([-3, -1, 1, 5]))
    elif choice == 7:  # non-monotone or negative
        values = list(true_offsets)
        i = rng.randrange(len(values))
        values[i] = rng.choice([-2, -1, values[i] + 7, tokens + 10])
    elif choice == 8:  # an empty or single-entry tensor
        values = rng.choice([[], [0], [tokens]])
    else:  # another shape
        values = true_offsets
        shape = rng.choice([[], [len(values), 1], [1, len(values)], [0, 1]])
        if shape == []:
            values = [tokens]
        elif shape == [0, 1]:
            values = []
    dtype = rng.choices(["int32", "int64", "float32", "bool"], [8, 4, 1, 1])[0]
    if dtype == "bool":
        values = [1 if v else 0 for v in values]
    literal = {"tensor": [float(v) if dtype == "float32" else v for v in values], "dtype": dtype,
               "device": rng.choice(["cpu", "cuda"])}
    if dtype == "bool":
        literal["tensor"] = [bool(v) for v in values]
    if shape is not None:
        literal["shape"] = shape
    return {"json": literal}


def gen_call(rng, index, sglang):
    count = rng.randint(1, 4)
    lengths = [rng.choice([0, 1, rng.randint(1, 12), rng.randint(1, 40)]) for _ in range(count)]
    tokens = sum(lengths)
    heads = rng.choice([1, 2, 4])
    kv_heads = rng.choice([d for d in (1, 2, 4) if heads % d == 0])
    head_dim = rng.choice([4, 8, 16, 72])
    head_dim_v = head_dim if rng.random() < 0.85 else rng.choice([4, 8, 16])
    dtype = rng.choice(list(DTYPES))
    flatten = rng.random() < 0.5
    single = rng.random() < 0.4
    layer = tokens > 0 and rng.random() < 0.3
    divisors = [b for b in range(1, 5) if tokens % b == 0] if tokens else [1, 2, 3]
    if layer:
        bsz = rng.choice(divisors) if rng.random() < 0.4 else 1
    else:
        bsz = 1 if rng.random() < 0.6 else rng.randint(1, 4)
    call = {"profile": "sdpa", "entry": "layer" if layer else "direct",
            "sdpa": {"flatten_batch": flatten, "softmax_in_single_precision": single}}
    if bsz != 1:
        call["bsz"] = bsz
        if layer:
            call["seq_len"] = tokens // bsz
        else:
            call["seq_len"] = tokens // bsz
    cu = gen_cu(rng, lengths, tokens, bsz)
    if cu is not None:
        call["cu_seqlens"] = cu["json"]
    construction = None
    kwargs = {}
    if layer:
        scale = rng.choices([None, 0.125, 1, "0.5", True], [6, 2, 1, 1, 1])[0]
        kwargs["softmax_scale"] = scale
        construction = scale
    else:
        if rng.random() < 0.25:
            construction = rng.choice([0.125, 0.3, 1.0])
            call["sdpa"]["softmax_scale"] = construction
        if rng.random() < 0.2:
            kwargs["softmax_scale"] = 0.5  # ignored by sdpa
    if kwargs:
        call["kwargs"] = kwargs
    geometry = {"seq_lens": lengths, "num_heads": heads, "num_kv_heads": kv_heads,
                "head_dim": head_dim, "head_dim_v": head_dim_v, "dtype": dtype}
    if isinstance(construction, (float, int)):  # the scale the caller means
        geometry["softmax_scale"] = float(construction)
    case = {
        "name": f"torch-sdpa-{index}",
        "source": "scripts/torch-sdpa-check",
        "sglang": sglang,
        "mode": "faithful",
        "geometry": geometry,
        "data": {"seed": index, "distribution": "normal"},
        "call": call,
    }
    return case, construction


# ---------------------------------------------------------------------------
# The torch run.


def python_value(literal, singleton_cache):
    if isinstance(literal, dict) and "tensor" in literal:
        dtype = INT_DTYPES.get(literal["dtype"]) or DTYPES[literal["dtype"]]
        t = torch.tensor(literal["tensor"], dtype=dtype)
        if "shape" in literal:
            t = t.reshape(literal["shape"])
        return t
    if isinstance(literal, dict) and "singleton_cache" in literal:
        return singleton_cache()
    return literal


def reference(module_args, q, k, v, lengths, sdpa_class):
    """The same torch path with the ground truth's block-diagonal mask.

    Comparing with the path's own arithmetic, rather than with float64,
    separates wrong arguments (what this check is about) from the precision
    of the path (bfloat16 logits in the single-precision path, say)."""
    module = sdpa_class(**dict(module_args, flatten_batch=True))
    sdpa_class._generate_mask_cache.cache_clear()
    truth = torch.tensor(offsets_of(lengths), dtype=torch.int32)
    return module.forward(q, k, v, bsz=1, cu_seqlens=truth)


def torch_outcome(case, construction, sdpa_class, singleton_cache):
    g, call = case["geometry"], case["call"]
    gen = torch.Generator().manual_seed(case["data"]["seed"])
    dtype = DTYPES[g["dtype"]]
    tokens = sum(g["seq_lens"])
    q = torch.randn(tokens, g["num_heads"], g["head_dim"], generator=gen).to(dtype)
    k = torch.randn(tokens, g["num_kv_heads"], g["head_dim"], generator=gen).to(dtype)
    v = torch.randn(tokens, g["num_kv_heads"], g["head_dim_v"], generator=gen).to(dtype)
    module_args = dict(head_dim=g["head_dim"], num_heads=g["num_heads"],
                       num_kv_heads=g["num_kv_heads"],
                       flatten_batch=call["sdpa"]["flatten_batch"],
                       softmax_in_single_precision=call["sdpa"]["softmax_in_single_precision"],
                       softmax_scale=construction)
    module = sdpa_class(**module_args)
    kwargs = dict(call.get("kwargs", {}))
    if call["entry"] == "layer":  # what VisionAttention passes besides the tensors
        kwargs.update(seq_len=call.get("seq_len", tokens), sequence_lengths=None,
                      max_seqlen=None, output_ws=None, window_size=(-1, -1), s_aux=None,
                      forward_metadata=None)
    cu = python_value(call["cu_seqlens"], singleton_cache) if "cu_seqlens" in call else None
    # The mask cache is keyed on (s, flatten_batch, tuple(cu)), where 0.0 == 0:
    # start every call from an empty cache, as varlen's model does.
    sdpa_class._generate_mask_cache.cache_clear()
    try:
        out = module.forward(q, k, v, bsz=call.get("bsz", 1), cu_seqlens=cu, **kwargs)
    except Exception as e:  # noqa: BLE001 -- every exception is an outcome
        return {"observed": "error", "text": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")}
    expected = reference(module_args, q, k, v, g["seq_lens"], sdpa_class).double()
    got = out.double()
    if got.shape != expected.shape:  # e.g. no tokens, where head dims need not agree
        return {"observed": "success" if got.numel() == expected.numel() == 0
                else "silent corruption"}
    tolerance = 1e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-5
    bad = (~torch.isfinite(got)) | ((got - expected).abs() > tolerance * (1 + expected.abs()))
    return {"observed": "silent corruption" if bool(bad.any()) else "success"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vision", required=True, help="SGLang's vision.py")
    parser.add_argument("--varlen", required=True, help="the varlen command")
    parser.add_argument("--sglang", default="0.5.23", help="the version the cases name")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="write the generated cases here and keep them")
    args = parser.parse_args()

    torch.manual_seed(0)
    sdpa_class, singleton_cache = load_sglang_classes(args.vision)
    rng = random.Random(args.seed)
    folder = args.keep or tempfile.mkdtemp(prefix="torch-sdpa-")
    os.makedirs(folder, exist_ok=True)
    expected = {}
    for i in range(args.calls):
        case, construction = gen_call(rng, i, args.sglang)
        with open(os.path.join(folder, case["name"] + ".json"), "w") as f:
            json.dump(case, f, indent=1)
        expected[case["name"]] = (torch_outcome(case, construction, sdpa_class, singleton_cache),
                                  case)

    run = subprocess.run([args.varlen, "repro", folder, "--json", "--backend=cpu_reference"],
                         capture_output=True, text=True)
    if run.returncode == 2:
        sys.exit(f"varlen refused a generated case:\n{run.stderr}")
    if run.returncode not in (0, 1):
        sys.exit(f"varlen exited with status {run.returncode} on the cases in {folder}:\n"
                 f"{run.stderr[-2000:]}")
    results = json.loads(run.stdout)["results"]
    disagreements = 0
    for r in results:
        ours = {"observed": r["observed"]}
        if r["observed"] == "error":
            ours["text"] = r["error"]["text"]
        theirs, case = expected[r["case"]]
        if ours != theirs:
            disagreements += 1
            print(f"DISAGREE {r['case']}: torch {theirs}, varlen {ours}")
            print("  call:", json.dumps(case["call"]), "geometry:", json.dumps(case["geometry"]))
    counts = {}
    for theirs, _ in expected.values():
        counts[theirs["observed"]] = counts.get(theirs["observed"], 0) + 1
    print(f"torch {torch.__version__} (CPU), SGLang {args.sglang} VisionSdpaAttention: "
          f"{len(results)} calls ({', '.join(f'{n} {k}' for k, n in sorted(counts.items()))}); "
          f"{len(results) - disagreements} agree, {disagreements} disagree"
          + (f"; cases in {folder}" if args.keep or disagreements else ""))
    sys.exit(1 if disagreements else 0)


if __name__ == "__main__":
    main()
