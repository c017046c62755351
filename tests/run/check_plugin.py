#!/usr/bin/env python3
"""The fault backend as a plugin (tests/run/fault_backend_plugin.cc), run by
`varlen check --load=`, the way a backend author runs a new C++ backend:

  * for each fault kind, the run finishes, every check of the fault-free run
    is reported, each keeps its fault-free verdict or fails with that kind,
    a property fails with it, and `varlen repro` on its shrunk case reports
    the same kind;
  * the run split into two shards (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX)
    and merged by `varlen report --merge`, and the run with --jobs=2, give
    the unsharded run's verdicts, check by check.

    check_plugin.py VARLEN PLUGIN CORPUS_DIR SCRATCH_DIR [KIND ...]
"""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

# The fault kinds and the corpus share of the conformance binary's test.
from faults import CORPUS_STEP, EXPECTED


def run(args, env, log, timeout=600):
    with open(log, "w") as out:
        return subprocess.run(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode


def verdicts(report_dir):
    """(backend, kind, name) -> (status, fault) from report.json."""
    with open(os.path.join(report_dir, "report.json")) as f:
        report = json.load(f)
    return {(i["backend"], i["kind"], i["name"]): (i["status"], i["fault"])
            for i in report["items"]}, report


def main():
    varlen, plugin, corpus, scratch = sys.argv[1:5]
    kinds = sys.argv[5:] or list(EXPECTED)
    shutil.rmtree(scratch, ignore_errors=True)
    small = os.path.join(scratch, "corpus")
    os.makedirs(small)
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".json"))
    for name in files[::CORPUS_STEP]:
        shutil.copy(os.path.join(corpus, name), small)
    base_env = dict(os.environ)
    for name in ("VARLEN_WORKER", "GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "VARLEN_LOAD"):
        base_env.pop(name, None)
    common = [varlen, "check", f"--load={plugin}", "--backends=fault_backend",
              f"--corpus={small}", "--budget_scale=0.25", "--counts_only"]

    def limits(kind):
        # For oom the limit, not the deadline, must stop it on a busy machine.
        if kind == "oom":
            return ["--deadline_s=30", "--worker_memory_mb=1024"]
        return ["--deadline_s=3", "--worker_memory_mb=1536"]

    def check(kind, name, extra=(), env_extra=None):
        out = os.path.join(scratch, name)
        os.makedirs(out, exist_ok=True)
        env = dict(base_env, VARLEN_TEST_FAULT=kind, **(env_extra or {}))
        args = common + limits(kind) + [f"--report={out}"] + list(extra)
        started = time.monotonic()
        code = run(args, env, os.path.join(scratch, name + ".log"))
        return code, out, env, time.monotonic() - started

    problems = []
    code, out, _, seconds = check("none", "none", ["--in_process"])
    baseline, _ = verdicts(out)
    print(f"fault-free, in process: exit {code}, {len(baseline)} checks, {seconds:.1f} s")
    if code != 0:
        print("the fault-free run must pass; see", out)
        return 1
    # Two runs at a time: a hang's run mostly waits out deadlines.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(kinds, pool.map(lambda kind: check(kind, kind), kinds)))
    for kind in kinds:
        want = EXPECTED[kind]
        code, out, env, seconds = runs[kind]
        got, report = verdicts(out)
        failed = [k for k, (status, _) in got.items() if status == "FAIL"]
        print(f"{kind}: exit {code}, {len(failed)} of {len(got)} checks failed, {seconds:.1f} s")
        if code != 1:
            problems.append(f"{kind}: varlen check exited {code}, expected 1")
        if set(got) != set(baseline):
            problems.append(f"{kind}: not the fault-free run's checks: "
                            f"{sorted(set(baseline) ^ set(got))[:5]}")
        for key, (status, fault) in got.items():
            if (status, fault) != baseline.get(key) and (status, fault) != ("FAIL", want):
                problems.append(f"{kind}: {key} is {status} {fault!r}, neither its fault-free "
                                f"verdict {baseline.get(key)} nor FAIL {want}")
        if not any(k[1] == "corpus" for k in failed):
            problems.append(f"{kind}: no corpus case faulted")
        shrunk = [i["shrunk"] for i in report["items"]
                  if i["kind"] == "property" and i["fault"] == want and i["shrunk"]]
        if not shrunk:
            problems.append(f"{kind}: no property failed with {want} and a shrunk case")
            continue
        log = os.path.join(scratch, kind + "-repro.log")
        with open(log, "w") as f:
            repro = subprocess.run([varlen, "repro", shrunk[0], f"--load={plugin}",
                                    "--backend=fault_backend", "--json", *limits(kind)],
                                   env=env, stdout=subprocess.PIPE, stderr=f, text=True)
        try:
            replayed = json.loads(repro.stdout)["results"][0].get("fault", {}).get("kind")
        except (ValueError, KeyError, IndexError):
            replayed = None
        if repro.returncode != 1 or replayed != want:
            problems.append(f"{kind}: varlen repro {shrunk[0]} exited {repro.returncode} with "
                            f"fault {replayed}, expected {want}")

    # --times: the abort run's shrunk case on a backend that aborts on it one
    # time in two is said to be flaky.
    if "abort" in kinds:
        with open(os.path.join(scratch, "abort", "report.json")) as f:
            shrunk = [i["shrunk"] for i in json.load(f)["items"] if i["shrunk"]][0]
        replay = subprocess.run([varlen, "repro", shrunk, f"--load={plugin}",
                                 "--backend=fault_backend", "--times=16", *limits("flaky")],
                                env=dict(base_env, VARLEN_TEST_FAULT="flaky"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if "FLAKY: " not in replay.stdout or "1 flaky in 16 runs each" not in replay.stdout:
            problems.append(f"repro --times=16 on a flaky fault did not say so: "
                            f"{replay.stdout[-800:]}")
        else:
            print("repro --times=16: the flaky fault is said to be flaky")

    # Shards: the abort run split in two, merged; and --jobs=2.
    if "abort" in kinds:
        unsharded, _ = verdicts(os.path.join(scratch, "abort"))
        shard_dirs = []
        for index in range(2):
            code, out, _, _ = check("abort", f"shard-{index}", env_extra={
                "GTEST_TOTAL_SHARDS": "2", "GTEST_SHARD_INDEX": str(index)})
            shard_dirs.append(out)
            print(f"abort, shard {index} of 2: exit {code}, {len(verdicts(out)[0])} checks")
        merged = os.path.join(scratch, "merged")
        code = run([varlen, "report", "--merge", *shard_dirs, f"--report={merged}"], base_env,
                   os.path.join(scratch, "merged.log"))
        if code != 1:
            problems.append(f"report --merge exited {code}, expected 1 (the run has failures)")
        code, out, _, seconds = check("abort", "jobs-2", ["--jobs=2"])
        print(f"abort, --jobs=2: exit {code}, {seconds:.1f} s")
        for name, folder in (("merged shards", merged), ("--jobs=2", out)):
            got, _ = verdicts(folder)
            if list(got.items()) != list(unsharded.items()):
                differ = [k for k in set(got) | set(unsharded) if got.get(k) != unsharded.get(k)]
                problems.append(f"{name}: not the unsharded run's verdicts, in its order; "
                                f"differ: {differ[:5]}")
            else:
                print(f"{name}: the unsharded run's {len(got)} verdicts, in order")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
