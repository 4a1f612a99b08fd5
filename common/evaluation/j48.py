"""C4.5 as the seed's evaluation used it: Weka's J48 (C4.5 revision 8), run as a subprocess.

The data go to Weka as ARFF files in a private temporary directory: generalized values (and
any categorical value) as nominal attributes, raw numbers as numeric ones, the class last,
training rows optionally weighted (``{w}`` after the row: J48 treats a row of weight w as w
identical records, so a noisy count table trains the same tree as its expanded form).  J48
runs with its defaults, what a C4.5 user gets: a pruned tree, confidence 0.25, at least 2
records per leaf (``-C 0.25 -M 2``).  Its per-record predictions (``-p 0``) are parsed and
compared with the class in numpy.

Weka is not a Python dependency: ``apt-get install weka`` (Debian/Ubuntu: the JAR at
``/usr/share/java/weka.jar`` and a Java runtime), or ``FEDANON_WEKA_JAR`` naming a weka.jar.
Without it, :func:`require_j48` raises an :class:`InputError` (exit 2) saying so.  The class
values are written as ``c0, c1, ...`` so that the predictions parse whatever the labels are.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.errors import DataError, FedanonError, InputError

log = logging.getLogger(__name__)

DEFAULT_JAR = Path("/usr/share/java/weka.jar")
JAR_ENV = "FEDANON_WEKA_JAR"
J48_CLASS = "weka.classifiers.trees.J48"
J48_OPTIONS = ("-C", "0.25", "-M", "2")  # J48's defaults: pruned, CF 25 %, 2 records per leaf
INSTALL_HINT = (
    "`apt-get install weka` (Weka's J48 and a Java runtime), or FEDANON_WEKA_JAR=weka.jar"
)
TIMEOUT_S = 1800.0
CLASSIFIERS = ("tree", "j48")  # sklearn's entropy tree (default) | C4.5 (Weka J48)

# Weka's Utils.quote: a value with any of these (or empty) is single-quoted
_NEEDS_QUOTE = re.compile(r"[\s,'\"{}%?\\]")
_ESCAPES = str.maketrans({"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_PREDICTION = re.compile(r"^\s*(\d+)\s+\d+:c\d+\s+\d+:c(\d+)\b", re.MULTILINE)


class WekaError(FedanonError):
    """J48 failed or printed something we cannot read (exit code 1)."""


def arff_quote(value: str) -> str:
    """An ARFF token for ``value``: bare if safe, else single-quoted with backslash escapes."""
    if value and not _NEEDS_QUOTE.search(value):
        return value
    return "'" + value.translate(_ESCAPES) + "'"


@dataclass(frozen=True)
class Attribute:
    """An ARFF attribute: nominal (``values``) or numeric (``values`` None)."""

    name: str
    values: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an attribute needs a name")
        if self.values is not None:
            if not self.values:
                raise ValueError(f"nominal attribute {self.name!r} has no value")
            if len(set(self.values)) != len(self.values):
                raise ValueError(f"nominal attribute {self.name!r} repeats a value")

    def declaration(self) -> str:
        kind = "numeric"
        if self.values is not None:
            kind = "{" + ",".join(arff_quote(v) for v in self.values) + "}"
        return f"@attribute {arff_quote(self.name)} {kind}"

    def tokens(self, column: npt.NDArray[Any]) -> npt.NDArray[np.str_]:
        """ARFF tokens of a column: codes into ``values`` (nominal) or numbers (NaN -> ?)."""
        if self.values is None:
            x = np.asarray(column, dtype=np.float64)
            out = np.char.mod("%.17g", x)
            return np.where(np.isnan(x), "?", out)
        codes = np.asarray(column, dtype=np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= len(self.values)):
            raise ValueError(f"code outside the values of nominal attribute {self.name!r}")
        quoted = np.asarray([arff_quote(v) for v in self.values], dtype=np.str_)
        return quoted[codes]


def write_arff(
    fh: TextIO,
    attributes: Sequence[Attribute],
    columns: Sequence[npt.NDArray[Any]],
    cls: IntArray,
    n_class: int,
    weights: npt.NDArray[np.float64] | None = None,
    relation: str = "fedanon",
) -> None:
    """One ARFF file: the attributes, then the class ``class`` with values ``c0..c{n-1}``."""
    if len(attributes) != len(columns):
        raise ValueError("one column per attribute")
    n = int(np.asarray(cls).size)
    if any(np.asarray(c).shape != (n,) for c in columns):
        raise ValueError("every column has one value per row")
    names = [a.name for a in attributes]
    if "class" in names or len(set(names)) != len(names):
        raise ValueError("attribute names must be distinct and not 'class'")
    cls_attr = Attribute("class", tuple(f"c{i}" for i in range(n_class)))
    fh.write(f"@relation {arff_quote(relation)}\n\n")
    for a in (*attributes, cls_attr):
        fh.write(a.declaration() + "\n")
    fh.write("\n@data\n")
    line = cls_attr.tokens(cls)
    for a, col in zip(reversed(attributes), reversed(columns), strict=True):
        line = np.char.add(np.char.add(a.tokens(col), ","), line)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,) or np.any(~np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights: one finite non-negative number per row")
        line = np.char.add(np.char.add(line, ",{"), np.char.add(np.char.mod("%.17g", w), "}"))
    if n:
        fh.write("\n".join(line.tolist()))
        fh.write("\n")


def weka_jar() -> Path:
    env = os.environ.get(JAR_ENV)
    return Path(env) if env else DEFAULT_JAR


def require_j48() -> tuple[str, Path]:
    """(java executable, weka.jar), or an InputError (exit 2) naming what to install."""
    java = shutil.which("java")
    jar = weka_jar()
    if java is None:
        raise InputError(
            "the j48 classifier needs a Java runtime (no `java` on PATH)", expected=INSTALL_HINT
        )
    if not jar.is_file():
        raise InputError(
            "the j48 classifier needs Weka: weka.jar not found",
            file=str(jar),
            expected=INSTALL_HINT,
        )
    return java, jar


def parse_predictions(text: str, n_test: int) -> IntArray:
    """Predicted class codes from J48's ``-p 0`` output (one line per test record)."""
    found = _PREDICTION.findall(text)
    if len(found) != n_test:
        raise WekaError(f"J48 printed {len(found)} predictions for {n_test} test records")
    rows = np.asarray(found, dtype=np.int64).reshape(-1, 2)
    if not np.array_equal(rows[:, 0], np.arange(1, n_test + 1)):
        raise WekaError("J48's predictions are not numbered 1..n")
    return rows[:, 1]


