"""Supervised runs from Python: a backend that faults on some launches, in
each way Python backends fault, fails exactly the cases it faults on, with
the fault's kind, through `python -m varlen check` and the pytest plugin;
every other case keeps its fault-free verdict and the run finishes.
"""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

import varlen

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = {
    "segfault": "CRASH",
    "abort": "CRASH",
    "exit0": "VANISHED",
    "hang": "TIMEOUT",
    "oom": "OOM",
    "thread_exception": "CRASH",
    "write_past_output": "WRITE_OUTSIDE",
    "scale_q_in_place": "INPUT_CHANGED",
}


def _finite(path):
    """fault_kernel is torch's scaled_dot_product_attention per sequence, which
    gives 0 for a row whose logits are all -inf or NaN where the float64
    reference gives NaN: the non-finite cases are not its to pass."""
    with open(path) as f:
        return json.load(f).get("data", {}).get("distribution") != "non_finite"


def _faults(path):
    """Whether fault_kernel faults on the case: a launch whose last offset
    leaves 3 when divided by 4 (one sequence of the ground truth's tokens)."""
    with open(path) as f:
        case = json.load(f)
    launches = case.get("expect", {}).get("outcome", "success") == "success"
    return launches and case.get("engine", "sglang") == "sglang" and \
        case["call"]["profile"] == "fa3" and sum(case["geometry"]["seq_lens"]) % 4 == 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every eighth finite regression case, and one fault_kernel faults on
    whatever the corpus holds: some launches fault, most do not."""
    folder = tmp_path_factory.mktemp("corpus")
    files = [path for path in varlen.case_files() if _finite(path)]
    chosen = files[::8]
    if not any(_faults(path) for path in chosen):
        chosen.append(next(path for path in files if _faults(path)))
    for path in chosen:
        shutil.copy(path, folder)
    return str(folder)


def _env(fault):
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(varlen.__file__)))
    # The memory limit, not the deadline, must stop the oom fault on a busy machine.
    return dict(os.environ, VARLEN_TEST_FAULT=fault,
                VARLEN_DEADLINE_S="30" if fault == "oom" else "5",
                VARLEN_WORKER_MEMORY_MB="2048",
                PYTHONPATH=os.pathsep.join([HERE, package_parent] + sys.path))


def _check(corpus, report, fault, *extra, env=None):
    command = [sys.executable, "-m", "varlen", "check", "--load=fault_backends:BACKENDS",
               "--backend=fault_kernel", f"--corpus={corpus}", f"--report={report}",
               "--budget-scale=0.05", *extra]
    done = subprocess.run(command, env=dict(_env(fault), **(env or {})), capture_output=True,
                          text=True, timeout=600)
    suites = ElementTree.parse(os.path.join(report, "junit.xml")).getroot()
    results = {}
    for case in suites.iter("testcase"):
        failure = case.find("failure")
        results[case.get("name")] = None if failure is None else (failure.get("message", "") +
                                                                  (failure.text or ""))
    return done, results


@pytest.fixture(scope="module")
def fault_free(corpus, tmp_path_factory):
    done, results = _check(corpus, str(tmp_path_factory.mktemp("none")), "none", "--in-process")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return results


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_check_fails_only_the_faulting_cases(fault, corpus, fault_free, tmp_path):
    done, results = _check(corpus, str(tmp_path), fault)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert set(results) == set(fault_free), "the run did not finish"
    changed = {name: text for name, text in results.items() if text != fault_free[name]}
    assert any(not name.startswith("Conformance") for name in changed), "no corpus case faulted"
    for name, text in changed.items():
        assert text is not None and EXPECTED[fault] in text, (name, text)


# A crash, a process that ends with status 0 (pytest must not read it as a
# pass) and a hang: each fails its items, and the session finishes.
@pytest.mark.parametrize("fault", ["segfault", "exit0", "hang"])
def test_pytest_plugin_fails_only_the_faulting_items(fault, corpus, tmp_path):
    report = tmp_path / "pytest.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "varlen.pytest_plugin", "-p",
         "no:cacheprovider", "--varlen-backend=fault_backends:BACKENDS", "--varlen-no-properties",
         f"--varlen-corpus={corpus}", f"--junitxml={report}", str(tmp_path)],
        env=_env(fault), capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert done.returncode == 1, done.stdout[-3000:]
    cases = list(ElementTree.parse(report).getroot().iter("testcase"))
    assert len(cases) == len(os.listdir(corpus)), "the session did not finish"
    failed = [c for c in cases if c.find("failure") is not None]
    assert failed and len(failed) < len(cases)
    for case in failed:
        failure = case.find("failure")
        assert EXPECTED[fault] in failure.get("message", "") + (failure.text or "")


def _verdicts(report):
    with open(os.path.join(report, "report.json")) as f:
        return [(i["backend"], i["kind"], i["name"], i["status"], i["fault"])
                for i in json.load(f)["items"]]


def test_shards_merge_into_the_unsharded_run(corpus, tmp_path):
    whole = str(tmp_path / "whole")
    done, _ = _check(corpus, whole, "abort", "--counts-only")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    shards = []
    for index in range(2):
        shards.append(str(tmp_path / f"shard-{index}"))
        _check(corpus, shards[-1], "abort", "--counts-only", env={"GTEST_TOTAL_SHARDS": "2",
                                                 "GTEST_SHARD_INDEX": str(index)})
        assert 0 < len(_verdicts(shards[-1])) < len(_verdicts(whole))
    merged = str(tmp_path / "merged")
    done = subprocess.run([sys.executable, "-m", "varlen", "report", "--merge", *shards,
                           f"--report={merged}"], env=_env("none"), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert _verdicts(merged) == _verdicts(whole)
    assert "CRASH" in done.stdout  # the faults, grouped, in the merged summary


@pytest.fixture(scope="module")
def triton_corpus(tmp_path_factory):
    """The regression cases of triton_attn's calling convention, faithful mode."""
    folder = tmp_path_factory.mktemp("triton_corpus")
    for path in varlen.case_files():
        with open(path) as f:
            case = json.load(f)
        if case["call"]["profile"] == "triton_attn" and case.get("mode") == "faithful":
            shutil.copy(path, folder)
    return str(folder)


def _repro_verdicts(folder, fault, *extra):
    done = subprocess.run(
        [sys.executable, "-m", "varlen", "repro", folder, "--load=fault_backends:CALL_BACKENDS",
         "--backend=fault_call", "--json", *extra],
        env=_env(fault), capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return {o["case"]: o for o in json.loads(done.stdout)}


# A call-level backend's forward runs in the worker too: the worker makes the
# call again from its case.
@pytest.mark.parametrize("fault", ["segfault", "exit0"])
def test_a_call_level_backend_that_faults_fails_only_its_faulting_calls(fault, triton_corpus):
    fault_free = _repro_verdicts(triton_corpus, "none", "--in-process")
    faulty = _repro_verdicts(triton_corpus, fault)
    assert set(faulty) == set(fault_free), "the run did not finish"
    changed = [name for name in faulty if faulty[name] != fault_free[name]]
    assert changed, "no call faulted"
    for name in changed:
        assert faulty[name]["verdict"] == "FAIL", faulty[name]
        assert EXPECTED[fault] in json.dumps(faulty[name]), faulty[name]
