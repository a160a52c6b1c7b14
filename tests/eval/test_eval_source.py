"""Source cells: the hardware tag and the git prefix that say where a table's numbers came from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.eval.source import hardware_tag, source_prefix
from bench.host.machine import HostMachine


def _machine(cpu="Intel(R) Xeon(R) Processor", chip=None, gpus=(), gpu_probe_error=None):
    return HostMachine(slug="x", host="h", os="Linux", cpu=cpu, chip=chip, gpus=tuple(gpus), cores=2, memory_gib=24.0,
                   gpu_probe_error=gpu_probe_error)


@pytest.mark.parametrize(("machine", "tag"), [
    (_machine(gpus=["NVIDIA H200"]), "H200"),
    (_machine(gpus=["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]), "H100"),
    (_machine(gpus=["NVIDIA GeForce RTX 4090"]), "RTX4090"),
    (_machine(gpus=["Some Future Card"]), "Some Future Card"),
    (_machine(cpu="Apple M5 Pro", chip="Apple M5 Pro"), "M5 Pro"),
    (_machine(), "Intel Xeon"),
    (_machine(cpu="AMD EPYC 7B13 64-Core Processor"), "AMD EPYC 7B13"),
    (_machine(cpu="Intel(R) Core(TM) i9-13900K CPU @ 3.00GHz"), "Intel Core i9-13900K"),
    # nvidia-smi failed: never the CPU-only machine's tag, whose row it would replace
    (_machine(gpu_probe_error="nvidia-smi exited with code 9: ..."), "Intel Xeon + unknown GPU"),
])
def test_hardware_tag_is_the_accelerator_else_the_cpu(machine, tag):
    assert hardware_tag(machine) == tag


# `nvidia-smi --query-gpu=name` as real machines print it, and the tag a table's Source carries:
# the model, form factor, memory and edition dropped, as "H100 80GB HBM3" has always become H100.
REAL_NVIDIA_NAMES = [
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA GH200 144G HBM3e", "GH200"),
    ("NVIDIA GB200", "GB200"),
    ("NVIDIA GB300", "GB300"),
    ("NVIDIA GB10", "GB10"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA B300 SXM6 AC", "B300"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTXPRO6000"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTXPRO6000MAXQ"),  # the 300 W variant
    ("NVIDIA H20", "H20"),
    ("NVIDIA L20", "L20"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA H200 NVL", "H200"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 PCIe", "H100"),
    ("NVIDIA H800", "H800"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
    ("Tesla T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100"),
    ("NVIDIA GeForce RTX 4090", "RTX4090"),
    ("NVIDIA GeForce RTX 3090 Ti", "RTX3090TI"),  # not an RTX 3090's row
    ("NVIDIA GeForce RTX 3060", "RTX3060"),
    ("Quadro RTX 4000", "RTX4000"),
    ("NVIDIA RTX A6000", "RTXA6000"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX6000ADA"),  # not a Quadro RTX 6000's row
    ("NVIDIA GeForce RTX 4090 D", "RTX4090D"),  # not an RTX 4090's row
    ("NVIDIA GeForce RTX 5090 D v2", "RTX5090DV2"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", "RTX4070TISUPER"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", "RTX4090LAPTOP"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "RTX4000SFFADA"),  # neither a Quadro RTX 4000 nor an RTX 4000 Ada
    ("NVIDIA RTX 4000 Ada Generation", "RTX4000ADA"),
    ("NVIDIA RTX 2000E Ada Generation", "RTX2000EADA"),
]

# A variant of a GPU (fewer cores, a lower power limit, a laptop part) and the GPU it is a variant
# of, as nvidia-smi names them: a variant's results must never replace the other's rows.
VARIANTS = [
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090 D"),
    ("NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5090 D v2"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090 Laptop GPU"),
    ("NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 Ti SUPER"),
    ("Quadro RTX 6000", "NVIDIA RTX 6000 Ada Generation"),
    ("NVIDIA RTX 4000 Ada Generation", "NVIDIA RTX 4000 SFF Ada Generation"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
]


@pytest.mark.parametrize(("name", "tag"), REAL_NVIDIA_NAMES)
def test_real_nvidia_names_are_tagged_by_their_model(name, tag):
    assert hardware_tag(_machine(gpus=[name])) == tag


@pytest.mark.parametrize(("gpu", "variant"), VARIANTS)
def test_a_gpu_variant_keeps_a_tag_of_its_own(gpu, variant):
    tags = hardware_tag(_machine(gpus=[gpu])), hardware_tag(_machine(gpus=[variant]))
    assert tags[0] != tags[1], tags
    # Sources are matched by `[<tag>, <workload>]`: neither machine's tag finds the other's row.
    assert f"[{tags[0]}, c=8]" not in f"PR #1 [{tags[1]}, c=8]"
    assert f"[{tags[1]}, c=8]" not in f"PR #1 [{tags[0]}, c=8]"


def test_hardware_tag_can_be_overridden():
    assert hardware_tag(_machine(gpus=["NVIDIA H200"]), "H200-lab2") == "H200-lab2"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("GITHUB_REF", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no `gh` here: the prefix must not depend on it
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
    (tmp_path / "f.py").write_text("a = 1\n")
    _git(tmp_path, "add", "f.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "f")
    return tmp_path


def test_prefix_on_main_names_the_commit(repo):
    assert source_prefix(repo) == f"main {_git(repo, 'rev-parse', '--short=7', 'HEAD')}"


def test_prefix_on_another_branch_is_local(repo):
    _git(repo, "checkout", "-q", "-b", "topic")
    assert source_prefix(repo).startswith("local ")


def test_uncommitted_tracked_edits_make_it_dirty(repo):
    (repo / "f.py").write_text("a = 2\n")
    assert source_prefix(repo) == f"dirty {_git(repo, 'rev-parse', '--short=7', 'HEAD')}"


def test_an_untracked_file_makes_it_dirty_even_in_a_new_directory(repo):
    (repo / "bench").mkdir()
    (repo / "bench" / "new_client.py").write_text("print('numbers no commit holds')\n")
    assert source_prefix(repo) == f"dirty {_git(repo, 'rev-parse', '--short=7', 'HEAD')}"


def test_ignored_files_leave_it_clean(repo):
    (repo / ".gitignore").write_text("/results/\n.venv/\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "ignore")
    (repo / "results").mkdir()
    (repo / "results" / "run.json").write_text("{}\n")
    (repo / ".venv").mkdir()
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert source_prefix(repo) == f"main {_git(repo, 'rev-parse', '--short=7', 'HEAD')}"


def test_a_pull_request_ref_wins_over_the_branch(repo, monkeypatch):
    monkeypatch.setenv("GITHUB_REF", "refs/pull/316/merge")
    assert source_prefix(repo) == "PR #316"


def test_outside_git_it_says_so(tmp_path):
    assert source_prefix(tmp_path) == "local (no git)"
