"""What a test fix's candidate may not do, read from its code: reach past the code the
failure ran through. The project's tests judge such a candidate, and a candidate can make
them pass without fixing anything — pytest patched at import, `builtins` or `sys.modules`
changed, a module statement that runs at import, a value equal to everything. Such a
candidate is held with the rule it broke, never run by the tests (issue 68, 4).
"""

from __future__ import annotations

import ast

REACHED = frozenset({"pytest", "_pytest", "unittest", "builtins", "__builtins__"})
"""Modules (and the name) a fix of the project's code has no business touching."""


def reaches_past(before: str, candidate: str) -> str | None:
    """Why `candidate` (in place of `before`) reaches past the code it fixes, in a phrase
    ("touches pytest", …); None: it does not. What `before` did already is not held
    against it."""
    try:
        new = ast.parse(candidate)
    except SyntaxError:
        return None  # (its run says so)
    try:
        old = ast.parse(before)
    except SyntaxError:
        old = ast.Module(body=[], type_ignores=[])
    touched = _touched(new) - _touched(old)
    if touched:
        return f"touches {', '.join(sorted(touched))}, which a fix of the project's code never does"
    kept = {ast.dump(node) for node in old.body}
    for node in new.body:
        if ast.dump(node) not in kept and not _definition(node):
            line = ast.get_source_segment(candidate, node) or type(node).__name__
            head = line.splitlines()[0][:60]
            return (
                f"adds a module-level statement that runs at import (`{head}`), not a "
                "definition, an import or a constant"
            )
    constant = _constant_equality(new) - _constant_equality(old)
    if constant:
        return (
            f"defines {', '.join(sorted(constant))} returning a constant: a value equal to anything"
        )
    return None


def _touched(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names} & REACHED
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module.split(".")[0]} & REACHED
        elif isinstance(node, ast.Name) and node.id in REACHED:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr == "modules":
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.add("sys.modules")
        elif isinstance(node, ast.Constant) and str(node.value).split(".")[0] in REACHED:
            found.add(str(node.value).split(".")[0])  # (`__import__("pytest")`)
    return found


def _definition(node: ast.stmt) -> bool:
    """A definition, an import, a docstring, or a name bound to a constant."""
    if isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    ):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if all(isinstance(t, ast.Name) for t in targets):
            try:
                ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return False
            return True
    return False


def _constant_equality(tree: ast.AST) -> set[str]:
    """`Class.__eq__` / `__hash__` / `__ne__` whose every return is a constant."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for method in node.body:
            if not isinstance(method, ast.FunctionDef) or method.name not in (
                "__eq__",
                "__ne__",
                "__hash__",
            ):
                continue
            returns = [r for r in ast.walk(method) if isinstance(r, ast.Return)]
            if returns and all(isinstance(r.value, ast.Constant) for r in returns):
                found.add(f"{node.name}.{method.name}")
    return found
