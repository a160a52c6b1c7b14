"""The one place cellbench reads its command line: every option checked, parsed and resolved into
one `Settings` before any server starts (a bad value is a usage error, not a failed cell later).

Each cell option's value goes straight into its record's field (its `into`); the fields of
`settings.RESOLVED` are made here from several options, the environment or the host."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench.base.defaults import SPLITS
from bench.core.client_settings import ClientSettings, ProcsChoice
from bench.core.result.files import new_run_id
from bench.host.cpus import placement
from bench.host.machine import MachineSlugError, detect
from bench.load import procs
from bench.plugins.opts import eval_settings, settings
from bench.plugins.opts.eval_settings import EvalSettings
from bench.plugins.opts.settings import RESOLVED, PytestOptions, Settings
from bench.plugins.opts.spec import Option, declared, flags
from bench.run.config import (
    DEFAULT_CELL_BUDGET_S,
    BudgetSettings,
    LoadPlan,
    LoadSettings,
    ReportingSettings,
    ServerSettings,
    SessionPlan,
)
from bench.run.parsing import LOAD_OPTIONS, SESSION_OPTIONS, load_plan, session_plan
from bench.setup import profiles, traces
from bench.setup.prompt_files import PromptFileError, load_prompts

RUN_ID_KEY = "cellbench_run_id"  # in xdist's workerinput: the controller's run id
# pytest's option groups, in `pytest --help`'s order: (name, description), their options
GROUPS = ((settings.GROUP, settings.OPTIONS), (eval_settings.GROUP, tuple(flags(EvalSettings))))


def every_option() -> list[Option]:
    return [option for _, options in GROUPS for option in options]


def build(config: pytest.Config) -> Settings:
    """The session's Settings; raises pytest.UsageError for the first bad value."""
    _pdb_trace_mixup(config)
    raw = {opt.name: config.getoption(opt.name) for opt in every_option()}
    for opt in every_option():
        opt.check(raw[opt.name])
    parsed = {opt.name: opt.parse(raw[opt.name]) if opt.parse is not None else raw[opt.name]
              for opt in settings.OPTIONS}
    fields = _fields(parsed)
    own, server = fields.pop(""), fields["server"]
    workerinput = getattr(config, "workerinput", None)
    own["run_id"] = (workerinput or {}).get(RUN_ID_KEY) or own["run_id"] or new_run_id()
    own["model"], model_source = profiles.chosen_model(own["model"], os.environ)
    profile = _profile(own["model"], model_source)
    _machine()
    cpus = _cpus(parsed["client_cpus"], parsed["server_cpus"], server["endpoint"])
    budgets = parsed["cell_budget"]  # the splits --cell-budget named
    built = Settings(
        **own,
        profile=profile,
        model_source=model_source,
        load=LoadSettings(**fields["load"], plan=(plan := _load(raw)), sessions=_sessions(raw, plan)),
        server=ServerSettings(**server, api_key=_api_key(parsed["api_key"], profile, server["endpoint"])),
        client=ClientSettings(**fields["client"], cpus=cpus, client_procs=_client_procs(parsed["client_procs"], cpus)),
        budget=BudgetSettings(**fields["budget"], cell_budget_s={**DEFAULT_CELL_BUDGET_S, **budgets},
                              cell_budget_named=frozenset(budgets)),
        reporting=ReportingSettings(**fields["reporting"]),
        eval=EvalSettings(**_parsed(EvalSettings, raw)),
        pytest=PytestOptions(
            keyword=config.getoption("keyword"), markexpr=config.getoption("markexpr"),
            collect_only=config.getoption("collectonly"),
            htmlpath=config.getoption("htmlpath", None) if config.pluginmanager.hasplugin("html") else None,
            timeout=config.getoption("timeout", None) if config.pluginmanager.hasplugin("timeout") else None),
    )
    _check_prompts(built)
    if built.load.plan is not None and built.load.plan.trace is not None:
        if built.client.unique_prompts:
            raise pytest.UsageError("--unique-prompts opens every message with a nonce, which would change "
                                    "--trace-file's input lengths and the prefixes its hash_ids share: give one")
        try:
            traces.check_tokenizer(profile.builtin, profile.name)
        except traces.TokenizerMissing as exc:
            raise pytest.UsageError(str(exc)) from None
    if built.load.sessions is not None and built.load.sessions.weka:
        try:
            traces.check_tokenizer(profile.builtin, profile.name)
        except traces.TokenizerMissing as exc:
            raise pytest.UsageError(str(exc).replace("--trace-file", "--sessions-file's Weka trace")) from None
    return built


