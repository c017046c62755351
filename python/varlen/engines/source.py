"""An engine's own Python code, read from its wheel and run in memory.

Nothing of the engine is installed or copied: a member of the wheel is read
with zipfile (checked against a SHA-256 where one is pinned), the
module-level definitions a few roots reach are extracted by AST, unchanged,
and compiled into a fresh module whose remaining imports are stubs. Used by
the SGLang backends (varlen.backends.sglang) and the engine modules
(varlen.engines.sglang, varlen.engines.vllm), whose pinned wheels
fetch_wheel() downloads into wheels_dir().
"""

from __future__ import annotations

import ast
import builtins
import glob
import hashlib
import linecache
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional


class Unavailable(Exception):
    """The engine's code cannot be read here (no wheel, an unexpected file)."""


def wheels_dir() -> Path:
    """$VARLEN_WHEELS, else build/python-env/wheels of the source tree this
    module lies in (also when it runs from a build tree inside it)."""
    if os.environ.get("VARLEN_WHEELS"):
        return Path(os.environ["VARLEN_WHEELS"])
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "CMakeLists.txt").is_file() and (parent / "python" / "pyproject.toml").is_file():
            return parent / "build" / "python-env" / "wheels"
    return here.parents[3] / "build" / "python-env" / "wheels"


def fetch_wheel(package: str, version: str, platform: str, directory: Path, name: str,
                sha256: Optional[str] = None, who: str = "varlen") -> Path:
    """`directory`/`name`, the wheel of `package`==`version` for CPython 3.11
    on `platform`, downloaded there (pip download --no-deps) when missing;
    with `sha256`, only if it hashes to it."""
    path = directory / name
    if not path.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        print(f"{who}: downloading {package}=={version}", file=sys.stderr)
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--only-binary=:all:", "--python-version", "3.11", "--implementation",
                            "cp", "--platform", platform, "--dest", str(directory),
                            f"{package}=={version}"], check=True)
        except (OSError, subprocess.CalledProcessError) as error:
            raise Unavailable(f"cannot download {package} {version}: {error}") from error
        if not path.is_file():
            found = sorted(glob.glob(str(directory / f"{package}-{version}-*.whl")))
            if not found:
                raise Unavailable(f"pip downloaded no wheel of {package} {version} into "
                                  f"{directory}")
            path = Path(found[-1])
    if sha256 is not None:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != sha256:
            raise Unavailable(f"{path} has SHA-256 {digest}, not the pinned {sha256} "
                              f"({package} {version})")
    return path


def read_member(wheel: str, member: str, sha256: Optional[str] = None,
                expected: str = "") -> str:
    """The text of `member` in `wheel`; with `sha256`, only if it hashes to it
    (`expected` says whose code the pin stands for, for the error)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(member)
    except (OSError, KeyError, zipfile.BadZipFile) as error:
        raise Unavailable(f"cannot read {member} from {wheel}: {error}") from error
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise Unavailable(f"{member} in {wheel} has SHA-256 {digest}, not {sha256}: not "
                          f"{expected or 'the code'} these stubs were written for")
    return data.decode("utf-8")


def _bound_names(node) -> list:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _referenced_names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def extract(source: str, filename: str, roots: Iterable[str], stubs: Dict[str, object],
            real_modules: Iterable[str]) -> ast.Module:
    """The module-level statements of `source` that `roots` reach, in source order.

    A reached name bound by an import of a module outside `real_modules` must
    be in `stubs` (its statement is dropped; the stub is put in the module);
    a reached name bound nowhere at module level (a builtin, a local, or a
    name an `if` binds) is left to the stubs and builtins.
    """
    real = tuple(real_modules)
    tree = ast.parse(source, filename)
    binder = {}
    for index, node in enumerate(tree.body):
        for name in _bound_names(node):
            binder.setdefault(name, index)
    roots = list(roots)
    for name in roots:
        if name not in binder:
            raise RuntimeError(f"{filename} defines no {name}")
    keep, pending, seen = set(), list(roots), set()
    while pending:
        name = pending.pop()
        if name in seen or name not in binder:
            continue
        seen.add(name)
        node = tree.body[binder[name]]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else name
            if module in real or (isinstance(node, ast.Import) and
                                  all(a.name in real for a in node.names)):
                keep.add(binder[name])
            elif name not in stubs:
                raise RuntimeError(f"{filename}: the extracted code uses {name}, imported from "
                                   f"{module}, which varlen does not stub")
            continue
        keep.add(binder[name])
        pending.extend(_referenced_names(node) - seen)
    future = [i for i, n in enumerate(tree.body)
              if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    body = [tree.body[i] for i in sorted(keep | set(future))]
    return ast.Module(body=body, type_ignores=[])


def compile_into(module: types.ModuleType, source: str, tree: ast.Module, filename: str) -> None:
    # linecache holds the file's text so tracebacks, inspect and Triton's
    # interpreter (which re-reads a kernel's source) all see the engine's lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(tree, filename, "exec", dont_inherit=True), module.__dict__)


def load_module(name: str, source: str, filename: str, roots: Iterable[str],
                stubs: Dict[str, object], real_modules: Iterable[str],
                imports: Optional[Callable[[str], Optional[types.ModuleType]]] = None
                ) -> types.ModuleType:
    """The extracted code of `source` as module `name`, registered in
    sys.modules before it runs (dataclasses look their module up there).
    `imports(name)` may answer an import made inside a function (a stub
    module, or None for the real import)."""
    tree = extract(source, filename, roots, stubs, real_modules)
    module = types.ModuleType(name)
    module.__file__ = filename
    module.__dict__.update(stubs)
    if imports is not None:
        def stubbed_import(what, globals=None, locals=None, fromlist=(), level=0):
            stub = imports(what)
            if stub is not None:
                return stub
            return builtins.__import__(what, globals, locals, fromlist, level)
        module.__builtins__ = dict(vars(builtins), __import__=stubbed_import)
    sys.modules[name] = module
    try:
        compile_into(module, source, tree, filename)
    except BaseException:
        del sys.modules[name]
        raise
    return module
