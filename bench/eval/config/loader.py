"""Loading an eval config: the YAML checked field by field into `bench.eval.config.schema`'s types.

Every failure is an `EvalConfigError` that names the file, the row and the field; unknown fields
fail too, so a typo never silently drops a setting.
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from bench.base.defaults import SPLITS
from bench.base.git import toplevel
from bench.base.paths import PROJECT_ROOT
from bench.eval.config.fields import FieldReader
from bench.eval.config.schema import (
    CLIENT_PLACEHOLDERS,
    DEFAULT_TABLES_ROOT,
    LOCATE_FIELDS,
    PROFILE_FIELDS,
    ROUTER_FIELDS,
    ROUTER_FRAMEWORK,
    ROW_FIELDS,
    SHELL_FRAMEWORK,
    TOP_FIELDS,
    CellSpec,
    Environment,
    EvalConfig,
    EvalConfigError,
    EvalRow,
    Locate,
    Requirement,
    ServerProfile,
)
from bench.eval.tables.locate import normalise_model

_ROW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")  # safe as a directory name and a pytest id


class _Checker(FieldReader):
    """The eval config's own fields, read with FieldReader's checks."""

    def server_profile(self, name: str, raw: Any, frameworks: set[str]) -> ServerProfile:
        where = f"server_profiles.{name}"
        raw = self.mapping(raw, where, PROFILE_FIELDS)
        framework = self.optional_text(raw, "framework", where) or ROUTER_FRAMEWORK
        router = [key for key in ROUTER_FIELDS if key in raw]
        if router and framework != ROUTER_FRAMEWORK:
            raise self.fail(f"{where}.{router[0]}", f"is a {ROUTER_FRAMEWORK} router setting; "
                                                    f"framework {framework!r} has no router")
        if "command" in raw and framework != SHELL_FRAMEWORK:
            raise self.fail(f"{where}.command", f"only framework {SHELL_FRAMEWORK!r} takes a command")
        if framework not in frameworks:
            known = ", ".join(sorted(frameworks))
            raise self.fail(f"{where}.framework", f"unknown framework {framework!r}; known: {known}")
        split = self.optional_text(raw, "split", where) or "chat"
        if split not in SPLITS:
            raise self.fail(f"{where}.split", f"must be chat or agent, got {split!r}")
        if "boot_timeout_s" in raw and "server_boot_timeout_s" in raw:
            raise self.fail(f"{where}.server_boot_timeout_s", "and boot_timeout_s are the same setting; keep one")
        boot_key = "server_boot_timeout_s" if "server_boot_timeout_s" in raw else "boot_timeout_s"
        return ServerProfile(
            name=name,
            framework=framework,
            split=split,
            max_concurrency=self.number(raw, "max_concurrency", where, 1, integer=True, minimum=1),
            server_gpus=self.number(raw, "server_gpus", where, 0, integer=True, minimum=0),
            boot_timeout_s=self.number(raw, boot_key, where, None, integer=False, minimum=1),
            env=self.env(raw.get("env", {}), f"{where}.env"),
            options={**self.router_options(raw, where), **self.command(raw, where)},
        )

    def router_options(self, raw: dict, where: str) -> dict[str, Any]:
        options: dict[str, Any] = {}
        for key in ("num_workers", "num_gpus_per_worker", "wait_timeout"):
            if key in raw:
                options[key] = self.number(raw, key, where, None, integer=True, minimum=1)
        for key in ("model_name", "model_path", "worker_host", "router_policy"):
            if key in raw:
                options[key] = self.optional_text(raw, key, where)
        if "worker_extra_args" in raw:
            value = raw["worker_extra_args"]
            if not isinstance(value, str):
                raise self.fail(f"{where}.worker_extra_args", f"must be a string, got {value!r}")
            options["worker_extra_args"] = value
        return options

    def command(self, raw: dict, where: str) -> dict[str, Any]:
        if "command" not in raw:
            return {}
        value = raw["command"]
        argv = shlex.split(value) if isinstance(value, str) else value
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise self.fail(f"{where}.command", "must be a command string or a non-empty list of arguments")
        return {"command": argv}

    def requirement_list(self, data: dict, key: str, fields: tuple[str, ...]) -> list[dict]:
        value = data.get(key, [])
        if not isinstance(value, list):
            raise self.fail(key, "must be a list")
        items = []
        for i, item in enumerate(value):
            item = {"name": item} if isinstance(item, str) and key == "python_packages" else item
            item = self.mapping(item, f"{key}[{i}]", fields)
            for field_name in item:
                self.optional_text(item, field_name, f"{key}[{i}]")
            items.append(item)
        return items

    def environment(self, data: dict, model_ids: list[str]) -> Environment:
        reqs = [Requirement("hf-model", model_id, f"huggingface-cli download {model_id}") for model_id in model_ids]
        reqs += [Requirement("hf-dataset", ds, f"huggingface-cli download --repo-type dataset {ds}")
                 for ds in self.text_list(data, "hf_datasets")]
        aux_fields = ("kind", "id", "install_cmd", "used_for")
        for i, aux in enumerate(self.requirement_list(data, "auxiliary_models", aux_fields)):
            kind = aux.get("kind", "hf")
            if kind not in ("hf", "modelscope"):
                raise self.fail(f"auxiliary_models[{i}].kind", f"must be hf or modelscope, got {kind!r}")
            ident = self.text(aux, "id", f"auxiliary_models[{i}]")
            default = f"huggingface-cli download {ident}" if kind == "hf" else f"modelscope download {ident}"
            reqs.append(Requirement(f"{kind}-model" if kind == "modelscope" else "hf-model", ident,
                                    aux.get("install_cmd", default), aux.get("used_for", "")))
        for i, pkg in enumerate(self.requirement_list(data, "python_packages", ("name", "install_cmd", "used_for"))):
            name = self.text(pkg, "name", f"python_packages[{i}]")
            reqs.append(Requirement("python-package", name, pkg.get("install_cmd", f"pip install {name}"),
                                    pkg.get("used_for", "")))
        for i, link in enumerate(self.requirement_list(data, "path_links", ("target", "install_cmd", "used_for"))):
            target = self.text(link, "target", f"path_links[{i}]")
            reqs.append(Requirement("path", target, link.get("install_cmd", ""), link.get("used_for", "")))
        unique = list(dict.fromkeys(reqs))  # a model named by the config and by a row is checked once
        return Environment(self.text_list(data, "default_venv_python"), tuple(unique))

    def client(self, raw: Any, where: str) -> tuple[str, ...]:
        if isinstance(raw, list):
            tokens = raw
        elif isinstance(raw, str):
            try:
                tokens = shlex.split(raw)  # split once, here; the filled tokens never meet a shell
            except ValueError as exc:
                raise self.fail(where, f"cannot split into arguments: {exc}") from None
        else:
            raise self.fail(where, "must be a command string or a list of arguments")
        if not tokens or not all(isinstance(t, str) and t for t in tokens):
            raise self.fail(where, "must hold at least one non-empty argument")
        for token in tokens:
            try:
                names = [name for _, name, _, _ in string.Formatter().parse(token) if name is not None]
            except ValueError as exc:
                raise self.fail(where, f"argument {token!r}: {exc}") from None
            for name in names:
                if name not in CLIENT_PLACEHOLDERS:
                    known = ", ".join(f"{{{p}}}" for p in CLIENT_PLACEHOLDERS)
                    raise self.fail(where, f"unknown placeholder {{{name}}} in {token!r}; known: {known}")
        return tuple(tokens)

    def cells(self, raw: Any, where: str) -> dict[str, CellSpec]:
        raw = self.mapping(raw, where)
        if not raw:
            raise self.fail(where, "must name at least one column")
        cells = {}
        for column, spec in raw.items():
            at = f"{where}.{column}"
            spec = self.mapping(spec, at, ("path", "paths", "format"))
            if ("path" in spec) == ("paths" in spec):
                raise self.fail(at, "needs exactly one of path or paths")
            if "path" in spec:
                paths = {"v": self.text(spec, "path", at)}
            else:
                paths = self.mapping(spec["paths"], f"{at}.paths")
                if not paths or not all(isinstance(p, str) and p for p in paths.values()):
                    raise self.fail(f"{at}.paths", "must map aliases to non-empty dotted paths")
            fmt = self.optional_text(spec, "format", at) or "{v}"
            used = {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(fmt) if name}
            unknown = used - set(paths)
            if unknown:
                raise self.fail(f"{at}.format", f"names {', '.join(sorted(unknown))}, which paths do not define")
            cells[column] = CellSpec(dict(paths), fmt)
        return cells

    def row(self, index: int, raw: Any, ctx: dict) -> EvalRow:
        where = f"rows[{index}]"
        named = raw.get("id") if isinstance(raw, dict) else None
        raw = self.mapping(raw, f"row {named!r}" if isinstance(named, str) else where, ROW_FIELDS)
        row_id = self.text(raw, "id", where)
        if not _ROW_ID.match(row_id):
            raise self.fail(f"{where}.id", f"{row_id!r}: use letters, digits and . _ - = + only")
        where = f"row {row_id!r}"
        file = ctx["root"] / self.text(raw, "file", where)
        if not file.is_file():
            raise self.fail(f"{where}.file", f"no such file {file}")
        hf_model_id = self.optional_text(raw, "hf_model_id", where) or ctx["hf_model_id"]
        profile = self.row_profile(raw, where, hf_model_id, ctx)
        locate = self.mapping(raw.get("locate"), f"{where}.locate", LOCATE_FIELDS) if "locate" in raw else None
        if locate is None:
            raise self.fail(f"{where}.locate", "is required")
        locator = Locate(*(self.text(locate, key, f"{where}.locate") for key in LOCATE_FIELDS))
        new_row = None
        if "new_row" in raw:
            new_row = self.env(raw["new_row"], f"{where}.new_row")
        client = self.client(raw.get("client"), f"{where}.client")
        max_samples = self.number(raw, "max_samples", where, None, integer=True, minimum=1)
        if max_samples is None and any("{max_samples}" in t for t in client):
            raise self.fail(f"{where}.max_samples", "is required when the client names {max_samples}")
        result_json = self.text(raw, "result_json", where)
        if Path(result_json).is_absolute() or ".." in Path(result_json).parts:
            raise self.fail(f"{where}.result_json", "must be a file name inside {output_dir}")
        extra = self.env(raw.get("server_extra_by_hardware", {}), f"{where}.server_extra_by_hardware")
        health = self.optional_text(raw, "server_health", where)
        if health is not None and not health.startswith(("http://", "https://", "/")):
            raise self.fail(f"{where}.server_health", f"must be a URL (with {{port}}) or a path, got {health!r}")
        return EvalRow(
            id=row_id,
            file=file,
            hf_model_id=hf_model_id,
            server_profile=profile,
            locate=locator,
            client=client,
            result_json=result_json,
            cells=self.cells(raw.get("cells"), f"{where}.cells"),
            new_row=new_row,
            max_samples=max_samples,
            timeout_s=self.number(raw, "timeout_s", where, 1800.0, integer=False, minimum=1),
            server_extra_by_hardware=extra,
            server_health=health,
        )

    def row_profile(self, raw: dict, where: str, hf_model_id: str, ctx: dict) -> ServerProfile:
        """The row's server: its profile (named, by model id, or the default), else its own
        `server` template; the row's server_gpus and server_boot_timeout_s fill what the profile
        leaves out."""
        named = None if raw.get("server_profile") is None else self.optional_text(raw, "server_profile", where)
        name = named or ctx["by_model"].get(hf_model_id) or ctx["default_profile"]
        row_gpus = self.number(raw, "server_gpus", where, None, integer=True, minimum=0)
        row_boot = self.number(raw, "server_boot_timeout_s", where, None, integer=False, minimum=1)
        if name is None:
            template = self.optional_text(raw, "server", where)
            if template is None:
                raise self.fail(f"{where}.server_profile", "is required (no default_server_profile and no server)")
            if SHELL_FRAMEWORK not in ctx["frameworks"]:
                raise self.fail(f"{where}.server", f"needs the {SHELL_FRAMEWORK!r} adapter")
            return ServerProfile(name=f"{raw['id']}.server", framework=SHELL_FRAMEWORK,
                                 server_gpus=1 if row_gpus is None else row_gpus, boot_timeout_s=row_boot,
                                 options={"shell": template})
        if name not in ctx["profiles"]:
            raise self.fail(f"{where}.server_profile", f"unknown profile {name!r}; "
                                                      f"known: {', '.join(ctx['profiles']) or 'none'}")
        profile = ctx["profiles"][name]
        if row_boot is not None and profile.boot_timeout_s is None:
            profile = replace(profile, boot_timeout_s=row_boot)
        if row_gpus is not None and "server_gpus" not in ctx["raw_profiles"][name]:
            profile = replace(profile, server_gpus=row_gpus)
        return profile

    def config(self, data: Any, root: Path, frameworks: set[str]) -> EvalConfig:
        data = self.mapping(data, "<top level>", TOP_FIELDS)
        name = self.text(data, "name", "")
        hf_model_id = self.text(data, "hf_model_id", "")
        raw_profiles = self.mapping(data.get("server_profiles", {}), "server_profiles")
        profiles = {n: self.server_profile(n, p, frameworks) for n, p in raw_profiles.items()}
        by_model = self.mapping(data.get("server_profile_by_hf_model_id", {}), "server_profile_by_hf_model_id")
        for model_id, profile_name in by_model.items():
            if profile_name not in profiles:
                raise self.fail(f"server_profile_by_hf_model_id.{model_id}", f"unknown profile {profile_name!r}")
        default_profile = self.optional_text(data, "default_server_profile", "")
        if default_profile is not None and default_profile not in profiles:
            raise self.fail("default_server_profile", f"unknown profile {default_profile!r}")
        rows_raw = data.get("rows")
        if not isinstance(rows_raw, list) or not rows_raw:
            raise self.fail("rows", "must be a non-empty list")
        ctx = {"root": root, "hf_model_id": hf_model_id, "profiles": profiles, "by_model": by_model,
               "default_profile": default_profile, "frameworks": frameworks, "raw_profiles": raw_profiles}
        aliases = self.model_aliases(data)
        rows = tuple(replace(row, model_aliases=aliases_of(aliases, row.model_hint, row.hf_model_id))
                     for row in (self.row(i, raw, ctx) for i, raw in enumerate(rows_raw)))
        seen: set[str] = set()
        for row in rows:
            if row.id in seen:
                raise self.fail(f"row {row.id!r}.id", "appears twice; ids select rows and must be unique")
            seen.add(row.id)
        auto_env = self.env(data.get("auto_env", {}), "auto_env")
        home = self.optional_text(data, "omni_ci_home", "")
        if home is not None:  # as sglang-omni's runner: caches under one home, unless set explicitly
            auto_env = {"OMNI_CI_HOME": home, "XDG_CACHE_HOME": f"{home}/.cache",
                        "TORCHINDUCTOR_CACHE_DIR": f"{home}/.torchinductor", **auto_env}
        model_ids = list(dict.fromkeys([hf_model_id, *(row.hf_model_id for row in rows)]))
        return EvalConfig(name, self.source, hf_model_id, auto_env, rows,
                          self.optional_text(data, "description", "") or "", root,
                          self.environment(data, model_ids), self.tables_root(data, root))

    def model_aliases(self, data: dict) -> dict[str, tuple[str, ...]]:
        """`model_aliases: {model: [Name, ...]}` (a single name may stand alone)."""
        given = self.mapping(data.get("model_aliases", {}), "model_aliases")
        return {model: self.text_list(given, model, "model_aliases.") for model in given}

    def tables_root(self, data: dict, root: Path) -> Path:
        """The only folder whose tables rows may edit: `tables_root` (relative to the eval root, or
        absolute) must be an existing folder; by default the eval root's benchmarks/eval, which a
        row outside of is refused by (EvalConfig.refused), not the whole config."""
        given = self.optional_text(data, "tables_root", "")
        if given is None:
            return root / DEFAULT_TABLES_ROOT
        folder = root / Path(given).expanduser()
        if not folder.is_dir():
            raise self.fail("tables_root", f"{given!r} is not a folder (looked for {folder})")
        return folder


def aliases_of(declared: dict[str, tuple[str, ...]], *names: str) -> tuple[str, ...]:
    """The aliases declared for any of a row's names (compared normalised, as table cells are)."""
    wanted = {normalise_model(n) for n in names}
    return tuple(dict.fromkeys(a for model, found in declared.items() if normalise_model(model) in wanted
                               for a in found))


def eval_root(source: Path, explicit: Path | None = None) -> Path:
    """Where a config's row files live: `--eval-root`, else the git top level of the folder that
    holds the config (a user's project keeps its config and its benchmark files in one repository),
    else cellbench's own checkout for the configs it ships."""
    if explicit is not None:
        return explicit.resolve()
    top = toplevel(source.resolve().parent)
    if top is not None:
        return top
    if source.resolve().is_relative_to(PROJECT_ROOT.resolve()):
        return PROJECT_ROOT
    raise EvalConfigError(f"eval config {source}: not inside a git repository, so row files have no root; "
                          "pass --eval-root <the folder its `file` paths are relative to>")


def load_eval_config(source: Path, root: Path | None, frameworks: set[str]) -> EvalConfig:
    """Parse and check `source`; row files are resolved against `root` (None: `eval_root`'s default)."""
    if not source.is_file():
        raise EvalConfigError(f"eval config {source}: no such file")
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise EvalConfigError(f"eval config {source}: not valid YAML: {' '.join(str(exc).split())}") from None
    return _Checker(source).config(data, eval_root(source, root), frameworks)