def _pdb_trace_mixup(config: pytest.Config) -> None:
    """`pytest --trace FILE` is pytest's debugging option (break to pdb at each test) and FILE a test
    path: a user who meant a request trace would get a pdb prompt. Say which option they meant."""
    if not config.getoption("trace", False):
        return
    for arg in config.args:
        path = Path(arg.split("::")[0])
        if traces.looks_like_trace(path if path.is_absolute() else Path(config.invocation_params.dir) / path):
            raise pytest.UsageError(f"{arg} is a request trace, and pytest's own --trace starts pdb; give a request "
                                    f"trace as --trace-file PATH")


def _fields(parsed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """record -> {field: value} of every cell option but the RESOLVED ones ("": Settings' own fields)."""
    out: dict[str, dict[str, Any]] = {"": {}, "load": {}, "server": {}, "client": {}, "budget": {}, "reporting": {}}
    for opt in settings.OPTIONS:
        if opt.into not in RESOLVED:
            record, _, name = opt.into.rpartition(".")
            out[record][name] = parsed[opt.name]
    return out


def _parsed(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    """Each option-declared field of `cls`: its option's value, through the option's parser."""
    out = {}
    for name, (first, *_) in declared(cls):
        value = raw[first.name]
        out[name] = first.parse(value) if first.parse is not None else value
    return out


def _profile(model: str, source: str) -> profiles.ModelProfile:
    said = "" if source == "--model" else f"{source}={model}: "  # a variable the user may not remember setting
    try:
        return profiles.load_profile(model)
    except profiles.ProfileError as exc:
        raise pytest.UsageError(f"{said}{exc}") from None
    except (OSError, UnicodeDecodeError) as exc:  # a profile file that exists but cannot be read
        raise pytest.UsageError(f"{said or f'--model {model}: '}cannot read: {exc}") from None


def _machine() -> None:
    """CELLBENCH_MACHINE or APPLEBENCH_RESULTS_SUBDIR that is not a slug: one line, not a failed cell."""
    try:
        detect()
    except MachineSlugError as exc:
        raise pytest.UsageError(str(exc)) from None


def _load(raw: dict[str, Any]) -> LoadPlan | None:
    """--request-rate, its companions and --slo (bench.run.parsing.load_plan)."""
    try:
        return load_plan(**{name: raw[name] for name in LOAD_OPTIONS})
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _sessions(raw: dict[str, Any], plan: LoadPlan | None) -> SessionPlan | None:
    """--sessions and its companions (bench.run.parsing.session_plan)."""
    try:
        return session_plan(**{name: raw[name] for name in SESSION_OPTIONS}, plan=plan)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _cpus(client: str, server: str, endpoint: str | None) -> placement.Placement:
    """--client-cpus / --server-cpus resolved for this host (bench.host.placement.resolve)."""
    try:
        return placement.resolve(client, server, endpoint=endpoint is not None,
                                gpu=client == server == "auto" and bool(detect().gpus))
    except placement.AffinityError as exc:
        raise pytest.UsageError(str(exc)) from None


def _client_procs(text: str, cpus: placement.Placement) -> ProcsChoice:
    try:
        return procs.resolve(text, cpus)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _api_key(given: str | None, profile: profiles.ModelProfile, endpoint: str | None) -> profiles.ApiKey | None:
    try:
        key = profiles.api_key(given, os.environ, profile)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if key is None and profile.openai and profile.openai.takes_api_key and endpoint is None:
        raise pytest.UsageError(f"--model {profile.source}: its openai.command gives the server {{api_key}}, and no "
                                "API key was given: pass --api-key KEY or set OPENAI_API_KEY")
    return key


def _check_prompts(s: Settings) -> None:
    """--prompts, each split's file read once as that split's cells read it (bench.run.cell._prompts)."""
    one_for_all = len(set(s.client.prompts.values())) == 1 and set(s.client.prompts) == set(SPLITS)
    for split, path in s.client.prompts.items():
        try:
            load_prompts(path, split_hint=split, tools_param=s.client.tools_param)
        except PromptFileError as exc:
            raise pytest.UsageError(f"--prompts{'' if one_for_all else ' ' + split}: {exc}") from None
