import subprocess

import pytest

from loadwatch.engine import setup
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import SetupError


def test_missing_avx2_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(setup.Path, "read_text", lambda self, *a, **k: "flags : fpu sse sse2")
    with pytest.raises(SetupError, match="lacks AVX2.*--target"):
        setup.check_machine(EngineSettings(home=tmp_path))


def test_torch_not_resolvable_names_the_cpu_index(tmp_path, monkeypatch):
    settings = EngineSettings(home=tmp_path)
    monkeypatch.setattr(setup, "check_machine", lambda s: None)
    monkeypatch.setattr(setup.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0))
    failed = subprocess.CompletedProcess(
        [], 1, "", "ERROR: Could not find a version that satisfies the requirement torch==2.13.0\n"
                   "ERROR: No matching distribution found for torch==2.13.0")
    monkeypatch.setattr(setup, "_pip", lambda s, *args: failed)
    with pytest.raises(SetupError) as error:
        setup.ensure_engine(settings, say=lambda m: None)
    message = str(error.value)
    assert "LOADWATCH_TORCH_INDEX_URL" in message and "CPU wheel index" in message
    assert not (tmp_path / "engine-venv" / ".loadwatch-ready").exists()


def test_a_router_pip_cannot_install_is_said_in_one_line(tmp_path, monkeypatch):
    settings = EngineSettings(home=tmp_path)
    settings.venv.mkdir(parents=True)
    failed = subprocess.CompletedProcess(
        [], 1, "", "WARNING: Retrying after connection broken\n"
                   "ERROR: Could not find a version that satisfies the requirement smg==1.13.0 (from versions: none)\n"
                   "ERROR: No matching distribution found for smg==1.13.0\n")
    monkeypatch.setattr(setup, "_pip", lambda s, *args: failed)
    with pytest.raises(SetupError) as error:
        setup.ensure_package(settings, "smg==1.13.0", say=lambda m: None)
    assert str(error.value) == (f"smg is not installed: pip could not install smg==1.13.0 in {settings.venv} "
                                "(ERROR: No matching distribution found for smg==1.13.0)")
    assert not (settings.venv / ".loadwatch-smg").exists()
