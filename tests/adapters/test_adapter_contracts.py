"""Every adapter's serve command, checked against SiliconBench's, on platforms this machine lacks.

Apple-only and CUDA frameworks cannot run here, so their contract is the exact command line, env
and port each would run, built from the real `qwen3-0.6b` profile with fake local paths and a fake
installation. `test_contract_table` prints, for every adapter, what it would run on macOS and on
Linux with CUDA (`pytest -s`, or shown anyway: it writes past the capture). The scripted-install
recipe those frameworks use is exercised for real: a git clone, a shell step, a version probe.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from pathlib import Path

import pytest

import adapters
from adapters import omlx
from adapters import openai as generic
from bench.setup import profiles
from bench.setup.adapter import Adapter, Capabilities, ModelRef, NotConfigured, ServeCommand, ServeContext
from bench.setup.installs.cache import (
    UNKNOWN_VERSION,
    Installation,
    InstallError,
    NotInstalled,
    build_log_path,
    ensure_installed,
    install_dir,
)
from bench.setup.installs.scripted import ScriptedInstall, Step, fill

HOST = "127.0.0.1"
MACOS = "darwin-arm64"
CUDA = ("linux-x86_64+cuda", "linux-aarch64+cuda")
# Where the qwen3-0.6b artefacts would be on a machine that has them (nothing is downloaded).
FAKE_PATHS = {"hf": Path("/models/Qwen3-0.6B"), "mlx": Path("/models/Qwen3-0.6B-bf16"), "ollama": None}


class _AnyExecutable(dict):
    """A fake installation's executables: every name an adapter asks for exists under /opt/<fw>/bin."""

    def __init__(self, framework: str):
        super().__init__()
        self.framework = framework

    def __missing__(self, name: str) -> str:
        return f"/opt/{self.framework}/bin/{name}"


def fake_install(framework: str, details: dict | None = None) -> Installation:
    return Installation(framework, "1.0", Path(f"/opt/{framework}"), _AnyExecutable(framework), "test", details or {})


def qwen3_model(fmt: str) -> ModelRef:
    entry = profiles.load_profile("qwen3-0.6b").formats[fmt]
    path = Path("/models") / entry.file if fmt == "gguf" and entry.file else FAKE_PATHS[fmt]
    return ModelRef(path=path, served_id=entry.served_id, alias=entry.alias or entry.served_id)


def command_for(adapter: Adapter, platform: str, split: str) -> tuple[ServeCommand, ModelRef]:
    if adapter.name == generic.NAME:  # the generic adapter's command is the profile's
        install = fake_install(generic.NAME, {"command": OPENAI_COMMAND, "env": {"SERVER_PORT": "{port}"}})
    else:
        install = fake_install(adapter.name)
    model = adapter.model_for_server(qwen3_model(adapter.model_format))
    ctx = ServeContext(install, model, HOST, adapter.default_port, split, 16, platform, workdir=WORKDIR)
    return adapter.serve(ctx), model


def shell_line(command: ServeCommand) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in command.env.items())
    return f"{env} {shlex.join(command.argv)}".strip()


WORKDIR = Path("/runs/row/round_1")  # the server's own folder (adapters that write files use it)
OPENAI_COMMAND = ["/opt/openai/bin/my-server", "--model", "{model_path}", "--host", "{host}", "--port", "{port}"]
Q = "/models/Qwen3-0.6B-BF16.gguf"

