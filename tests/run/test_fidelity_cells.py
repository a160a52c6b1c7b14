"""--fidelity in real cells: llama-server on the built-in tiny model answers alike twice, and a second
tiny model with other weights (another seed and ten times the spread, the same tokenizer and
template), served by the same llama-server, is told apart from the first at once and annotated
`fidelity`.

Why ten times the spread: at the built-in model's init (std 0.02, embeddings tied) every greedy
answer repeats the prompt's last token, a newline, whatever the seed (docs/metrics.md, Fidelity), so
another seed alone would answer the same. At 0.2 the layers, not the embedding, choose the token."""

from __future__ import annotations

import dataclasses
import json

import pytest

import adapters
from bench.core.lenses.fidelity import MAX_TOKENS, read_answers
from bench.core.result.files import new_run_id, validate
from bench.core.verdicts import Verdict
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.markdown import write_report
from bench.run.audits.fidelity import PROMPTS
from bench.run.cell import CellConfig, CellOutcome, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.run.server.exits import ServerStartError
from bench.setup import profiles
from bench.setup.tinymodel import build, recipe, weights
from tests.support.busy import TEST_TIMEOUT_S
from tests.support.llama_profile import llama_profile

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]



def cell(tmp_path, launch, framework: str, profile: profiles.ModelProfile) -> CellOutcome:
    cfg = CellConfig(framework=framework, split="chat", profile=profile, results_root=tmp_path / "results",
                     run_id=new_run_id(), server=ServerSettings(port=0),
                     load=LoadSettings(concurrency=(1,), requests=2, warmup=0, fidelity=True,
                                       fidelity_reference="llamacpp"))
    return run_cell(cfg, launch)


def test_a_stack_answers_as_itself_and_another_checkpoint_is_flagged(tmp_path, server_launcher, llama_server,
                                                                     monkeypatch):
    first = cell(tmp_path, server_launcher, "llamacpp", profiles.load_profile("tiny"))
    block = first.result["fidelity"]
    assert (block["prompts"], block["max_tokens"], block["unit"]) == (PROMPTS, MAX_TOKENS, "tokens")
    assert block["self"]["identical"] == PROMPTS  # greedy llama.cpp on one server: the same answers twice
    assert block["note"].startswith("no result of the reference (llamacpp)")
    assert first.result_path is not None
    answers = read_answers(first.result_path.parent / block["answers"])
    assert len(answers) == PROMPTS and all(len(a.tokens) > 0 for a in answers)
    validate(first.result)

    again = cell(tmp_path, server_launcher, "llamacpp", profiles.load_profile("tiny"))
    block = again.result["fidelity"]
    assert first.result_path is not None and block["reference"] == first.result_path.name
    assert block["vs_reference"]["identical"] == PROMPTS and block["flagged"] is False
    assert "fidelity" not in again.verdict.annotations
    # teacher forcing: the first run's answers fed back position by position, the same checkpoint
    # picks the same token at each (the tiny model's top two logits are ~0.4 apart: no near-ties)
    forced = block["forced"]
    fed = sum(min(len(a.tokens), 16) for a in answers)
    assert forced["offered"] is True and forced["reference"] == first.result_path.name
    assert forced["positions"] == fed and forced["agree"] == fed and forced["differ"] == {}

    # the same recipe with another seed and spread: other weights, the same tokenizer and chat template
    monkeypatch.setattr(weights, "SEED", recipe.SEED + 1)
    monkeypatch.setattr(weights, "INIT_STD", recipe.INIT_STD * 10)
    other = build(tmp_path / "other")
    different = cell(tmp_path, server_launcher, "openai", llama_profile(tmp_path, "tiny-other", llama_server,
                                                                        other.gguf_path))
    block = different.result["fidelity"]
    assert block["reference"] in (first.result_path.name, again.result_path.name if again.result_path else "")
    divergences = block["vs_reference"]["divergences"]
    assert all(d is not None and d <= 2 for d in divergences), divergences  # told apart at once
    assert block["flagged"] is True and "fidelity" in different.verdict.annotations
    forced = block["forced"]  # fed the reference's answers, other weights pick other tokens
    assert forced["offered"] is True and forced["positions"] == fed and forced["agree_share"] < 0.5
    assert forced["diverged"] == PROMPTS and forced["ties"] == 0
    validate(json.loads(different.result_path.read_text()) if different.result_path else {})

    # REPORT.md puts each stack's fidelity beside its speed and memory, read again from the answers
    split_dir = first.result_path.parent
    report = write_report(split_dir, read_comparison(write_comparison(split_dir))).read_text()
    between = report.split("## Between frameworks\n", 1)[1].split("\n## ", 1)[0]
    # the row's label is the framework's name, marked where its result is not of the newest run id
    rows = {line.split(" | ")[0].strip("| ").split(" (")[0]: line for line in between.splitlines()
            if line.startswith("| ")}
    assert "| Fidelity |" in rows["Framework"]
    assert f"itself: {PROMPTS}/{PROMPTS} alike to 16 tokens" in rows["llamacpp"]
    assert f"0/{PROMPTS} alike to 16 tokens vs llamacpp, median divergence 0" in rows["openai"]
    assert f"(flagged); fed llamacpp's answers, {forced['agree']}/{fed} picks alike" in rows["openai"]


def test_a_server_that_keeps_its_first_sampling_answers_on_a_server_of_its_own(tmp_path, server_launcher,
                                                                              monkeypatch):
    """llama-server declared as transformers serve is (Capabilities.sampling_per_request False): the
    levels run on their servers, then the fidelity prompts on a fresh one; a fresh one that does
    not start leaves the cell's verdict as its levels made it, and says why there is no run."""
    llamacpp = adapters.get("llamacpp")
    fixed = dataclasses.replace(llamacpp, capabilities=dataclasses.replace(llamacpp.capabilities,
                                                                          sampling_per_request=False))
    monkeypatch.setitem(adapters.registry(), "llamacpp", fixed)
    ran = cell(tmp_path, server_launcher, "llamacpp", profiles.load_profile("tiny"))
    servers = ran.result["servers"]
    assert [(s["levels"], s.get("purpose")) for s in servers] == [([1], None), ([], "fidelity")]
    assert servers[-1]["log"].endswith("_fidelity.server.log") and servers[-1]["exit"]["stopped_by_us"]
    assert ran.result["fidelity"]["self"]["identical"] == PROMPTS
    validate(ran.result)

    def refusing(command, adapter, host, port, log_path, **options):
        if "fidelity" in log_path.name:
            raise ServerStartError("refused by the test", log_path)
        return server_launcher(command, adapter, host, port, log_path, **options)

    refused = cell(tmp_path / "refused", refusing, "llamacpp", profiles.load_profile("tiny"))
    assert refused.verdict.verdict is not Verdict.FAILED and "start" not in refused.verdict.reason, refused.verdict
    assert refused.result["servers"][-1]["start_error"] == "refused by the test" and "fidelity" not in refused.result
    validate(refused.result)
