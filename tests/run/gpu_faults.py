#!/usr/bin/env python3
"""Real device faults through supervised runs, on a GPU machine: the cuda
backend with a planted fault (tests/run/gpu_fault_backend_plugin.cc) run by
`varlen repro` over a quarter of the corpus, one run per fault kind, and
`varlen check` on the smoke tier under an illegal address:

  * the run finishes, with every case (check) of the fault-free run;
  * each keeps its fault-free verdict or fails with the fault's kind, its
    summary naming the CUDA error (cudaErrorIllegalAddress,
    cudaErrorAssert); a spinning kernel is a TIMEOUT at the deadline;
  * some case faulted, and the cases after it still ran (fresh workers).

Then two facts about the device that supervised runs rely on: whether it
has a kernel run-time limit (cudaDevAttrKernelExecTimeout), and how long the
device memory of a killed process takes to come back.

    gpu_faults.py VARLEN PLUGIN CORPUS_DIR SCRATCH_DIR [--json=OUT]
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from check_plugin import verdicts

# fault -> (the kind a faulty case fails with, text its summary must hold,
#           the deadline in seconds)
FAULTS = {
    "illegal_address": ("CRASH", "cudaErrorIllegalAddress", 60),
    "device_assert": ("CRASH", "cudaErrorAssert", 60),
    "spin": ("TIMEOUT", "", 5),
}
CORPUS_STEP = 4  # every fourth regression case


def clean_env(fault):
    env = {k: v for k, v in os.environ.items()
           if k not in ("VARLEN_WORKER", "VARLEN_LOAD", "GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX")}
    env["VARLEN_TEST_GPU_FAULT"] = fault
    return env


def replay(varlen, plugin, corpus, log, fault, deadline):
    """case -> (verdict, fault kind, fault summary) from `varlen repro DIR --json`."""
    args = [varlen, "repro", corpus, f"--load={plugin}", "--backend=gpu_fault_backend", "--json",
            f"--deadline_s={deadline}", "--worker_memory_mb=16384"]
    started = time.monotonic()
    with open(log, "w") as err:
        run = subprocess.run(args, env=clean_env(fault), stdout=subprocess.PIPE, stderr=err,
                             text=True, timeout=300)
    results = json.loads(run.stdout)["results"]
    return run.returncode, time.monotonic() - started, {
        r["case"]: (r["verdict"], r.get("fault", {}).get("kind"), r.get("fault", {}).get("summary", ""))
        for r in results}


def check(varlen, plugin, out, fault, deadline):
    """`varlen check` on the backend: the corpus and the smoke tier's properties."""
    os.makedirs(out, exist_ok=True)
    args = [varlen, "check", f"--load={plugin}", "--backends=gpu_fault_backend",
            "--budget_scale=0.1", "--counts_only", f"--deadline_s={deadline}",
            "--worker_memory_mb=16384", f"--report={out}"]
    started = time.monotonic()
    with open(out + ".log", "w") as log:
        code = subprocess.run(args, env=clean_env(fault), stdout=log, stderr=subprocess.STDOUT,
                              timeout=300).returncode
    return code, time.monotonic() - started


def kernel_time_limit():
    """cudaDevAttrKernelExecTimeout of device 0 (1: the driver stops long kernels)."""
    try:
        from cuda.bindings import runtime  # cuda-python
        error, value = runtime.cudaDeviceGetAttribute(
            runtime.cudaDeviceAttr.cudaDevAttrKernelExecTimeout, 0)
        return int(value) if int(error) == 0 else f"error {error}"
    except Exception as e:  # no bindings: say so
        return f"not read: {type(e).__name__}: {e}"


HOLDER = """
import sys, time, torch
block = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
block.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(600)
"""