# (adapter, platform, split) -> (argv after the executable, env): SiliconBench's commands with our host.
EXPECTED: dict[tuple[str, str, str], tuple[list[str], dict[str, str]]] = {
    # llama.cpp: Apple and CPU: 4 slots, the model's context on chat, -c 65536 on agent;
    # DGX: 16 slots x 8192 (chat) / 16384 (agent).
    ("llamacpp", "linux-x86_64", "chat"): (
        ["-m", Q, "--host", HOST, "--port", "8001", "-ngl", "99", "--parallel", "4", "--no-webui",
         "--alias", "Qwen3-0.6B-BF16"], {}),
    ("llamacpp", "linux-x86_64", "agent"): (
        ["-m", Q, "--host", HOST, "--port", "8001", "-ngl", "99", "--parallel", "4", "-c", "65536", "--no-webui",
         "--alias", "Qwen3-0.6B-BF16"], {}),
    ("llamacpp", MACOS, "chat"): (
        ["-m", Q, "--host", HOST, "--port", "8001", "-ngl", "99", "--parallel", "4", "--no-webui",
         "--alias", "Qwen3-0.6B-BF16"], {}),
    ("llamacpp", MACOS, "agent"): (
        ["-m", Q, "--host", HOST, "--port", "8001", "-ngl", "99", "--parallel", "4", "-c", "65536", "--no-webui",
         "--alias", "Qwen3-0.6B-BF16"], {}),
    ("llamacpp", "linux-x86_64+cuda", "chat"): (
        ["-m", Q, "--host", HOST, "--port", "8001", "-ngl", "99", "--parallel", "16", "-c", "131072", "--no-webui",
         "--alias", "Qwen3-0.6B-BF16"], {}),
    ("llamacpp", "linux-aarch64+cuda", "agent"): (
        ["-m", Q, "--host", HOST, "--port", "8001", "-ngl", "99", "--parallel", "16", "-c", "262144", "--no-webui",
         "--alias", "Qwen3-0.6B-BF16"], {}),
    ("mistralrs", MACOS, "chat"): (
        ["serve", "-p", "8003", "--host", HOST, "-m", "/models", "--format", "gguf", "-f", "Qwen3-0.6B-BF16.gguf"], {}),
    # Linux: the same command from the user's own build (no installer there).
    ("mistralrs", "linux-x86_64", "agent"): (
        ["serve", "-p", "8003", "--host", HOST, "-m", "/models", "--format", "gguf", "-f", "Qwen3-0.6B-BF16.gguf"], {}),
    ("vllm_metal", MACOS, "chat"): (
        ["serve", "/models/Qwen3-0.6B", "--port", "8004", "--host", HOST, "--enable-prefix-caching",
         "--max-model-len", "4096"],
        {"VLLM_METAL_USE_PAGED_ATTENTION": "1", "VLLM_METAL_MEMORY_FRACTION": "auto"}),
    ("vllm_metal", MACOS, "agent"): (
        ["serve", "/models/Qwen3-0.6B", "--port", "8004", "--host", HOST, "--enable-prefix-caching",
         "--max-model-len", "16384"],
        {"VLLM_METAL_USE_PAGED_ATTENTION": "1", "VLLM_METAL_MEMORY_FRACTION": "auto"}),
    # vllm-mlx: a fresh HOME per server ({cache}: the test's cellbench cache), so its on-disk prefix
    # cache never carries one level's prompts into the next.
    ("vllm_mlx", MACOS, "agent"): (
        ["serve", "/models/Qwen3-0.6B-bf16", "--port", "8008", "--host", HOST, "--continuous-batching"],
        {"HOME": "{cache}/vllm_mlx/home-8008", "HF_HUB_OFFLINE": "1"}),
    ("vllm_mlx", "linux-x86_64", "chat"): (
        ["serve", "/models/Qwen3-0.6B-bf16", "--port", "8008", "--host", HOST, "--continuous-batching"],
        {"HOME": "{cache}/vllm_mlx/home-8008", "HF_HUB_OFFLINE": "1"}),
    ("ollama", MACOS, "chat"): (
        ["serve"],
        {"OLLAMA_HOST": f"{HOST}:8006", "OLLAMA_NUM_PARALLEL": "16", "OLLAMA_KEEP_ALIVE": "10m",
         "OLLAMA_CONTEXT_LENGTH": "16384"}),
    ("ollama", MACOS, "agent"): (
        ["serve"],
        {"OLLAMA_HOST": f"{HOST}:8006", "OLLAMA_NUM_PARALLEL": "16", "OLLAMA_KEEP_ALIVE": "10m",
         "OLLAMA_CONTEXT_LENGTH": "16384"}),
    ("ollama", "linux-x86_64+cuda", "agent"): (
        ["serve"],
        {"OLLAMA_HOST": f"{HOST}:8006", "OLLAMA_NUM_PARALLEL": "16", "OLLAMA_KEEP_ALIVE": "10m",
         "OLLAMA_CONTEXT_LENGTH": "16384"}),
    # inferrs (retired): SiliconBench's flags on every platform, the device the platform's.
    ("inferrs", MACOS, "chat"): (
        ["serve", "/models/Qwen3-0.6B", "--host", HOST, "--port", "8007", "--device", "metal", "--dtype", "bf16",
         "--max-seq-len", "16384", "--initial-blocks", "512", "--paged-attention=0.5"], {"HF_HUB_OFFLINE": "1"}),
    ("inferrs", "linux-x86_64", "agent"): (
        ["serve", "/models/Qwen3-0.6B", "--host", HOST, "--port", "8007", "--device", "cpu", "--dtype", "bf16",
         "--max-seq-len", "16384", "--initial-blocks", "512", "--paged-attention=0.5"], {"HF_HUB_OFFLINE": "1"}),
    ("inferrs", "linux-aarch64+cuda", "chat"): (
        ["serve", "/models/Qwen3-0.6B", "--host", HOST, "--port", "8007", "--device", "cuda", "--dtype", "bf16",
         "--max-seq-len", "16384", "--initial-blocks", "512", "--paged-attention=0.5"], {"HF_HUB_OFFLINE": "1"}),
    ("sglang", MACOS, "chat"): (
        ["-m", "sglang.launch_server", "--model-path", "/models/Qwen3-0.6B", "--host", HOST, "--port", "8010",
         "--trust-remote-code", "--disable-radix-cache", "--disable-cuda-graph", "--tp-size", "1"],
        {"SGLANG_USE_MLX": "1"}),
    ("sglang", "linux-x86_64+cuda", "agent"): (
        ["-m", "sglang.launch_server", "--model-path", "/models/Qwen3-0.6B", "--host", HOST, "--port", "8010",
         "--trust-remote-code"], {}),
    ("openai", "linux-x86_64", "chat"): (
        ["--model", Q, "--host", HOST, "--port", "8012"], {"SERVER_PORT": "8012"}),
    # sglang-omni's router, as its eval runner starts it (workers and GPUs are in the launcher file).
    ("sglang_omni", "linux-x86_64+cuda", "chat"): (
        ["-m", "sglang_omni_router.python.serve", "--host", HOST, "--port", "8013",
         "--launcher-config", "/runs/row/round_1/launcher.yaml", "--policy", "least_request",
         "--health-success-threshold", "1", "--health-failure-threshold", "2", "--health-check-interval-secs", "2",
         "--log-level", "info"],
        {"SGLANG_OMNI_ROUTER_CLEANUP_MANIFEST": "/runs/row/round_1/router_pgids.txt"}),
}

