"""What the kernel offers where the user types (`executor/_kernel_live.py`), on plain
namespaces: the walking rules, what is offered and what is left to a static server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

from executor import _kernel_live as live


class Config:
    def __init__(self) -> None:
        self.alpha = 1
        self.nested = {"inner": {"deep": 1}}


class Trap:
    """Reading `.boom` writes a file: nothing here may read it."""

    def __init__(self, where: Path) -> None:
        self.where = where

    @property
    def boom(self) -> dict[str, int]:
        self.where.write_text("ran")
        return {"k": 1}

    def __getattr__(self, name: str) -> Any:
        self.where.write_text(f"getattr {name}")
        return 1

    def __repr__(self) -> str:
        self.where.write_text("repr")
        return "Trap()"


def labels(answer: dict[str, Any] | None) -> list[str]:
    assert answer is not None
    return [item["label"] for item in answer["items"]]


def test_keys_of_a_dict_and_of_a_nested_dict() -> None:
    ns = {"cfg": {"a": {"x": 1, "y": 2}, "b": 2}}
    assert labels(live.complete(ns, 'cfg["', [])) == ["a", "b"]
    assert labels(live.complete(ns, "cfg['a']['", [])) == ["x", "y"]
    assert labels(live.complete(ns, 'print(cfg["a"]["y', [])) == ["y"]
    assert labels(live.complete(ns, "cfg[", [])) == ["'a'", "'b'"]  # `[` typed: quoted keys


def test_a_tables_columns_as_keys_with_their_types() -> None:
    ns = {"df": pd.DataFrame({"price": [1.0], "qty": [2], "name": ["a"]})}
    answer = live.complete(ns, 'df["', [])
    assert answer is not None
    assert {i["label"]: i["detail"] for i in answer["items"]} == {
        "price": "float64",
        "qty": "int64",
        "name": "str" if pd.__version__ >= "3" else "object",
    }
    assert "qty" in labels(live.complete(ns, "df.q", []))


def test_attributes_set_at_run_time_but_not_the_class_members_a_static_server_knows() -> None:
    cfg = Config()
    cfg.added_later = "x"
    ns = {"cfg": cfg}
    assert set(labels(live.complete(ns, "cfg.", []))) == {"alpha", "nested", "added_later"}
    assert labels(live.complete(ns, "cfg.nested['inner']['", [])) == ["deep"]


def test_names_only_the_kernel_has() -> None:
    ns = {"made_by_exec": 1, "in_the_file": 2, "print": 3, "_private": 4, "pd": pd}
    assert labels(live.complete(ns, "x = ma", ["in_the_file"])) == ["made_by_exec"]
    assert labels(live.complete(ns, "in_", ["in_the_file"])) == []
    assert live.complete(ns, "untouched.", []) is None
    assert live.complete(ns, "pd.", []) is None  # a module's members: its source says


def test_no_getter_getattr_or_repr_of_user_code_runs(tmp_path: Path) -> None:
    sign = tmp_path / "ran"
    ns = {"t": Trap(sign)}
    assert live.complete(ns, 't.boom["', []) is None
    assert live.complete(ns, "t.missing.", []) is None
    assert labels(live.complete(ns, "t.", [])) == ["where"]
    about = live.describe(ns, "t")
    assert about is not None and about["preview"].endswith("Trap>")
    assert live.describe(ns, "t.boom") is None
    live.picture(ns, set())
    assert not sign.exists()


def test_describe_a_table_a_list_and_a_function() -> None:
    def scale(x: float, factor: float = 2.0) -> float:
        """Multiply."""
        return x * factor

    ns = {"df": pd.DataFrame({"a": [1, 2, 3]}), "xs": [1, 2], "scale": scale}
    table = live.describe(ns, "df")
    assert table is not None and table["shape"] == [3, 1] and table["columns"] == {"a": "int64"}
    assert live.describe(ns, "xs") == {
        "expression": "xs",
        "type": "list",
        "length": 2,
        "preview": "[1, 2]",
    }
    fn = live.describe(ns, "scale")
    assert fn is not None and fn["signature"] == "(x: float, factor: float = 2.0) -> float"
    assert fn["doc"] == "Multiply."


def test_signature_help_counts_the_arguments_typed() -> None:
    def scale(x: float, factor: float = 2.0) -> float:
        return x * factor

    ns = {"scale": scale}
    help_ = live.signature(ns, "y = scale(1, ")
    assert help_ is not None and help_["active"] == 1
    assert help_["label"] == "scale(x: float, factor: float = 2.0) -> float"
    assert live.signature(ns, "y = scale(f(1, 2), ") is not None
    assert live.signature(ns, "y = unknown(") is None


def test_the_names_a_document_binds_even_while_a_line_is_half_typed() -> None:
    from lsp_server.live import bound_names

    lines = [
        "a, b = 1, 2\n",
        "for i, (j, k) in pairs:\n",
        "import numpy as np, os.path\n",
        "from x import (y, z as w)\n",
        "with open(f) as fh:\n",
        "class C(B):\n",
        "t: int = 3\n",
        "x == 3\n",  # a comparison binds nothing
        "d[k2] = 1\n",  # neither does a subscript
        "print(df[\n",  # the line being typed
    ]
    assert bound_names(lines) == {"a", "b", "i", "j", "k", "np", "os", "y", "w", "fh", "C", "t"}
