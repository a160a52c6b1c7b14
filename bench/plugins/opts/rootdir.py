"""pytest's rootdir and ini file, decided again once cellbench's options are known.

pytest decides the rootdir and ini file from the command line's test paths before any installed
plugin has added its options (pytest issue #8846): in `pytest -m chat --results-dir /tmp/x` it
takes `/tmp/x` for a test path, settles on it as the rootdir with no ini file, and pytest.ini's
testpaths, markers, addopts and timeout method are lost (`--results-dir=/tmp/x`, one token, is
unaffected). `pytest_load_initial_conftests` (bench/plugins/options.py), the first hook after the
command line is parsed again with the installed plugins' options and before conftests are loaded
or test paths decided, makes that decision again (`redecide_rootdir`) and applies it as pytest
itself would have: the ini's values and its `addopts` (with any `-p` in them) and the conftest
cut-off directory. An explicit `-c`/`--rootdir` is left alone.
"""

from __future__ import annotations

import copy

import pytest
from _pytest.config.findpaths import determine_setup, parse_override_ini


def redecide_rootdir(config: pytest.Config, parser: pytest.Parser, args: list[str]) -> bool:
    """Re-decide the rootdir and ini file from the test paths in `args` (which it may extend with
    the ini's addopts); True when the decision changed."""
    known = config.known_args_namespace
    if known.inifilename or known.rootdir:
        return False
    rootpath, inipath, inicfg, ignored = determine_setup(
        inifile=None,
        override_ini=known.override_ini,
        args=known.file_or_dir,
        rootdir_cmd_arg=None,
        invocation_dir=config.invocation_params.dir,
    )
    if (rootpath, inipath) == (config.rootpath, config.inipath):
        return False
    # pytest keeps the decision in these attributes; there is no public way to set it (pytest < 9.2).
    config._rootpath, config._inipath, config._inicfg = rootpath, inipath, inicfg
    config._ignored_config_files = ignored
    config._inicache.clear()
    parser.extra_info.update(rootdir=str(rootpath), inifile=str(inipath))
    addopts = config.getini("addopts")
    args[:] = [*addopts, *args]
    config.pluginmanager.consider_preparse(addopts, exclude_only=False)
    config.known_args_namespace = parser.parse_known_args(args, namespace=copy.copy(config.option))
    config._inicfg.update(parse_override_ini(config.known_args_namespace.override_ini))  # -o in addopts
    config._inicache.clear()
    if config.known_args_namespace.confcutdir is None:
        config.known_args_namespace.confcutdir = str(inipath.parent if inipath else rootpath)
    return True
