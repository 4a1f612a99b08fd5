"""`fedanon federate` forks its daemons warm and keeps Arrow from importing pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_arrow_without_pandas_and_pandas_on_request() -> None:
    # a fresh interpreter: this test process may already hold pandas
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from fedanon.leader import forked
        forked.preload()
        import pyarrow as pa
        arr = pa.array(["b", "a", "b"], pa.string()).dictionary_encode()
        codes = arr.indices.to_numpy(zero_copy_only=False)
        assert codes.tolist() == [0, 1, 0], codes
        assert "pandas" not in sys.modules, "Arrow imported pandas"
        from fedanon.union.decode import import_pandas
        pd = import_pandas()
        assert "pandas" in sys.modules
        assert pd.factorize(np.array([5, 5, 7]))[0].tolist() == [0, 0, 1]
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_plugin_may_import_pandas_in_a_daemon_that_refuses_it_to_arrow() -> None:
    code = textwrap.dedent(
        """
        import sys
        from importlib.metadata import EntryPoint
        from fedanon.pandasgate import without_pandas
        without_pandas()
        try:
            import pandas  # noqa: F401
        except ImportError:
            pass
        else:
            raise AssertionError("the refusal is not in force")
        from fedanon.plugins import load
        frame = load(EntryPoint("pd", "pandas:DataFrame", "fedanon.models"), "privacy model")
        assert "pandas" in sys.modules and frame.__name__ == "DataFrame"
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
