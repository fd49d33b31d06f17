# SPDX-License-Identifier: MIT
"""The package builds a wheel without the network (pip wheel --no-deps
--no-build-isolation, setuptools as pyproject.toml declares), from a
copy of the source so that nothing is written into the tree. Skipped,
saying why, only when no Python at hand has setuptools able to make
wheels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path
from typing import List, Optional

SOURCE = Path(__file__).resolve().parents[1]  # clients/python
BUILD_TIMEOUT = 300  # seconds a wheel build may take, at most

# setuptools makes wheels itself from 70.1 on; before, with the wheel package.
_CAN_BUILD = (
    "import setuptools, sys\n"
    "try:\n"
    "    import setuptools.command.bdist_wheel\n"
    "except ImportError:\n"
    "    import wheel.bdist_wheel\n"
    "import pip\n"
)


def builder() -> Optional[str]:
    """The first Python (this one, then the system's) whose setuptools
    and pip can build the wheel without fetching anything."""
    candidates: List[str] = [sys.executable]
    for other in ("/usr/bin/python3",):
        if os.path.exists(other) and os.path.realpath(other) != os.path.realpath(sys.executable):
            candidates.append(other)
    for python in candidates:
        ok = subprocess.run([python, "-c", _CAN_BUILD], capture_output=True).returncode == 0
        if ok:
            return python
    return None


class Wheel(unittest.TestCase):
    def test_builds_a_wheel_offline(self) -> None:
        python = builder()
        if python is None:
            self.skipTest("no setuptools able to build wheels (setuptools >= 70.1, or setuptools "
                          "with the wheel package, and pip) in " + sys.executable +
                          " or /usr/bin/python3: scripts/deps.sh test installs them")
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src"
            shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns(
                "__pycache__", "build", "dist", "*.egg-info", "tests"))
            out = Path(tmp) / "out"
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            done = subprocess.run(
                [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--no-index", "-w", str(out), str(src)],
                capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT,
            )
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            wheels = list(out.glob("*.whl"))
            self.assertEqual([w.name for w in wheels], ["memd_client-0.1.0-py3-none-any.whl"])
            with zipfile.ZipFile(wheels[0]) as whl:
                names = set(whl.namelist())
                for want in ("memd_client/__init__.py", "memd_client/client.py",
                             "memd_client/py.typed"):
                    self.assertIn(want, names)
                self.assertFalse(any(n.startswith("tests/") for n in names), names)
                meta = whl.read("memd_client-0.1.0.dist-info/METADATA").decode("utf-8")
            self.assertIn("Name: memd-client", meta)
            self.assertIn("Requires-Python: >=3.9", meta)
            self.assertNotIn("Requires-Dist", meta)


if __name__ == "__main__":
    unittest.main()
