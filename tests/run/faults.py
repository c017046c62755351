#!/usr/bin/env python3
"""A backend that faults on some launches, in each way new backends fault,
run through its own conformance binary (tests/run/fault_backend_main.cc):

  * the run finishes: every test of the fault-free run is reported;
  * every corpus case that does not fault gets its fault-free verdict, and
    those that do fail with the fault's kind;
  * the property that meets a fault fails with that kind, its shrunk case is
    on disk, and `--repro=` on it reports the same kind;
  * a supervisor killed mid-shrink leaves a case that replays, and no worker.

    faults.py BINARY CORPUS_DIR SCRATCH_DIR [KIND ...]
"""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

EXPECTED = {
    "segfault": "CRASH",
    "abort": "CRASH",
    "exit0": "VANISHED",
    "exit3": "CRASH",
    "hang": "TIMEOUT",
    "oom": "OOM",
    "thread_throw": "CRASH",
    "write_past_output": "WRITE_OUTSIDE",
    "scale_q_in_place": "INPUT_CHANGED",
    "device_lost": "CRASH",
}
PROPERTY = "Conformance.SequenceAlone/fault_backend"
FILTER = "Corpus.*:" + PROPERTY.replace("/fault_backend", "/*")
CORPUS_STEP = 4  # every fourth regression case: a quarter of the corpus


def run(binary, env, args, log, timeout=600):
    with open(log, "w") as out:
        return subprocess.run([binary] + args, env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode


def results(path):
    """test name -> (passed, failure text) from GoogleTest's JSON report."""
    with open(path) as f:
        report = json.load(f)
    out = {}
    for suite in report["testsuites"]:
        for test in suite["testsuite"]:
            name = f"{suite['name']}.{test['name']}"
            failures = "\n".join(f["failure"] for f in test.get("failures", []))
            out[name] = (not failures, failures)
    return out


def killed_mid_shrink(binary, base_env, scratch):
    """The supervisor killed while it shrinks a hang still leaves a case that
    replays to the same kind, and takes its worker with it."""
    failures = os.path.join(scratch, "killed", "failures")
    os.makedirs(failures)
    env = dict(base_env, VARLEN_TEST_FAULT="hang", VARLEN_FAILURES_DIR=failures)
    shrunk = os.path.join(failures, "fault_backend-SequenceAlone.json")
    with open(os.path.join(scratch, "killed", "suite.log"), "w") as out:
        suite = subprocess.Popen([os.path.abspath(binary), f"--gtest_filter={PROPERTY}"], env=env, stdout=out,
                                 stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while not os.path.exists(shrunk) and time.monotonic() < deadline and suite.poll() is None:
            time.sleep(0.1)
        finished = suite.poll() is not None
        suite.kill()
        suite.wait()
    if finished or not os.path.exists(shrunk):
        return [f"killed mid-shrink: no case on disk before the run ended (finished: {finished})"]
    time.sleep(0.5)
    leftover = subprocess.run(["pgrep", "-f", "^" + os.path.abspath(binary)], capture_output=True,
                              text=True).stdout.split()
    problems = [f"killed mid-shrink: workers outlived the supervisor: {leftover}"] if leftover else []
    log = os.path.join(scratch, "killed", "repro.log")
    code = run(binary, env, [f"--repro={shrunk}"], log)
    with open(log) as f:
        replayed = f.read()
    if code != 1 or "TIMEOUT" not in replayed:
        problems.append(f"killed mid-shrink: --repro exited {code} without TIMEOUT: {replayed[-500:]}")
    else:
        print("killed mid-shrink: the case on disk replays to TIMEOUT")
    return problems


def main():
    binary, corpus, scratch = sys.argv[1:4]
    kinds = sys.argv[4:] or list(EXPECTED)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    small = os.path.join(scratch, "corpus")
    os.makedirs(small)
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".json"))
    for name in files[::CORPUS_STEP]:
        shutil.copy(os.path.join(corpus, name), small)
    base_env = dict(os.environ, VARLEN_CORPUS_DIR=small, VARLEN_BUDGET_SCALE="0.5",
                    VARLEN_DEADLINE_S="3", VARLEN_WORKER_MEMORY_MB="1536")
    base_env.pop("VARLEN_WORKER", None)

    def suite(kind, extra):
        env = dict(base_env, VARLEN_TEST_FAULT=kind,
                   VARLEN_FAILURES_DIR=os.path.join(scratch, kind, "failures"))
        if kind == "oom":  # the limit, not the deadline, must stop it on a busy machine
            env.update(VARLEN_DEADLINE_S="30", VARLEN_WORKER_MEMORY_MB="1024")
        os.makedirs(os.path.join(scratch, kind), exist_ok=True)
        report = os.path.join(scratch, kind, "report.json")
        started = time.monotonic()
        code = run(binary, env, extra + [f"--gtest_filter={FILTER}", f"--gtest_output=json:{report}"],
                   os.path.join(scratch, kind, "suite.log"))
        return code, results(report), env, time.monotonic() - started

    problems = []
    code, baseline, _, seconds = suite("none", ["--in-process"])
    print(f"fault-free, in process: exit {code}, {len(baseline)} tests, {seconds:.1f} s")
    if code != 0 or not all(passed for passed, _ in baseline.values()):
        print("the fault-free run must pass:", [t for t, (p, _) in baseline.items() if not p])
        return 1
    # Two runs at a time: a hang's run mostly waits out deadlines.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(kinds, pool.map(lambda kind: suite(kind, []), kinds)))
    for kind in kinds:
        want = EXPECTED[kind]
        code, got, env, seconds = runs[kind]
        faulted = [t for t, (passed, _) in got.items() if not passed]
        print(f"{kind}: exit {code}, {len(faulted)} of {len(got)} tests failed, {seconds:.1f} s")
        if code != 1:
            problems.append(f"{kind}: the suite exited {code}, expected 1")
        missing = sorted(set(baseline) - set(got))
        if missing:
            problems.append(f"{kind}: the run did not finish; not reported: {missing[:5]}")
        for test in faulted:
            if want not in got[test][1]:
                problems.append(f"{kind}: {test} failed without {want}: {got[test][1][:300]}")
        if not any(t.startswith("Corpus.") for t in faulted):
            problems.append(f"{kind}: no corpus case faulted")
        if PROPERTY not in faulted:
            problems.append(f"{kind}: {PROPERTY} did not fail")
            continue
        shrunk = os.path.join(scratch, kind, "failures", "fault_backend-SequenceAlone.json")
        if not os.path.exists(shrunk):
            problems.append(f"{kind}: no shrunk case at {shrunk}")
            continue
        log = os.path.join(scratch, kind, "repro.log")
        code = run(binary, env, [f"--repro={shrunk}"], log)
        with open(log) as f:
            replayed = f.read()
        if code != 1 or want not in replayed:
            problems.append(f"{kind}: --repro exited {code} without {want}: {replayed[-500:]}")
    problems += killed_mid_shrink(binary, base_env, scratch)
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
