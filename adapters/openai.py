"""Any OpenAI-compatible server, with no code: its command comes from the model profile, or it is
already running and `--endpoint http://127.0.0.1:PORT` names it.

With a profile's `openai: {command: [...]}` the cell starts, checks and stops the server like any
other framework's, filling `{host}`, `{port}`, `{model_path}` and `{api_key}` (the key clients send:
--api-key, OPENAI_API_KEY or the profile's api_key_env) into the argv and env. With
`--endpoint` the cell only sends requests: no lifecycle, and the endpoint is recorded instead of a
command. Either way the model id comes from the profile (`openai.served_id`, else the id of the
chosen format) and is sent in every request; the server's `/v1/models` is only checked against it.

Nothing is installed, so the version is whatever the running server reports about itself (the
cell asks when an installation cannot tell). The protocol capabilities are the conservative
defaults: the profile's `ignore_eos` is not sent, as some servers answer 422 to unknown fields
(a profile that wants it for a server that honours it puts it in `sampling`); `--ignore-eos` on the
command line is the user's word about this server, and is sent in both forms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, get_args

from bench.setup import model_files, profiles
from bench.setup.adapter import (
    Adapter,
    Bound,
    Capabilities,
    ModelFormat,
    ModelRef,
    NotConfigured,
    ServeCommand,
    ServeContext,
)
from bench.setup.installs.cache import UNKNOWN_VERSION, Installation, InstallError
from bench.setup.installs.scripted import fill

NAME = "openai"
DEFAULT_PORT = 8012
PLATFORMS = frozenset({
    "linux-x86_64", "linux-aarch64", "linux-x86_64+cuda", "linux-aarch64+cuda", "darwin-arm64", "darwin-x86_64",
})
HOW = ("add `openai: {command: [...]}` (an argv naming {host}, {port}, {model_path}) to the model profile, "
       "or pass --endpoint http://127.0.0.1:PORT for a server that is already running")


@dataclass(frozen=True)
class UsersServer:
    """The recipe: the server is the user's own, so there is never anything to build."""

    framework: str = NAME
    version: str = "users-server"

    def external(self) -> Installation | None:
        return Installation(NAME, UNKNOWN_VERSION, Path.cwd(), {}, source="the user's own server")

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        raise InstallError(f"the generic {NAME} adapter installs nothing: {HOW}")

    def install_hint(self) -> str:
        return f"nothing to install: {HOW}"


def serve(ctx: ServeContext) -> ServeCommand:
    """The profile's command; for an eval row, its profile's `command` or its own `server` shell
    template (sglang-omni's runner format: `{port} {model} {gpus} {repo_root}`, run by /bin/sh)."""
    values = {"host": ctx.host, "port": str(ctx.port), "model_path": str(ctx.model.path or "")}
    extra = str(ctx.options.get("extra_args") or "")
    if "shell" in ctx.options:
        shell_values = {**values, "model": str(ctx.model.path or ctx.model.served_id),
                        "gpus": str(ctx.options.get("gpus", "")), "repo_root": str(ctx.options.get("repo_root", ""))}
        script = " ".join(part for part in (str(ctx.options["shell"]), extra) if part)
        return ServeCommand(argv=["/bin/sh", "-c", fill(script, shell_values)])
    command = ctx.options.get("command") or ctx.install.details.get("command")
    if not command:
        raise NotConfigured(f"{NAME}: no server command: {HOW}")
    template_env = ctx.install.details.get("env", {})
    if ctx.api_key is not None:
        values["api_key"] = ctx.api_key
    elif any("{api_key}" in arg for arg in [*command, *template_env.values()]):  # a usage error in pytest
        raise NotConfigured(f"{NAME}: the server command names {{api_key}} and no API key was given: "
                            "pass --api-key KEY or set OPENAI_API_KEY")
    env = {key: fill(value, values) for key, value in template_env.items()}
    argv = [fill(arg, values) for arg in command] + (extra.split() if extra else [])
    return ServeCommand(argv=argv, env=env)


def bind(profile: profiles.ModelProfile, endpoint: str | None = None, *, download: bool = True) -> Bound:
    """The adapter, installation and model for this profile; raises NotConfigured (no server named,
    or no single id to send) or ProfileUnavailable (the command needs a model file that cannot be had)."""
    section = profile.openai or profiles.OpenAIServer()
    if endpoint is None and section.command is None:
        raise NotConfigured(f"{NAME}: no server to benchmark for model profile {profile.name!r}: {HOW}")
    fmt, served = _format_and_id(profile, section)
    uses_path = any("{model_path}" in arg for arg in [*(section.command or ()), *section.env.values()])
    path = None
    if endpoint is None and uses_path:
        path = model_files.resolve(profile, fmt, download=download).path
    model = ModelRef(path=path, served_id=served, alias=served)
    details: dict[str, object]
    if endpoint is not None:
        source, details = "--endpoint", {"endpoint": endpoint}
    else:
        source = f"{profile.source}: openai.command"
        details = {"command": list(section.command or ()), "env": dict(section.env)}
    install = Installation(NAME, UNKNOWN_VERSION, Path.cwd(), {}, source=source, details=details)
    adapter = replace(ADAPTER, model_format=_known(fmt), default_port=section.port,
                      ready_path=section.ready_path)
    return Bound(adapter, install, model)


def _known(fmt: str) -> ModelFormat:
    """A profile's format as the adapter holds it (bench.setup.profiles accepts only these)."""
    for known in get_args(ModelFormat):
        if fmt == known:
            return known
    raise NotConfigured(f"{NAME}: unknown model format {fmt!r}")


def _format_and_id(profile: profiles.ModelProfile, section: profiles.OpenAIServer) -> tuple[str, str]:
    if section.format is not None:
        fmt = section.format
    elif len({entry.served_id for entry in profile.formats.values()}) == 1 or section.served_id:
        fmt = next(iter(profile.formats))  # one id whichever format: the format only labels the result
    else:
        ids = ", ".join(f"{fmt}: {entry.served_id}" for fmt, entry in profile.formats.items())
        raise NotConfigured(
            f"{NAME}: model profile {profile.name!r} names a different id per format ({ids}); set "
            f"`openai: {{served_id: ...}}` (the id your server lists) or `openai: {{format: ...}}` in {profile.source}"
        )
    return fmt, section.served_id or profile.formats[fmt].served_id


ADAPTER = Adapter(
    name=NAME,
    platforms=PLATFORMS,
    model_format="gguf",  # replaced by the profile's choice when bound
    default_port=DEFAULT_PORT,
    ready_path="/v1/models",
    recipes={"*": UsersServer()},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    bind=bind,
    places_extra_args=True,
)
