"""The varlen suite as pytest items.

    pytest --varlen-backend=mypackage.attention:BACKEND [--varlen-tier=smoke]
    pytest --varlen-load=mypackage.attention:BACKENDS --varlen-backend=one_of_them

adds one item per regression case (varlen/<backend>/Corpus.<case>) and one
per generated property (varlen/<backend>/Conformance.<property>) to the
session, next to the project's own tests (-k and -x work as usual). A
failing property shrinks its case, writes it under --varlen-failures
(default varlen-failures/) and reports the file and the command that
replays it; an unsupported case or property is a skip with the reason.

Installed with the package (entry point pytest11 "varlen"); with the
package on PYTHONPATH only, load it with `-p varlen.pytest_plugin`.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("varlen", "varlen conformance suite")
    group.addoption("--varlen-backend", action="append", default=[],
                    help="a backend to check: module:attr, or a registered name")
    group.addoption("--varlen-load", action="append", default=[],
                    help="module:attr: backends to register (checked unless --varlen-backend "
                         "names others)")
    group.addoption("--varlen-tier", default="smoke", choices=["smoke", "full", "nightly"])
    group.addoption("--varlen-failures", default="varlen-failures",
                    help="where shrunk failing cases are written")
    group.addoption("--varlen-corpus", default=None, help="the corpus to replay")
    group.addoption("--varlen-no-corpus", action="store_true", help="only the properties")
    group.addoption("--varlen-no-properties", action="store_true", help="only the corpus")
    group.addoption("--varlen-in-process", action="store_true",
                    help="run the backends in pytest's process, not in worker processes")


class VarlenFailure(Exception):
    pass


class _CaseItem(pytest.Item):
    def __init__(self, *, backend, path, **kwargs):
        super().__init__(**kwargs)
        self.backend, self.path = backend, path

    def runtest(self):
        import varlen

        [outcome] = varlen.repro(self.path, [self.backend],
                                 in_process=self.config.getoption("--varlen-in-process"))
        if outcome.verdict == "UNSUPPORTED":
            pytest.skip(outcome.text.split("outcome:")[-1].strip().splitlines()[0])
        if outcome.verdict == "FAIL":
            replay = varlen._repro_command(self.backend) or "varlen repro {file}"
            raise VarlenFailure(f"{outcome.text}\nreplay: {replay.replace('{file}', self.path)}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, VarlenFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


class _PropertyItem(pytest.Item):
    def __init__(self, *, backend, property_name, tier, failures, **kwargs):
        super().__init__(**kwargs)
        self.backend, self.property_name = backend, property_name
        self.tier, self.failures = tier, failures

    def runtest(self):
        import varlen

        r = varlen.run_property(self.property_name, self.backend, tier=self.tier,
                                failures_dir=self.failures,
                                in_process=self.config.getoption("--varlen-in-process"))
        if r["passed"] and r["unsupported"]:
            pytest.skip(f"{self.backend} supports none of the generated cases")
        if not r["passed"]:
            text = f"{r['why'] or r['message']}\n"
            if r["shrunk"]:
                text += f"shrunk case: {r['shrunk']}\nreplay: {r['reproduce']}\n"
            raise VarlenFailure(text + f"({r['summary']}; {r['params']})")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, VarlenFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return "varlen", None, self.name


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    loads, targets = config.getoption("--varlen-load"), config.getoption("--varlen-backend")
    if not loads and not targets:
        return
    import varlen

    loaded = [name for target in loads for name in varlen.load_backend(target)]
    targets = targets or loaded

    tier = config.getoption("--varlen-tier")
    failures = os.path.abspath(config.getoption("--varlen-failures"))
    # A sharded run (GTEST_TOTAL_SHARDS, GTEST_SHARD_INDEX) keeps every
    # total-th varlen item, as `varlen check` keeps every total-th check.
    index, total = varlen._core.shard()
    first = len(items)
    for target in targets:
        for backend in varlen.load_backend(target):
            if not config.getoption("--varlen-no-corpus"):
                for path in varlen.case_files(config.getoption("--varlen-corpus")):
                    name = os.path.splitext(os.path.basename(path))[0]
                    items.append(_CaseItem.from_parent(
                        session, name=f"varlen/{backend}/Corpus.{name}", backend=backend,
                        path=path))
            if not config.getoption("--varlen-no-properties"):
                for prop in varlen.properties():
                    items.append(_PropertyItem.from_parent(
                        session, name=f"varlen/{backend}/Conformance.{prop}", backend=backend,
                        property_name=prop, tier=tier, failures=failures))
    items[first:] = [item for n, item in enumerate(items[first:]) if n % total == index]
