"""A non-editable install (the wheel, in a throwaway venv) writes nothing under site-packages: its workspace,
data directory and reports default to the user data directory, ``scix.toml`` is found in the working
directory, and ``scix info`` says where each path came from."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # builds a wheel and a venv


def _files(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the venv's python, its site-packages): the project's wheel installed without its dependencies, which
    come from this environment's site-packages on PYTHONPATH (where the editable install is only a .pth)."""
    tmp = tmp_path_factory.mktemp("wheel")
    run = dict(check=True, capture_output=True, text=True, timeout=600)
    source = tmp / "source"  # a copy: building in the checkout would leave build/ in it
    shutil.copytree(ROOT / "scix_core", source / "scix_core", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheel_cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp)]
    subprocess.run([*wheel_cmd, str(source)], **run)
    (wheel,) = tmp.glob("scix_core-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], **run)
    python = tmp / "venv" / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", str(wheel)], **run
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], **run
        ).stdout.strip()
    )
    return python, site


def test_an_installed_package_writes_nothing_beside_its_code(installed, tmp_path):
    python, site = installed
    work = tmp_path / "work"
    work.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SCIX_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env |= {
        "PYTHONPATH": sysconfig.get_paths()["purelib"],  # the dependencies, not this checkout's scix_core
        "PYTHONDONTWRITEBYTECODE": "1",
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "HOME": str(tmp_path),
    }
    before = _files(site)

    def scix(*args: str) -> str:
        done = subprocess.run(
            [str(python), "-m", "scix_core", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = json.loads(scix("info", "--json"))["paths"]
    user_data = tmp_path / "xdg-data" / "scix"
    assert where["home"] == {
        "path": str(user_data),
        "from": "default: the user data directory (platformdirs)",
    }
    assert where["data_dir"]["path"] == str(user_data / "data")
    assert where["reports"]["path"] == str(user_data / "reports")
    assert where["config"]["path"] is None and str(work / "scix.toml") in where["config"]["from"]

    scix("ingest", "--path", str(FIXTURES / "smart"), "--index", "sm", "--no-embed", "--quiet")
    assert (user_data / "indexes" / "sm" / "current" / "papers.sqlite").exists()
    assert _files(site) == before, "the installed package wrote under site-packages"
    assert str(site) not in scix("info", "--index", "sm", "--json")

    (tmp_path / "xdg-config" / "scix").mkdir(parents=True)
    (tmp_path / "xdg-config" / "scix" / "scix.toml").write_text(f'home = "{tmp_path / "user-home"}"\n')
    where = json.loads(scix("info", "--json"))["paths"]
    assert where["config"]["from"] == "the user config directory"
    assert where["home"]["path"] == str(tmp_path / "user-home") and "scix.toml" in where["home"]["from"]
    (work / "scix.toml").write_text(f'home = "{tmp_path / "cwd-home"}"\n')  # the working directory's wins
    where = json.loads(scix("info", "--json"))["paths"]
    assert where["config"] == {"path": str(work / "scix.toml"), "from": "the working directory"}
    assert where["home"]["path"] == str(tmp_path / "cwd-home")
    env["SCIX_CONFIG"] = str(
        tmp_path / "xdg-config" / "scix" / "scix.toml"
    )  # an explicit file wins over both
    assert json.loads(scix("info", "--json"))["paths"]["config"]["from"] == "SCIX_CONFIG"
    env["SCIX_HOME"] = str(tmp_path / "env-home")
    assert json.loads(scix("info", "--json"))["paths"]["home"] == {
        "path": str(tmp_path / "env-home"),
        "from": "SCIX_HOME",
    }
    assert _files(site) == before
