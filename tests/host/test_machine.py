"""Machine slugs scope the results tree; they must be stable and match SiliconBench's names."""

import os
import re

import pytest

from bench.cli.main import main as cellbench
from bench.core.result.files import new_run_id
from bench.core.verdicts import Verdict
from bench.host import machine
from bench.host.machine import detect, machine_slug, slugify
from bench.run.cell import CellConfig, run_cell
from bench.setup import profiles


@pytest.mark.parametrize(
    "name, slug",
    [
        ("Apple M5 Pro", "m5pro"),
        ("Apple M3 Ultra", "m3ultra"),
        ("Apple M2 Max", "m2max"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H200 NVL", "h200"),
        ("NVIDIA H100 80GB HBM3", "h10080gbhbm3"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Intel(R) Xeon(R) Processor", "intelxeonprocessor"),
        ("AMD EPYC 7B13 64-Core Processor", "amdepyc7b1364coreprocessor"),
        ("", "unknown"),
    ],
)
def test_slugify(name, slug):
    assert slugify(name) == slug


def test_gpu_wins_over_cpu_and_env_overrides(monkeypatch):
    monkeypatch.delenv("CELLBENCH_MACHINE", raising=False)
    assert machine_slug("AMD EPYC", None, ("NVIDIA H200",)) == "h200"
    assert machine_slug("Apple M5 Pro", "Apple M5 Pro", ()) == "m5pro"
    monkeypatch.setenv("CELLBENCH_MACHINE", "dgxspark")
    assert machine_slug("AMD EPYC", None, ("NVIDIA GB10",)) == "dgxspark"


def test_detect_describes_this_machine():
    m = detect()
    assert m.cores >= 1 and m.memory_gib > 0 and m.cpu and m.host
    assert m.slug and m.slug == m.slug.lower()


# --- nvidia-smi: an answer, no GPU, or no answer -------------------------------------------------


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """Put a scripted `nvidia-smi` first on PATH; detect() forgets this machine before and after."""
    monkeypatch.delenv("CELLBENCH_MACHINE", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    detect.cache_clear()

    def install(script: str) -> None:
        smi = tmp_path / "nvidia-smi"
        smi.write_text("#!/bin/sh\n" + script)
        smi.chmod(0o755)

    yield install
    detect.cache_clear()


def test_a_gpu_nvidia_smi_names_is_the_machine(fake_smi):
    fake_smi('echo "NVIDIA H200 NVL"\necho "NVIDIA H200 NVL"\n')
    m = detect()
    assert m.gpus == ("NVIDIA H200 NVL", "NVIDIA H200 NVL") and m.slug == "h200"
    assert m.gpu_probe_error is None and m.to_json()["gpu_probe_error"] is None


def test_no_devices_found_is_a_cpu_machine(fake_smi):
    fake_smi('echo "No devices were found"\nexit 6\n')
    m = detect()
    assert m.gpus == () and m.gpu_probe_error is None and m.slug == slugify(m.chip or m.cpu)


def test_a_failing_nvidia_smi_is_recorded_and_never_the_cpu_slug(fake_smi):
    fake_smi('echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2\nexit 9\n')
    m = detect()
    assert m.gpus == ()
    assert m.gpu_probe_error.startswith("nvidia-smi exited with code 9: NVIDIA-SMI has failed")
    assert m.slug == slugify(m.chip or m.cpu) + "-unknown-gpu"
    assert m.to_json()["gpu_probe_error"] == m.gpu_probe_error


def test_a_cuda_cell_skipped_on_a_failing_nvidia_smi_says_the_gpu_is_unknown(fake_smi, tmp_path):
    """Not "this is linux-x86_64" alone: the host may well have the GPU the driver failed to show."""
    fake_smi('echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2\nexit 9\n')
    cfg = CellConfig(framework="sglang", split="chat", profile=profiles.load_profile("tiny"), results_root=tmp_path,
                     run_id=new_run_id())
    outcome = run_cell(cfg, launch=None)
    assert outcome.verdict.verdict is Verdict.SKIPPED and outcome.result_path is None
    assert "whether it has a CUDA GPU is unknown: nvidia-smi exited with code 9" in outcome.verdict.reason


def test_a_hanging_nvidia_smi_times_out_once_per_process(fake_smi, tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "NVIDIA_SMI_TIMEOUT_S", 0.5)
    calls = tmp_path / "calls"
    fake_smi(f'echo x >> "{calls}"\nexec sleep 30\n')
    m = detect()
    assert m.gpu_probe_error == "nvidia-smi did not answer within 0.5 s"
    assert m.slug.endswith("-unknown-gpu")
    assert detect() is m and calls.read_text().count("x") == 1, "one session, one slug: the answer is kept"
    detect.cache_clear()  # a new session asks again, and a driver that recovered is believed
    fake_smi('echo "NVIDIA H200"\n')
    assert detect().slug == "h200" and detect().gpu_probe_error is None


def test_the_override_still_records_why_the_probe_failed(fake_smi, monkeypatch):
    fake_smi("exit 255\n")
    monkeypatch.setenv("CELLBENCH_MACHINE", "lab-h200")
    m = detect()
    assert m.slug == "lab-h200" and m.gpu_probe_error == "nvidia-smi exited with code 255: no output"


# --- the variables that name the machine's folder ------------------------------------------------


def test_cellbench_machine_then_siliconbench_subdir_then_the_hardware():
    assert machine.slug_choice({}) is None
    assert machine.slug_choice({"APPLEBENCH_RESULTS_SUBDIR": "m5pro"}) == ("m5pro", "APPLEBENCH_RESULTS_SUBDIR")
    both = {"APPLEBENCH_RESULTS_SUBDIR": "m5pro", "CELLBENCH_MACHINE": "dgxspark"}
    assert machine.slug_choice(both) == ("dgxspark", "CELLBENCH_MACHINE")
    # empty names no slug: CELLBENCH_MACHINE empty is unset, APPLEBENCH_RESULTS_SUBDIR empty asks for the legacy tree
    assert machine.slug_choice({**both, "CELLBENCH_MACHINE": ""}) == ("m5pro", "APPLEBENCH_RESULTS_SUBDIR")
    assert machine.slug_choice({"APPLEBENCH_RESULTS_SUBDIR": ""}) is None


def test_the_legacy_tree_is_asked_for_by_an_empty_siliconbench_subdir_and_keeps_the_slug(monkeypatch):
    """SiliconBench's `results/<model>${APPLEBENCH_RESULTS_SUBDIR:+/...}`: set and empty is its legacy
    root. cellbench files there only then, and only without a CELLBENCH_MACHINE of its own; the
    machine it records is still this one."""
    assert machine.legacy_asked({"APPLEBENCH_RESULTS_SUBDIR": ""})
    assert not machine.legacy_asked({}), "unset is not asking: this machine's own folder"
    assert not machine.legacy_asked({"APPLEBENCH_RESULTS_SUBDIR": "m5pro"})
    assert not machine.legacy_asked({"APPLEBENCH_RESULTS_SUBDIR": "", "CELLBENCH_MACHINE": "m2max"})
    monkeypatch.delenv("CELLBENCH_MACHINE", raising=False)
    monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "")
    detect.cache_clear()
    try:
        legacy = detect()
        assert legacy.legacy_tree and legacy.folder == "" and legacy.slug == machine.machine_slug(
            legacy.cpu, legacy.chip, legacy.gpus, legacy.gpu_probe_error)
        assert "legacy_tree" not in legacy.to_json(), "the result's machine block says what it is, not where it files"
        assert legacy.where() == (f"machine {legacy.slug} from detected, in SiliconBench's legacy tree "
                                  "results/<model>/<split>/ (APPLEBENCH_RESULTS_SUBDIR is set empty)")
    finally:
        detect.cache_clear()


@pytest.mark.parametrize("value", ["M5Pro", "m5 pro", "m5pro/chat", "../elsewhere"])
def test_a_folder_name_that_is_not_a_slug_is_refused_naming_the_variable(value):
    with pytest.raises(machine.MachineSlugError, match=rf"^APPLEBENCH_RESULTS_SUBDIR='{re.escape(value)}' is not "
                                                        r"a machine slug \(lowercase letters, digits, - and _"):
        machine.slug_choice({"APPLEBENCH_RESULTS_SUBDIR": value})


def test_detect_files_under_the_variable_and_records_which(monkeypatch):
    monkeypatch.delenv("CELLBENCH_MACHINE", raising=False)
    monkeypatch.delenv("APPLEBENCH_RESULTS_SUBDIR", raising=False)
    detect.cache_clear()
    try:
        found = detect()
        assert found.slug_source == "detected" and found.to_json()["slug_source"] == "detected"
        monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "m5pro")
        detect.cache_clear()
        scoped = detect()
        assert (scoped.slug, scoped.to_json()["slug_source"]) == ("m5pro", "APPLEBENCH_RESULTS_SUBDIR")
        assert scoped.cpu == found.cpu, "only the folder changes, never what the machine is"
    finally:
        detect.cache_clear()


def test_every_cellbench_command_refuses_a_bad_folder_name_in_one_line(monkeypatch, capsys):
    monkeypatch.delenv("CELLBENCH_MACHINE", raising=False)
    monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "M5 Pro")
    detect.cache_clear()
    try:
        assert cellbench(["doctor"]) == 2
    finally:
        detect.cache_clear()
    assert capsys.readouterr().err == ("cellbench: APPLEBENCH_RESULTS_SUBDIR='M5 Pro' is not a machine slug "
                                       "(lowercase letters, digits, - and _, as results/<model>/<machine>/ "
                                       "names it)\n")
