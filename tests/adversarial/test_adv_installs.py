"""Issue 36, 11: installs never name a squatter. The names a round found installed wrongly
without a question, and the figures on the benchmark's lists (the data alone)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from executor.distributions import canonical, provider_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from bench_installs import EXPECTED, LATER, OTHERS

SQUATTED = {
    "skimage": "scikit-image",
    "grpc": "grpcio",
    "faiss": "faiss-cpu",
    "snappy": "python-snappy",
    "multipart": "python-multipart",
    "Xlib": "python-xlib",
    "ruamel.yaml": "ruamel.yaml",
    "mysql.connector": "mysql-connector-python",
    "MySQLdb": "mysqlclient",
    "slugify": "python-slugify",
    "osgeo": "GDAL",
}


@pytest.mark.parametrize("module", sorted(SQUATTED))
def test_the_package_people_install_is_proposed_not_the_one_named_after_it(module: str) -> None:
    provider = provider_for(module, installed=False)
    assert provider is not None
    assert canonical(provider.distribution) == canonical(SQUATTED[module]), provider


@pytest.mark.parametrize(
    ("title", "names", "right", "wrong"),
    [
        ("EXPECTED", EXPECTED, 0.97, 0.005),
        ("OTHERS", OTHERS, 0.97, 0.005),
        ("LATER", LATER, 0.97, 0.02),
    ],
)
def test_the_figures_on_the_benchmarks_lists(
    title: str, names: dict[str, str], right: float, wrong: float
) -> None:
    """≥ 97 % proposed right; ≤ 0.5 % installed wrongly unasked (the list measured once,
    87 names: one miss is 1.1 %)."""
    proposed = {m: provider_for(m, installed=False) for m in names}
    good = [
        m for m, p in proposed.items() if p and canonical(p.distribution) == canonical(names[m])
    ]
    unasked_wrong = [m for m, p in proposed.items() if p and p.vouched and m not in good]
    assert len(good) >= right * len(names), sorted(set(names) - set(good))
    assert len(unasked_wrong) <= wrong * len(names), unasked_wrong
