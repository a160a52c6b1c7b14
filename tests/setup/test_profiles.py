"""Model profiles: the schema catches mistakes by file and field; resolve finds or explains."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from bench.setup.model_files import hub_cache, resolve
from bench.setup.model_ref import ModelRef
from bench.setup.profiles import ProfileError, ProfileUnavailable, available_profiles, chosen_model, load_profile

VALID = """\
name: custom
results_name: Custom
sampling: {temperature: 0.5}
formats:
  gguf: {repo: someone/custom-GGUF, file: custom.gguf, served_id: custom-gguf, alias: custom-alias}
  hf: {repo: someone/custom, served_id: custom}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CELLBENCH_CACHE", str(cache))
    return cache


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_shipped_profiles_load() -> None:
    assert {"tiny", "qwen3-0.6b"} <= set(available_profiles())
    tiny = load_profile("tiny")
    assert (tiny.name, tiny.results_name, tiny.builtin, tiny.sampling) == ("tiny", "tiny", "tiny", {"temperature": 1.0})
    assert set(tiny.formats) == {"gguf", "hf", "mlx"} and tiny.ignore_eos
    assert all(entry.served_id == "tiny" and entry.repo is None for entry in tiny.formats.values())

    qwen = load_profile("qwen3-0.6b")
    assert qwen.results_name == "Qwen3-0.6B" and qwen.builtin is None and not qwen.ignore_eos
    assert qwen.sampling == {"temperature": 0.0, "chat_template_kwargs": {"enable_thinking": False}}
    gguf = qwen.formats["gguf"]
    assert (gguf.repo, gguf.file) == ("unsloth/Qwen3-0.6B-GGUF", "Qwen3-0.6B-BF16.gguf")
    assert gguf.served_id == "Qwen3-0.6B-BF16"
    assert (qwen.formats["hf"].repo, qwen.formats["hf"].served_id) == ("Qwen/Qwen3-0.6B", "Qwen3-0.6B")
    assert qwen.formats["mlx"].served_id == "Qwen3-0.6B-bf16"
    assert (qwen.formats["ollama"].tag, qwen.formats["ollama"].served_id) == ("qwen3:0.6b-fp16", "qwen3:0.6b-fp16")
    assert qwen.source == Path(__file__).resolve().parents[2] / "models" / "qwen3-0.6b.yaml"


def test_a_profile_loads_by_path(tmp_path: Path) -> None:
    profile = load_profile(str(_write(tmp_path, VALID)))
    assert profile.name == "custom" and profile.formats["gguf"].alias == "custom-alias"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("name: x\nresults_name: x\n", "formats"),
        ("name: x\nresults_name: x\nformats: {}\n", "formats"),
        ("name: x\nresults_name: x\nformats: {onnx: {repo: a/b, served_id: s}}\n", "formats.onnx"),
        ("name: x\nresults_name: x\nformats: [gguf]\n", "formats"),
        ("name: x\nresults_name: x\nsampling: [1, 2]\nformats: {hf: {repo: a/b, served_id: s}}\n", "sampling"),
        ("name: x\nresults_name: x\nformats: {gguf: {repo: a/b, file: 3, served_id: s}}\n", "formats.gguf.file"),
        ("name: x\nresults_name: x\nsampling: {stream: false}\nformats: {hf: {repo: a/b, served_id: s}}\n",
         "sampling.stream"),
        ("name: x\nresults_name: x\nformats: {gguf: {repo: a/b, served_id: s}}\n", "formats.gguf.file"),
        ("name: x\nresults_name: x\nformats: {hf: {served_id: s}}\n", "formats.hf.repo"),
        ("name: x\nresults_name: x\nformats: {hf: {repo: a/b}}\n", "formats.hf.served_id"),
        ("name: x\nresults_name: x\nformats: {hf: {repo: not-a-repo-id, served_id: s}}\n", "formats.hf.repo"),
        ("name: x\nresults_name: x\nformats: {hf: {repo: a/b, served_id: s, revison: main}}\n", "formats.hf.revison"),
        ("name: x\nresults_name: x\nformats: {ollama: {served_id: s}}\n", "formats.ollama.tag"),
        ("name: x\nresults_name: x\nbuiltin: tiny\nformats: {gguf: {repo: a/b, served_id: s}}\n", "formats.gguf.repo"),
        ("name: x\nresults_name: x\nbuiltin: huge\nformats: {gguf: {served_id: s}}\n", "builtin"),
        ("name: x\nresults_name: x\nbuiltin: tiny\nformats: {ollama: {tag: t}}\n", "formats.ollama"),
        ("name: x\nresults_name: a/b\nformats: {hf: {repo: a/b, served_id: s}}\n", "results_name"),
        ("results_name: x\nformats: {hf: {repo: a/b, served_id: s}}\n", "name"),
        ("name: [x]\nresults_name: x\nformats: {hf: {repo: a/b, served_id: s}}\n", "name"),
        ("name: x\nresults_name: x\nformatz: {}\n", "formatz"),
        ("- just\n- a list\n", "<top level>"),
        ("name: x\nresults_name: x\nignore_eos: 'yes'\nformats: {hf: {repo: a/b, served_id: s}}\n", "ignore_eos"),
    ],
)
def test_a_broken_profile_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    assert str(path) in str(caught.value)
    assert f"field '{field}'" in str(caught.value)


