"""The harness's public functions carry their types (mypy checks them in `make lint`): every
function and method whose name does not start with an underscore, in every module of harness/,
annotates each parameter (self and cls aside) and its return. One test per wing, so a wing's
owner can run its own."""

import ast

import pytest

from tests.conftest import ROOT

HARNESS = ROOT / "harness"
WINGS = sorted(p.name for p in HARNESS.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def public_functions(tree: ast.Module):
    """Top-level functions and the methods of top-level classes whose names are public."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def missing_annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args
    params = args.posonlyargs + args.args + args.kwonlyargs
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    missing = [a.arg for a in params if a.annotation is None and a.arg not in ("self", "cls")]
    if fn.returns is None and fn.name != "__init__":
        missing.append("return")
    return missing


def unannotated(paths) -> list[str]:
    found = []
    for path in paths:
        for name, fn in public_functions(ast.parse(path.read_text(), str(path))):
            short = name.rsplit(".", 1)[-1]
            if short.startswith("_") and short != "__init__":
                continue
            if missing := missing_annotations(fn):
                found.append(f"{path}:{fn.lineno} {name}: {', '.join(missing)}")
    return found


@pytest.mark.parametrize("wing", ["core"] + WINGS)
def test_public_functions_annotated(wing):
    paths = sorted(HARNESS.glob("*.py")) if wing == "core" else sorted((HARNESS / wing).rglob("*.py"))
    assert not unannotated(paths), "\n".join(unannotated(paths))


def test_the_check_sees_a_missing_annotation(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f(a: int, b) -> int:\n    return a\n\nclass C:\n    def g(self):\n        pass\n"
                      "    def _h(self, x):\n        pass\n")
    assert [line.split(" ", 1)[1] for line in unannotated([source])] == ["f: b", "C.g: return"]