def j48_predict(
    attributes: Sequence[Attribute],
    train: Sequence[npt.NDArray[Any]],
    train_cls: IntArray,
    test: Sequence[npt.NDArray[Any]],
    n_class: int,
    weights: npt.NDArray[np.float64] | None = None,
    *,
    options: Sequence[str] = J48_OPTIONS,
    timeout: float = TIMEOUT_S,
    heap: str = "2g",
) -> IntArray:
    """Class codes J48 predicts for the ``test`` rows, trained on the (weighted) ``train``."""
    java, jar = require_j48()
    n_test = int(np.asarray(test[0]).size) if test else 0
    if n_test == 0:
        return np.zeros(0, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="fedanon-j48-") as tmp:  # mode 0700
        paths = Path(tmp) / "train.arff", Path(tmp) / "test.arff"
        with paths[0].open("w", encoding="utf-8") as fh:
            write_arff(fh, attributes, train, train_cls, n_class, weights)
        with paths[1].open("w", encoding="utf-8") as fh:
            write_arff(fh, attributes, test, np.zeros(n_test, dtype=np.int64), n_class)
        argv = [java, f"-Xmx{heap}", "-cp", str(jar), J48_CLASS, *options]
        argv += ["-t", str(paths[0]), "-T", str(paths[1]), "-p", "0"]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise WekaError(f"J48 did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise WekaError(f"J48 exited with {done.returncode}: {' | '.join(tail)}")
    return parse_predictions(done.stdout, n_test)


def nominal_codes(column: Sequence[str]) -> tuple[tuple[str, ...], IntArray]:
    """(sorted distinct values, code of every row) of a categorical column."""
    values, inv = np.unique(np.asarray(column, dtype=str), return_inverse=True)
    return tuple(str(v) for v in values), inv.reshape(-1).astype(np.int64)


def raw_table(
    data: dict[str, Sequence[str]] | Any, categorical: Sequence[str], numeric: Sequence[str]
) -> tuple[list[Attribute], list[npt.NDArray[Any]]]:
    """Attributes and columns of raw data: numbers numeric, the rest nominal (BA)."""
    attrs: list[Attribute] = []
    cols: list[npt.NDArray[Any]] = []
    for name in numeric:
        attrs.append(Attribute(name))
        try:
            cols.append(np.asarray([float(v) for v in data[name]], dtype=np.float64))
        except ValueError as exc:
            raise DataError(f"numeric column {name!r} has a non-number: {exc}") from exc
    for name in categorical:
        values, codes = nominal_codes(data[name])
        attrs.append(Attribute(name, values))
        cols.append(codes)
    return attrs, cols