def memory_return_seconds():
    """Seconds from SIGKILL of a process holding 8 GiB of device memory until
    the device's free memory is back (within 256 MiB), read by nvidia-smi."""
    def used_mib():
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        return int(out.split()[0])
    try:
        before = used_mib()
        holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
        if holder.stdout.readline().strip() != "ready":
            holder.kill()
            return "not measured: the holder did not start"
        held = used_mib()
        os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()
        holder.wait()
        while used_mib() > before + 256:
            if time.monotonic() - killed > 30:
                return f"not back after 30 s ({used_mib()} MiB used, {before} before)"
            time.sleep(0.01)
        return {"seconds": round(time.monotonic() - killed, 3), "held_mib": held - before}
    except Exception as e:
        return f"not measured: {type(e).__name__}: {e}"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--json=")]
    json_out = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--json=")), None)
    varlen, plugin, corpus, scratch = args[:4]
    shutil.rmtree(scratch, ignore_errors=True)
    small = os.path.join(scratch, "corpus")
    os.makedirs(small)
    for name in sorted(f for f in os.listdir(corpus) if f.endswith(".json"))[::CORPUS_STEP]:
        shutil.copy(os.path.join(corpus, name), small)

    summary = {"faults": {}}
    problems = []
    code, seconds, baseline = replay(varlen, plugin, small, os.path.join(scratch, "none.log"),
                                     "none", 60)
    print(f"fault-free: varlen repro exit {code}, {len(baseline)} cases, {seconds:.1f} s")
    failing = [c for c, (verdict, _, _) in baseline.items() if verdict == "FAIL"]
    if failing:
        problems.append(f"fault-free: {len(failing)} cases fail on the cuda backend: {failing[:5]}")
    for fault, (want, text, deadline) in FAULTS.items():
        code, seconds, got = replay(varlen, plugin, small, os.path.join(scratch, fault + ".log"),
                                    fault, deadline)
        faulted = {c: r for c, r in got.items() if r[1] == want}
        named = [c for c, r in faulted.items() if text in r[2]]
        first = next(iter(faulted.items()), None)
        print(f"{fault}: varlen repro exit {code}, {len(faulted)} of {len(got)} cases {want}, "
              f"{seconds:.1f} s")
        if first:
            print(f"  {first[0]}: {first[1][2][:300]}")
        summary["faults"][fault] = {"exit": code, "cases": len(got), "faulted": len(faulted),
                                    "named": len(named), "seconds": round(seconds, 1),
                                    "first": f"{first[0]}: {first[1][2][:400]}" if first else ""}
        if set(got) != set(baseline):
            problems.append(f"{fault}: not the fault-free run's cases")
        for case, (verdict, kind, _) in got.items():
            if kind != want and verdict != baseline.get(case, (None,))[0]:
                problems.append(f"{fault}: {case} is {verdict} ({kind}), neither its fault-free "
                                f"verdict nor {want}")
        if not faulted:
            problems.append(f"{fault}: no case faulted")
        if len(named) != len(faulted):
            problems.append(f"{fault}: {len(faulted) - len(named)} faulted cases do not name {text}")

    # The whole smoke tier under one fault: properties meet it, shrink through
    # fresh workers, and the run ends with every check reported.
    runs = {}
    for fault in ("none", "illegal_address"):
        out = os.path.join(scratch, "check-" + fault)
        code, seconds = check(varlen, plugin, out, fault, 60)
        runs[fault], _ = verdicts(out)
        failed = [k for k, (status, _) in runs[fault].items() if status == "FAIL"]
        print(f"varlen check, {fault}: exit {code}, {len(failed)} of {len(runs[fault])} checks "
              f"failed, {seconds:.1f} s")
        summary["faults"][f"check {fault}"] = {"exit": code, "checks": len(runs[fault]),
                                              "failed": len(failed), "seconds": round(seconds, 1)}
    if set(runs["none"]) != set(runs["illegal_address"]):
        problems.append("varlen check under illegal_address: not the fault-free run's checks")
    for key, verdict in runs["illegal_address"].items():
        if verdict != runs["none"].get(key) and verdict != ("FAIL", "CRASH"):
            problems.append(f"varlen check under illegal_address: {key} is {verdict}")

    summary["kernel_exec_timeout"] = kernel_time_limit()
    summary["memory_return"] = memory_return_seconds()
    print("kernel run-time limit (cudaDevAttrKernelExecTimeout):", summary["kernel_exec_timeout"])
    print("device memory of a killed process back after:", summary["memory_return"])
    summary["problems"] = problems
    if json_out:
        with open(json_out, "w") as f:
            json.dump(summary, f, indent=2)
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