def test_invalid_yaml_and_unknown_names_are_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: [unclosed\n")
    with pytest.raises(ProfileError, match="not valid YAML") as caught:
        load_profile(str(path))
    assert str(path) in str(caught.value)
    with pytest.raises(ProfileError, match=r"no-such-model.*shipped profiles: .*tiny"):
        load_profile("no-such-model")


def test_resolve_tiny_builds_it_locally() -> None:
    tiny = load_profile("tiny")
    ref = resolve(tiny, "gguf")
    assert isinstance(ref, ModelRef) and ref.path is not None and ref.path.is_file()
    assert ref.path.read_bytes()[:4] == b"GGUF"
    assert (ref.served_id, ref.alias) == ("tiny", "tiny")
    folder = resolve(tiny, "mlx").path
    assert folder is not None and (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert resolve(tiny, "hf").path == folder


def test_resolve_a_format_the_profile_lacks() -> None:
    with pytest.raises(ProfileUnavailable, match=r"'tiny'.*'ollama'"):
        resolve(load_profile("tiny"), "ollama")


def test_resolve_ollama_is_just_the_tag() -> None:
    ref = resolve(load_profile("qwen3-0.6b"), "ollama")
    assert ref == ModelRef(path=None, served_id="qwen3:0.6b-fp16", alias="qwen3:0.6b-fp16")


@pytest.mark.parametrize(("fmt", "repo"), [("gguf", "unsloth/Qwen3-0.6B-GGUF"), ("hf", "Qwen/Qwen3-0.6B")])
def test_resolve_offline_without_a_cache_explains_quickly(monkeypatch: pytest.MonkeyPatch, fmt: str, repo: str) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    with pytest.raises(ProfileUnavailable) as caught:
        resolve(load_profile("qwen3-0.6b"), fmt)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert repo in message and "HF_HUB_OFFLINE" in message and f"hf download {repo}" in message
    assert "\n" not in message


def test_resolve_with_downloads_off_explains() -> None:
    with pytest.raises(ProfileUnavailable, match="downloads are off"):
        resolve(load_profile("qwen3-0.6b"), "mlx", download=False)


def _fill_hub_cache(repo: str, files: dict[str, bytes]) -> Path:
    """The layout huggingface_hub itself writes: refs/main names a snapshot holding the files."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = hub_cache() / f"models--{repo.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, content in files.items():
        (snapshot / name).write_bytes(content)
    return snapshot


def test_resolve_uses_a_filled_cache_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    profile = load_profile(str(_write(tmp_path, VALID)))
    snapshot = _fill_hub_cache("someone/custom-GGUF", {"custom.gguf": b"GGUF fake"})
    ref = resolve(profile, "gguf")
    assert ref.path is not None and ref.path.resolve() == (snapshot / "custom.gguf").resolve()
    assert (ref.served_id, ref.alias) == ("custom-gguf", "custom-alias")
    folder = _fill_hub_cache("someone/custom", {"config.json": b"{}"})
    assert resolve(profile, "hf").path == folder


def test_the_model_is_the_option_then_siliconbench_s_variable_then_tiny() -> None:
    assert chosen_model(None, {}) == ("tiny", "default")
    assert chosen_model(None, {"APPLEBENCH_MODEL": "qwen3-0.6b"}) == ("qwen3-0.6b", "APPLEBENCH_MODEL")
    assert chosen_model("tiny", {"APPLEBENCH_MODEL": "qwen3-0.6b"}) == ("tiny", "--model")
    assert chosen_model(None, {"APPLEBENCH_MODEL": "  "}) == ("tiny", "default"), "empty is unset, as in a shell"
    # SiliconBench's profile names are cellbench's: the variable its scripts set loads here
    assert load_profile(chosen_model(None, {"APPLEBENCH_MODEL": "qwen3-0.6b"})[0]).results_name == "Qwen3-0.6B"
