"""Prompt reuse through a whole cell: what each level records and when the cell says `prompt-reuse`.

Real cells of the generic `openai` adapter, whose server is the suite's fault server in its
well-behaved mode, started from a profile command: the defaults (a fresh server per level, each
prompt once), a shared server, more requests than prompts, and each of those with
--unique-prompts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench.core.client_settings import ClientSettings
from bench.core.result.files import new_run_id, validate
from bench.run.cell import CellConfig, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.run.server.launch import launching
from bench.setup import profiles

pytestmark = pytest.mark.integration  # each case starts the fault server for real, as test_faults does

PROFILE = """\
name: tiny-fault
results_name: tiny-fault
builtin: tiny
formats:
  gguf: {{served_id: tiny}}
openai:
  command: [{python}, -m, tests.support.faultserver, --port, '{{port}}', --mode, ok]
"""


def cell(tmp_path: Path, requests: int, share_server: bool = False, unique_prompts: bool = False) -> dict[str, Any]:
    path = tmp_path / "tiny-fault.yaml"
    path.write_text(PROFILE.format(python=sys.executable))
    cfg = CellConfig(framework="openai", split="chat", profile=profiles.load_profile(str(path)),
                     results_root=tmp_path / "results", run_id=new_run_id(),
                     load=LoadSettings(concurrency=(1, 2), requests=requests, warmup=1),
                     server=ServerSettings(port=0, share_server=share_server),
                     client=ClientSettings(unique_prompts=unique_prompts))
    with launching() as launch:
        outcome = run_cell(cfg, launch)
    validate(outcome.result)
    return dict(outcome.result)


@pytest.mark.parametrize(
    "options, repeats, warmed_by, annotated",
    [
        ({"requests": 4}, [0, 0], [None, None], False),  # the defaults' shape: a fresh server, each prompt once
        ({"requests": 4, "share_server": True}, [0, 0], [None, "an earlier level"], True),
        ({"requests": 150}, [50, 50], [None, None], True),  # more requests than the split's 100 prompts
        ({"requests": 150, "share_server": True, "unique_prompts": True}, [50, 50], [None, "an earlier level"], False),
    ],
)
def test_each_level_records_its_reuse_and_only_a_cacheable_one_is_annotated(tmp_path, options, repeats, warmed_by,
                                                                            annotated):
    result = cell(tmp_path, **options)
    reuse = [lv["prompt_reuse"] for lv in result["levels"]]
    assert [r["repeats"] for r in reuse] == repeats
    assert [r["unique_prompts"] for r in reuse] == [min(options["requests"], 100)] * 2
    assert [r["warmed_by"] for r in reuse] == warmed_by
    assert ("prompt-reuse" in result["verdict"]["annotations"]) is annotated
    assert result["verdict"]["verdict"] in ("ok", "degraded"), result["verdict"]  # degraded: a late client
    assert result["run_config"]["unique_prompts"] is options.get("unique_prompts", False)