# What every request sends as `model`: from the profile, never from /v1/models[0].
EXPECTED_SERVED_ID = {
    "llamacpp": "Qwen3-0.6B-BF16",
    "mistralrs": "default",
    "vllm_metal": "/models/Qwen3-0.6B",
    "vllm_mlx": "/models/Qwen3-0.6B-bf16",
    "omlx": "Qwen3-0.6B-bf16",
    "ollama": "qwen3:0.6b-fp16",
    "sglang": "/models/Qwen3-0.6B",
    "inferrs": "/models/Qwen3-0.6B",
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CELLBENCH_CACHE", str(cache))  # omlx makes its model dir here
    return cache


def all_cases() -> list[tuple[str, str, str]]:
    return [(name, plat, split) for name, adapter in sorted(adapters.registry().items())
            for plat in sorted(adapter.platforms) for split in ("chat", "agent")]


@pytest.mark.parametrize("name, platform, split", sorted(EXPECTED))
def test_exact_command(name, platform, split, private_cache):
    adapter = adapters.get(name)
    assert platform in adapter.platforms
    command, _ = command_for(adapter, platform, split)
    argv, env = EXPECTED[(name, platform, split)]
    assert command.argv[0].startswith(f"/opt/{name}/bin/"), "the installed executable, never a bare name"
    assert command.argv[1:] == argv
    assert command.env == {key: value.replace("{cache}", str(private_cache)) for key, value in env.items()}


def test_each_vllm_mlx_server_starts_with_an_empty_home(private_cache):
    command, _ = command_for(adapters.get("vllm_mlx"), "linux-x86_64", "chat")
    home = Path(command.env["HOME"])
    stale = home / ".cache" / "vllm-mlx" / "prefix_cache" / "index.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    again, _ = command_for(adapters.get("vllm_mlx"), "linux-x86_64", "agent")
    assert again.env["HOME"] == str(home) and home.is_dir() and not any(home.iterdir())


@pytest.mark.parametrize("name, platform, split", all_cases())
def test_every_command_binds_our_host_and_port_and_names_the_model(name, platform, split):
    adapter = adapters.get(name)
    command, model = command_for(adapter, platform, split)
    words = [*command.argv, *command.env.values()]
    assert not any("0.0.0.0" in w for w in words), "servers listen on 127.0.0.1 only"
    assert any(HOST in w for w in words) and any(str(adapter.default_port) in w for w in words)
    assert model.served_id
    if model.path is not None and name == "sglang_omni":  # the workers get it through the launcher file
        assert any(f"model_path: {model.path}" in text for text in command.files.values())
    elif model.path is not None and name != "omlx":  # omlx reaches the model through its model dir
        assert any(str(model.path) in w or Path(model.path).name == w for w in command.argv)


@pytest.mark.parametrize("name", sorted(EXPECTED_SERVED_ID))
def test_served_id_comes_from_the_profile(name):
    adapter = adapters.get(name)
    model = adapter.model_for_server(qwen3_model(adapter.model_format))
    assert model.served_id == EXPECTED_SERVED_ID[name]


def test_ollama_model_is_the_profile_tag_with_no_file():
    model = adapters.get("ollama").model_for_server(qwen3_model("ollama"))
    assert model.path is None and model.served_id == "qwen3:0.6b-fp16"


def test_omlx_model_dir_holds_one_link_named_as_the_served_id(private_cache):
    command, model = command_for(adapters.get("omlx"), MACOS, "chat")
    argv = command.argv
    model_dir = Path(argv[argv.index("--model-dir") + 1])
    assert [p.name for p in model_dir.iterdir()] == [model.served_id] == ["Qwen3-0.6B-bf16"]
    assert os.readlink(model_dir / "Qwen3-0.6B-bf16") == "/models/Qwen3-0.6B-bf16"
    ssd = Path(argv[argv.index("--paged-ssd-cache-dir") + 1])
    assert ssd == private_cache / "omlx" / "ssd-cache-8005" and ssd.is_dir() and not any(ssd.iterdir())
    assert argv[1:2] == ["serve"] and argv[argv.index("--port") + 1] == "8005"
    assert argv[argv.index("--paged-ssd-cache-max-size") + 1] == "100GB"
    assert argv[argv.index("--hot-cache-max-size") + 1] == "8GB"
    assert command.env == {"OMLX_HOT_CACHE_ONLY": "true"}
    (ssd / "stale-block").write_text("x")
    again, _ = command_for(adapters.get("omlx"), MACOS, "agent")
    assert again.argv == argv, "same model, same directory"
    assert not any(ssd.iterdir()), "each server starts with an empty SSD cache"
    other = omlx.model_dir(ModelRef(Path("/models/other"), "other"))
    assert other != model_dir and [p.name for p in other.iterdir()] == ["other"]


def test_ports_are_siliconbench_s_and_unique():
    ports = {name: adapter.default_port for name, adapter in adapters.registry().items()}
    assert all(8001 <= port <= 8013 for port in ports.values()), ports
    assert len(set(ports.values())) == len(ports), f"two adapters share a port: {ports}"
    siliconbench = {"llamacpp": 8001, "mlx_lm": 8002, "mistralrs": 8003, "vllm_metal": 8004, "omlx": 8005,
                    "ollama": 8006, "inferrs": 8007, "vllm_mlx": 8008, "hf_transformers": 8009, "sglang": 8010,
                    "vllm": 8011}
    assert {name: ports[name] for name in siliconbench if name in ports} == {
        name: port for name, port in siliconbench.items() if name in ports}


@pytest.mark.parametrize("name", sorted(adapters.registry()))
def test_every_platform_has_a_recipe_with_a_hint(name):
    adapter = adapters.get(name)
    for platform in adapter.platforms:
        assert platform in adapter.recipes or "*" in adapter.recipes, (name, platform)
        recipe = adapter.recipe_for(platform)
        assert recipe.framework == name and recipe.install_hint().strip()


def test_ignore_eos_is_sent_only_to_servers_that_honour_it():
    # transformers serve answers 422 to it; mlx-lm and ollama accept it and ignore it (early stops
    # would pass for full-length replies); the others, the generic adapter included, are not known to.
    honoured = {name for name, adapter in adapters.registry().items() if adapter.capabilities.ignore_eos}
    assert honoured == {"llamacpp", "sglang", "vllm", "vllm_metal"}


def test_every_capability_changes_the_request():
    """A capability is a claim about what the engine does with it: a field nothing reads is gone."""
    assert {f.name for f in dataclasses.fields(Capabilities)} == {"include_usage", "ignore_eos", "sampling_per_request"}
    llamacpp = adapters.get("llamacpp")
    assert llamacpp.request_extras() == {"stream_options": {"include_usage": True}}
    quiet = dataclasses.replace(llamacpp, capabilities=Capabilities(include_usage=False))
    assert quiet.request_extras() == {}
    # ignore_eos: the cell's request body carries it only where declared; sampling_per_request False: the
    # fidelity run gets a server of its own (both in tests/cells/test_cells_python_servers.py).
    assert [name for name, a in sorted(adapters.registry().items())
            if not a.capabilities.sampling_per_request] == ["hf_transformers"]


def test_cuda_and_metal_builds_of_llamacpp_are_their_own_cache_entries():
    llamacpp = adapters.get("llamacpp")
    recipes = {tag: llamacpp.recipe_for(tag) for tag in ("linux-x86_64", MACOS, *CUDA)}
    assert "-DGGML_CUDA=ON" in recipes["linux-x86_64+cuda"].cmake_flags
    assert "-DGGML_METAL=ON" in recipes[MACOS].cmake_flags
    assert recipes["linux-x86_64"].version == "b11434", "the CPU build keeps its cache entry"
    assert len({r.version for r in recipes.values()}) == 3


def test_contract_table(capsys):
    """Prints what every adapter would run on macOS and on Linux with CUDA; asserts each has one."""
    lines = []
    for name, adapter in sorted(adapters.registry().items()):
        cuda = next((tag for tag in CUDA if tag in adapter.platforms), CUDA[0])
        for platform in (MACOS, cuda):
            if platform not in adapter.platforms:
                lines.append(f"{name:<16} {platform:<19}        (not a platform of {name})")
                continue
            for split in ("chat", "agent"):
                command, model = command_for(adapter, platform, split)
                assert command.argv
                lines.append(f"{name:<16} {platform:<19} {split:<6} {shell_line(command)}")
            where = "; the command is an example profile's `openai.command`" if name == generic.NAME else ""
            lines.append(f"{'':<16} {'':<19} model  {model.served_id}  (port {adapter.default_port}, "
                         f"ready {adapter.ready_path}{where})")
        if not ({MACOS, *CUDA} & adapter.platforms):
            lines.append(f"{name:<16} (runs on {', '.join(sorted(adapter.platforms))} only)")
    with capsys.disabled():
        print("\n\n".join(["", "=== adapter contracts: macOS and Linux+CUDA ===", "\n".join(lines)]))
    for name in ("llamacpp", "mistralrs", "vllm_metal", "vllm_mlx", "omlx", "ollama", "sglang", "inferrs"):
        assert any(line.split()[:3] == [name, MACOS, "chat"] and f"/opt/{name}/bin/" in line for line in lines), name
    for name in ("llamacpp", "sglang", "ollama", "mistralrs", "inferrs"):
        assert any(line.split()[:3] == [name, CUDA[0], "agent"] for line in lines), name


# --- the generic adapter: bound from a profile ---------------------------------------------------


def test_openai_binds_from_a_profile_section(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\nresults_name: P\nbuiltin: tiny\nformats: {gguf: {served_id: tiny}, hf: {served_id: tiny}}\n"
        "openai: {command: [srv, --port, '{port}', --host, '{host}'], env: {A: '{host}:{port}'}, port: 9001,"
        " ready_path: /health, served_id: my-model}\n"
    )
    bound = generic.bind(profiles.load_profile(str(path)))
    assert bound.model == ModelRef(None, "my-model", "my-model"), "no {model_path}: nothing is resolved"
    assert bound.adapter.default_port == 9001 and bound.adapter.ready_path == "/health"
    ctx = ServeContext(bound.install, bound.model, HOST, 9001, "chat", 1, "linux-x86_64")
    command = bound.adapter.serve(ctx)
    assert command.argv == ["srv", "--port", "9001", "--host", HOST] and command.env == {"A": f"{HOST}:9001"}
    assert bound.install.version == UNKNOWN_VERSION


def test_openai_endpoint_needs_no_command_and_resolves_nothing():
    bound = generic.bind(profiles.load_profile("tiny"), "http://127.0.0.1:8080")
    assert bound.model.served_id == "tiny" and bound.model.path is None
    assert bound.install.source == "--endpoint" and bound.install.details == {"endpoint": "http://127.0.0.1:8080"}


def test_openai_without_a_server_says_how_to_give_one():
    with pytest.raises(NotConfigured, match=r"openai: \{command.*--endpoint http://127.0.0.1:PORT"):
        generic.bind(profiles.load_profile("tiny"))


def test_openai_refuses_to_guess_between_per_format_ids():
    with pytest.raises(NotConfigured, match="different id per format.*served_id"):
        generic.bind(profiles.load_profile("qwen3-0.6b"), "http://127.0.0.1:8080")


@pytest.mark.parametrize(
    "section, field",
    [
        ("{command: []}", "openai.command"),
        ("{command: [srv, '{model}']}", r"openai.command\[1\]': unknown placeholder \{model\}"),
        ("{port: 0}", "openai.port"),
        ("{ready_path: health}", "openai.ready_path"),
        ("{format: mlx}", "openai.format"),
        ("{command: [srv, '{model_path}']}", "openai.format': is required"),
        ("{env: {A: 1}}", "openai.env.A"),
        ("{cmd: [srv]}", "openai.cmd"),
    ],
)
def test_openai_section_errors_name_file_and_field(tmp_path, section, field):
    path = tmp_path / "bad.yaml"
    path.write_text("name: b\nresults_name: B\nbuiltin: tiny\nformats: {gguf: {served_id: t}, hf: {served_id: t}}\n"
                    f"openai: {section}\n")
    with pytest.raises(profiles.ProfileError, match=f"{path}.*{field}"):
        profiles.load_profile(str(path))


# --- the scripted-install recipe, for real --------------------------------------------------------


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "upstream"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(repo)]
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("demo\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    subprocess.run([*git, "tag", "v1.2.3"], check=True)
    return repo


def demo_recipe(repo: Path, **overrides) -> ScriptedInstall:
    fields = dict(
        framework="demo",
        version="git-main",
        steps=(
            Step(("git", "clone", "-q", str(repo), "{prefix}/src")),
            Step("mkdir -p bin && printf '#!/bin/sh\\necho demo 1.2.3\\n' > bin/demo-server"
                 " && chmod +x bin/demo-server", cwd="src", env={"WHERE": "{prefix}"}),
        ),
        update_commands=(Step(("git", "pull"), cwd="src"),),
        executables={"demo-server": "src/bin/demo-server"},
        version_probe=("git", "-C", "{prefix}/src", "describe", "--tags", "--always"),
        env_var="DEMO_BIN",
        path_name="demo-server-not-on-path",
    )
    return ScriptedInstall(**{**fields, **overrides})


def test_scripted_install_runs_its_commands_and_records_the_probed_version(git_repo):
    recipe = demo_recipe(git_repo)
    built = ensure_installed(recipe)
    prefix = install_dir(recipe)
    assert built.version == "1.2.3", "git describe's v1.2.3, not the cache key"
    assert built.executable("demo-server") == str(prefix / "src/bin/demo-server")
    assert built.details["recipe"] == "git-main" and built.details["version_output"] == ["v1.2.3"]
    assert built.details["commands"][0] == f"git clone -q {git_repo} {prefix}/src"
    log = build_log_path(recipe).read_text()
    assert f"$ git clone -q {git_repo} {prefix}/src" in log and "$ bash -euo pipefail -c mkdir -p bin" in log
    assert ensure_installed(recipe) == built, "the second call reuses the cache"
    assert recipe.update_script() == [f"cd {prefix}/src && git pull"]


def test_scripted_install_hint_is_the_exact_commands(git_repo):
    recipe = demo_recipe(git_repo)
    prefix = install_dir(recipe)
    hint = recipe.install_hint()
    assert hint.startswith(f"cellbench install demo (runs: git clone -q {git_repo} {prefix}/src && cd {prefix}/src && ")
    assert f"WHERE={prefix} mkdir -p bin" in hint and "set $DEMO_BIN" in hint
    with pytest.raises(NotInstalled, match=r"demo git-main is not installed: cellbench install demo \(runs: git clone"):
        ensure_installed(recipe, allow_install=False)


def test_failed_step_names_the_build_log_and_installs_nothing(git_repo):
    recipe = demo_recipe(git_repo, steps=(Step("echo compiling; exit 3"),))
    with pytest.raises(InstallError, match=str(build_log_path(recipe))):
        ensure_installed(recipe)
    assert "compiling" in build_log_path(recipe).read_text()
    assert not (install_dir(recipe) / "install.json").exists()


def test_a_step_cannot_leave_the_prefix(git_repo):
    with pytest.raises(InstallError, match="leaves the install prefix"):
        ensure_installed(demo_recipe(git_repo, steps=(Step(("true",), cwd="../.."),)))


def test_a_probe_without_a_version_fails_the_install(git_repo):
    with pytest.raises(InstallError, match="printed no version"):
        ensure_installed(demo_recipe(git_repo, version_probe=("echo", "no digits here")))


def _script(path: Path, text: str) -> Path:
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(0o755)
    return path


def test_users_own_install_wins_and_is_probed(tmp_path, git_repo, monkeypatch):
    own = _script(tmp_path / "my-demo", "echo 'Warning: no server running' >&2; echo 'client version is 4.5.6'")
    monkeypatch.setenv("DEMO_BIN", str(own))
    found = ensure_installed(demo_recipe(git_repo), allow_install=False)
    assert (found.version, found.source, found.executable("demo-server")) == ("4.5.6", "$DEMO_BIN", str(own))
    monkeypatch.setenv("DEMO_BIN", str(tmp_path / "missing"))
    with pytest.raises(InstallError, match="not an executable file"):
        demo_recipe(git_repo).external()


def test_users_install_at_its_usual_place(tmp_path, git_repo, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".venv-demo" / "bin").mkdir(parents=True)
    _script(tmp_path / ".venv-demo" / "bin" / "demo", "echo demo 0.9.1")
    recipe = demo_recipe(git_repo, env_var=None, search_paths=("~/.venv-demo/bin/demo",))
    found = recipe.external()
    assert found is not None and (found.version, found.source) == ("0.9.1", "~/.venv-demo/bin/demo")


def test_fill_leaves_shell_braces_alone():
    assert fill('cd {prefix} && echo "${HOME}" {jobs}', {"prefix": "/p"}) == 'cd /p && echo "${HOME}" {jobs}'


@pytest.mark.parametrize("name", ["mistralrs", "vllm_metal", "vllm_mlx", "omlx", "ollama", "sglang"])
def test_apple_recipes_are_siliconbench_s_commands(name):
    recipe = adapters.get(name).recipe_for(MACOS)
    assert isinstance(recipe, ScriptedInstall)
    commands = " && ".join(recipe.install_commands())
    expected = {
        "mistralrs": ["git clone https://github.com/EricLBuehler/mistral.rs.git",
                      'MISTRALRS_METAL_PRECOMPILE=0 cargo build --release --features "metal accelerate"'],
        "vllm_metal": ["curl -fsSL https://raw.githubusercontent.com/vllm-project/vllm-metal/main/install.sh | bash"],
        "vllm_mlx": ["git+https://github.com/waybarrios/vllm-mlx.git"],
        "omlx": ["git clone https://github.com/jundot/omlx.git", "-e"],
        "ollama": ["brew install ollama"],
        "sglang": ["pyproject_other.toml", "[all_mps]", "--python 3.11", "--upgrade mlx mlx-lm", "transformers=="],
    }[name]
    for part in expected:
        assert part in commands, (name, part, commands)
    assert recipe.update_script(), "update_<fw>.sh as data"


def test_sglang_omni_launcher_file_carries_the_profile_and_its_manifest_is_stopped_with_it():
    """An eval profile's router knobs reach the launcher file the router reads, `{repo_root}` and
    `{model}` filled; worker ports are a free run beside the router's port, never on it."""
    import yaml

    adapter = adapters.get("sglang_omni")
    model = ModelRef(path=Path("Qwen/Qwen3-Omni-30B-A3B-Instruct"), served_id="qwen3-omni")
    options = {"model_name": "qwen3-omni", "num_workers": 3, "num_gpus_per_worker": 2, "wait_timeout": 600,
               "worker_extra_args": "--config {repo_root}/examples/c.yaml --colocate", "repo_root": "/src/omni",
               "router_policy": "round_robin", "python": "/venvs/omni/bin/python"}
    ctx = ServeContext(fake_install("sglang_omni"), model, HOST, 8123, "chat", 8, CUDA[0], options=options,
                       workdir=WORKDIR)
    command = adapter.serve(ctx)
    assert command.argv[0] == "/venvs/omni/bin/python", "the eval's resolved environment wins"
    assert command.argv[command.argv.index("--policy") + 1] == "round_robin"
    launcher = yaml.safe_load(command.files[WORKDIR / "launcher.yaml"])["launcher"]
    base = launcher.pop("worker_base_port")
    assert launcher == {"backend": "local", "model_path": "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                        "model_name": "qwen3-omni", "num_workers": 3, "num_gpus_per_worker": 2,
                        "worker_host": "127.0.0.1",
                        "worker_extra_args": "--config /src/omni/examples/c.yaml --colocate",
                        "wait_timeout": 600}
    assert 8123 not in range(base, base + 3)
    assert command.group_manifest == WORKDIR / "router_pgids.txt"
    recorded = {**command.to_json(), **command.setup_json()}  # as an eval row's round records it
    assert recorded["group_manifest"] == str(WORKDIR / "router_pgids.txt")
    assert list(recorded["files"]) == [str(WORKDIR / "launcher.yaml")]
    assert not {"files", "group_manifest"} & set(command.to_json()), "a result's server command has no place for them"
    assert not adapter.benchmark_cells, "eval configs start it; it has no benchmark cells"
    with pytest.raises(NotConfigured, match="folder"):
        adapter.serve(dataclasses.replace(ctx, workdir=None))



def test_an_eval_rows_own_server_template_runs_through_sh_with_its_placeholders_filled():
    """sglang-omni's runner format: a row's `server` is a shell line with {port} {model} {gpus}
    {repo_root}, plus this machine's server_extra_by_hardware; it runs under /bin/sh."""
    model = ModelRef(path=Path("Demo/Omni-30B"), served_id="Demo/Omni-30B")
    options = {"shell": "python -m demo.serve --port {port} --model {model} --gpus {gpus} --root {repo_root}",
               "gpus": "2,3", "repo_root": "/src/omni", "extra_args": "--fast"}
    ctx = ServeContext(fake_install("openai"), model, HOST, 8124, "chat", 1, "linux-x86_64", options=options)
    command = adapters.get("openai").serve(ctx)
    assert command.argv == ["/bin/sh", "-c",
                            "python -m demo.serve --port 8124 --model Demo/Omni-30B --gpus 2,3 --root /src/omni --fast"]
