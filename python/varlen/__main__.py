"""`python -m varlen`: the varlen command for Python backends.

    python -m varlen check [--load=module:attr ...] [--backend=NAME ...]
                           [--tier=smoke|full|nightly] [--report=DIR] [--corpus=DIR]
                           [--expectations=FILE,...] [--budget-scale=X] [--in-process]
                           [--counts-only]
    python -m varlen repro FILE_OR_DIR [--load=module:attr ...] [--backend=NAME ...]
                           [--sglang=VERSION] [--brief] [--json] [--in-process]
    python -m varlen repro FILE --emit-python
    python -m varlen backends [--load=module:attr ...]
    python -m varlen report --merge DIR... [--report=OUT]
    python -m varlen record DIR [--only-errors] [--limit=N] [--max-bytes=N] -- COMMAND...

--load imports "module:attr", a varlen.KernelBackend, a varlen.CallBackend or a
list of them ("module" alone: its BACKENDS), and registers them. --backend
names the backends to run (a registered name, or "module:attr", which loads
and runs what it names); without it, every loaded backend runs, or every
available one when nothing was loaded. Both may be repeated or
comma-separated. Each backend runs in worker processes (this command started
again): a backend that crashes, hangs, runs out of memory or writes outside
its buffers fails the case that caused it, with its case file, and the run
goes on; --in-process runs it here (for a debugger). Exit status: 0 when
everything passed, 1 when something failed, 2 for a usage error or an invalid
case file. `repro FILE --emit-python` writes a standalone script that makes
the case's call on the engine's own class (varlen.emit). `record` runs COMMAND (a server) with every Python process it
starts writing the calls its engines' vision attention sees as cases in DIR
(varlen.recording). GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX run one shard of check
(or of repro on a folder); `report --merge` joins the shards' --report
folders into the unsharded run's report.
"""

from __future__ import annotations

import argparse
import json
import sys

import varlen


def _items(values):
    return [item for value in values or [] for item in value.split(",") if item]


def _backends(args):
    loaded = [name for target in _items(args.load) for name in varlen.load_backend(target)]
    chosen = [name for item in _items(args.backend) for name in varlen.load_backend(item)]
    return chosen or loaded


def _emit_python(path: str) -> int:
    from pathlib import Path

    from varlen import emit
    if Path(path).is_dir():
        print(f"varlen: --emit-python takes one case file, not the folder {path}",
              file=sys.stderr)
        return 2
    try:
        sys.stdout.write(emit.python_script(Path(path).read_text(), path=Path(path)))
    except emit.NotEmitted as why:
        print(f"varlen: {path}: no script: {why}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["record"]:  # its COMMAND's own flags are not ours to parse
        from varlen import recording
        return recording.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m varlen", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="the corpus and the generated properties")
    check.add_argument("--load", action="append", help="module:attr: backends to register")
    check.add_argument("--backend", action="append", help="a backend's name, or module:attr")
    check.add_argument("--tier", default="smoke", choices=["smoke", "full", "nightly"])
    check.add_argument("--report", default="", help="folder for junit.xml, matrix.md, failures")
    check.add_argument("--corpus", default=None, help="the corpus to replay")
    check.add_argument("--expectations", default=None,
                       help="manifests of known gaps, comma-separated")
    check.add_argument("--budget-scale", type=float, default=1.0,
                       help="multiplies the tier's case counts and time budgets")
    check.add_argument("--in-process", action="store_true",
                       help="run the backends in this process, not in worker processes")
    check.add_argument("--counts-only", action="store_true",
                       help="case counts alone bound each property, not time (shards of a run)")
    repro = sub.add_parser("repro", help="replay case files")
    repro.add_argument("path")
    repro.add_argument("--load", action="append")
    repro.add_argument("--backend", action="append")
    repro.add_argument("--sglang", default=None)
    repro.add_argument("--brief", action="store_true")
    repro.add_argument("--json", action="store_true")
    repro.add_argument("--emit-python", action="store_true",
                       help="write a script that makes the case's call on the engine's own "
                            "class, for its issue tracker (varlen.emit)")
    repro.add_argument("--in-process", action="store_true",
                       help="run the backends in this process, not in worker processes")
    report = sub.add_parser("report", help="merge the reports of a sharded check")
    report.add_argument("--merge", nargs="+", required=True, metavar="DIR",
                        help="the shards' --report folders")
    report.add_argument("--report", default="", help="where to write the merged report")
    worker = sub.add_parser("worker", help="serve a supervisor (started by check and repro)")
    worker.add_argument("--load", action="append")
    listing = sub.add_parser("backends", help="list the backends")
    listing.add_argument("--load", action="append")
    listing.add_argument("--backend", action="append")
    sub.add_parser("record", help="record a command's calls as cases (record DIR -- COMMAND)")
    args = parser.parse_args(argv)

    try:
        if args.command == "worker":
            for target in _items(args.load):
                varlen.load_backend(target)
            varlen._serve_if_worker()
            print("varlen: a worker is started by `check` or `repro`, not by hand",
                  file=sys.stderr)
            return 2
        if args.command == "report":
            merged = varlen._core.merge_reports(args.merge, args.report)
            sys.stdout.write(merged["text"])
            return 0 if merged["passed"] else 1
        names = _backends(args)
        if args.command == "backends":
            for b in varlen.backends():
                state = f"unavailable: {b['unavailable']}" if b["unavailable"] else "available"
                level = "call level" if b["call_level"] else "kernel level"
                print(f"{b['name']:40} {level:12} {state}\n    {b['description']}")
            return 0
        if args.command == "check":
            result = varlen.check(names or None, tier=args.tier, report_dir=args.report or None,
                                  corpus_dir=args.corpus, expectations=args.expectations,
                                  budget_scale=args.budget_scale, in_process=args.in_process,
                                  counts_only=args.counts_only)
            sys.stdout.write(result.text)
            return 0 if result.passed else 1
        if args.emit_python:
            return _emit_python(args.path)
        outcomes = varlen.repro(args.path, names or None, sglang=args.sglang,
                                in_process=args.in_process)
    except ValueError as e:
        print(f"varlen: {e}", file=sys.stderr)
        return 2
    failed = sum(o.verdict == "FAIL" for o in outcomes)
    if args.json:
        print(json.dumps([json.loads(o.json) for o in outcomes], indent=2))
    else:
        for o in outcomes:
            if args.brief and o.verdict != "FAIL":
                print(f"{o.verdict}  {o.case}  [{o.backend}]")
            else:
                print(o.text)
        unsupported = sum(o.verdict == "UNSUPPORTED" for o in outcomes)
        print(f"summary: {len(outcomes)} runs: {len(outcomes) - failed - unsupported} passed, "
              f"{failed} failed, {unsupported} unsupported")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
