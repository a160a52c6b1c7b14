"""Verdict rules, top to bottom, from recorded evidence (docs/verdicts.md)."""

from dataclasses import replace

import pytest

from bench.core import metrics
from bench.core.level_run import ClientHealth, LevelConfig, LevelRun
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.core.result.model import Level
from bench.core.verdicts import Evidence, Identity, Verdict, classify, wilson_interval
from bench.host.cpus.usage import CpuUse


def level(concurrency=1, ok=100, failed=0, dominant=None, client_bound=False, tps=100.0, per_chunk=False):
    return {
        "concurrency": concurrency,
        "successful": ok,
        "failed": failed,
        "dominant_error": dominant,
        "client": {"client_bound": client_bound},
        "output_throughput_tps": tps,
        "itl_per_chunk": per_chunk,
    }


GOOD_ID = Identity("tiny", ("tiny",), ("tiny",))
CFG = LevelConfig(base_url="http://127.0.0.1:1", model="m", concurrency=1, requests=1)


def test_ok_names_levels_and_throughput():
    v = classify(Evidence(levels=(level(1, tps=120.5), level(8, tps=900.0)), identity=GOOD_ID))
    assert v.verdict is Verdict.OK
    assert "200/200 requests ok" in v.reason and "c=8: 900.0 tok/s" in v.reason


def test_skipped_wins_over_everything():
    assert classify(Evidence(skipped="not installed", start_failure="x")).verdict is Verdict.SKIPPED


def test_start_failure_is_failed_even_after_measured_levels():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, start_failure="port 8001 is already held by pid 7"))
    assert v.verdict is Verdict.FAILED and "port 8001" in v.reason


def test_oom_before_wrong_model():
    ev = Evidence(levels=(level(),), identity=Identity("tiny", ("other",), ()), oom="killed by the OOM killer")
    assert classify(ev).verdict is Verdict.OOM


@pytest.mark.parametrize(
    "identity, why",
    [
        (Identity("tiny", ("other",), ("other",)), "/v1/models lists other"),
        (Identity("tiny", ("tiny",), ("tiny", "stray")), "responses name stray"),
        (Identity("tiny", (), ()), "lists nothing"),
    ],
)
def test_wrong_model_from_listing_or_responses(identity, why):
    v = classify(Evidence(levels=(level(),), identity=identity))
    assert v.verdict is Verdict.WRONG_MODEL and why in v.reason


def test_unlisted_models_are_not_evidence_of_a_wrong_model():
    v = classify(Evidence(levels=(level(),), identity=Identity("tiny", None, ("tiny",))))
    assert v.verdict is Verdict.OK


def test_every_request_404_is_wrong_model_not_all_failed():
    dom = {"type": "http_4xx", "http_status": 404, "count": 100}
    v = classify(Evidence(levels=(level(ok=0, failed=100, dominant=dom),), identity=Identity("tiny", None, ())))
    assert v.verdict is Verdict.WRONG_MODEL and "404" in v.reason


def test_all_failed_records_dominant_error():
    dom = {"type": "http_5xx", "http_status": 500, "count": 100}
    v = classify(Evidence(levels=(level(ok=0, failed=100, dominant=dom),) * 3, identity=GOOD_ID))
    assert v.verdict is Verdict.ALL_FAILED
    assert v.reason == "300/300 requests failed, mostly http_5xx 500 (300x)"


def test_degraded_threshold_is_inclusive_and_configurable():
    ev = Evidence(levels=(level(ok=80, failed=20),), identity=GOOD_ID)
    assert classify(ev).verdict is Verdict.DEGRADED
    assert classify(ev, degraded_threshold=0.25).verdict is Verdict.OK
    assert classify(Evidence(levels=(level(ok=81, failed=19),), identity=GOOD_ID)).verdict is Verdict.OK


def test_client_bound_level_degrades_the_cell():
    v = classify(Evidence(levels=(level(1), level(16, client_bound=True)), identity=GOOD_ID))
    assert v.verdict is Verdict.DEGRADED and v.reason.startswith("client-bound at c=16: ")


def late(concurrency: int, limited_by: str, cpu: float, loop_lag: float, **client) -> dict:
    """A level whose client ran late, with the evidence bench.core.metrics.client_health records."""
    lv = level(concurrency)
    lv["client"] = {"client_bound": limited_by == "client", "limited_by": limited_by, "cpu_share": cpu,
                    "loop_lag_p99_ms": loop_lag, "schedule_lag_p99_ms": loop_lag / 2, "pinned": False,
                    "cpus": [0, 1], "cpus_busy": 0.99, "host_cpus": 2, "host_cpu_busy": 1.98,
                    "run_queue_wait_share": None, **client}
    return lv


def test_a_client_saturated_by_its_own_work_is_client_bound():
    v = classify(Evidence(levels=(level(1), late(8, "client", cpu=0.93, loop_lag=60.0)), identity=GOOD_ID))
    assert v.verdict is Verdict.DEGRADED
    assert v.reason == "client-bound at c=8: client CPU 0.93 of a core: numbers measure the client"


def test_a_client_the_busy_host_did_not_let_run_is_starved_with_the_cure():
    """The vLLM CPU case: the server's threads filled both cores; the client used 7% of one."""
    levels = (level(1), late(8, "host", cpu=0.07, loop_lag=775.0), late(16, "host", cpu=0.08, loop_lag=410.0))
    v = classify(Evidence(levels=levels, identity=GOOD_ID))
    assert v.verdict is Verdict.DEGRADED  # the numbers cannot be trusted either way
    assert v.reason == ("client starved at c=8, 16: host CPU 198% busy, client CPU 0.07 of a core, schedule lag "
                        "p99 388 ms, loop lag p99 775 ms: TTFT includes the client's wait; "
                        "keep the client on its own core with --client-cpus")
    assert "client-bound" not in v.reason


def test_a_pinned_client_starved_on_its_own_cpu_is_told_to_find_a_free_one():
    starved = late(8, "host", cpu=0.07, loop_lag=300.0, pinned=True, cpus=[1], cpus_busy=1.0,
                   run_queue_wait_share=0.42)
    v = classify(Evidence(levels=(starved,), identity=GOOD_ID))
    assert v.reason == ("client starved at c=8: client's CPU 1 100% busy, client CPU 0.07 of a core, schedule lag "
                        "p99 150 ms, loop lag p99 300 ms, waiting for a CPU 42% of the time: TTFT includes the "
                        "client's wait; give the client a CPU nothing else uses (--client-cpus, --server-cpus)")


def test_each_cause_of_a_late_client_is_named_from_what_the_level_measured():
    """From ClientHealth values through bench.core.metrics to the reason: one part per cause, the
    client's own work first."""
    def measured(concurrency: int, health: ClientHealth) -> Level:
        records = [RequestRecord(index=0, prompt_name="p", t_sched=0.0, t_send=0.0, t_first_token=0.1, t_end=0.2,
                                 chunk_times=[0.1, 0.2], finish_reason="stop", http_status=200, done_marker=True)]
        run = LevelRun(replace(CFG, concurrency=concurrency), records, [], 0.0, 0.2, 0.0, False, None, health)
        return metrics.summarize_level(run)

    def host(busy: float) -> CpuUse:
        return CpuUse(0.0, 2, 2 * busy, (0, 1), busy, 0.01, 3, None)

    levels = (measured(1, ClientHealth(0.05, 120.0, 90.0, host=host(0.3))),
              measured(8, ClientHealth(0.95, 70.0, 60.0, host=host(0.99))),
              measured(16, ClientHealth(0.10, 500.0, 300.0, host=host(0.99))))
    v = classify(Evidence(levels=levels, identity=Identity("m", ("m",), ())))
    assert v.verdict is Verdict.DEGRADED
    saturated = "client-bound at c=8: client CPU 0.95 of a core: numbers measure the client"
    starved = ("client starved at c=16: host CPU 198% busy, client CPU 0.10 of a core, schedule lag p99 300 ms, "
               "loop lag p99 500 ms: ")
    late_ = ("client late at c=1: schedule lag p99 90 ms, loop lag p99 120 ms, client CPU 0.05 of a core, "
             "host CPU 60% busy: ")
    assert v.reason.index(saturated) < v.reason.index(starved) < v.reason.index(late_)


def reused(lv: dict, may_hit: bool) -> dict:
    return {**lv, "prompt_reuse": {"requests": 100, "unique_prompts": 100, "repeats": 0, "unique_prefixes": False,
                                   "server_warmed": may_hit, "warmed_by": "an earlier level" if may_hit else None,
                                   "may_hit_cache": may_hit}}


def test_prompt_reuse_is_an_annotation_never_a_verdict():
    fresh = classify(Evidence(levels=(reused(level(1), False), reused(level(8), False)), identity=GOOD_ID))
    warmed = classify(Evidence(levels=(reused(level(1), False), reused(level(8), True)), identity=GOOD_ID))
    assert "prompt-reuse" not in fresh.annotations
    assert "prompt-reuse" in warmed.annotations
    assert (warmed.verdict, warmed.reason) == (fresh.verdict, fresh.reason) and warmed.verdict is Verdict.OK
    degraded = classify(Evidence(levels=(reused(level(8, ok=50, failed=50), True),), identity=GOOD_ID))
    assert degraded.verdict is Verdict.DEGRADED and "prompt-reuse" in degraded.annotations


def test_capped_wins_over_the_cancellations_it_caused():
    stalled = level(ok=0, failed=8, dominant={"type": "cancelled", "http_status": None, "count": 8})
    v = classify(Evidence(levels=(stalled,), identity=GOOD_ID, capped="no progress for 30 min at c=8"))
    assert v.verdict is Verdict.CAPPED and v.reason == "no progress for 30 min at c=8"


def test_capped_keeps_its_reason():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, capped="budget 60 s ran out during c=8"))
    assert v.verdict is Verdict.CAPPED


def test_nothing_measured_is_a_failure():
    assert classify(Evidence(levels=(level(ok=0, failed=0),), identity=GOOD_ID)).verdict is Verdict.FAILED


def test_chunk_bundling_annotation_rides_along():
    v = classify(Evidence(levels=(level(per_chunk=True),), identity=GOOD_ID))
    assert v.verdict is Verdict.OK and v.annotations == ("chunk-bundling",)


# --- OOM: evidence from bench.host.memory.oom (ExitInfo.oom / ServerStartError.oom) ---------------------------

KERNEL_LINE = ("Memory cgroup out of memory: Killed process 18244 (llama-server) total-vm:540856kB, "
               "anon-rss:65152kB, file-rss:6752kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0")
OOM_EVIDENCE = {"source": "cgroup oom_kill", "pid": 18244, "process": "llama-server", "line": KERNEL_LINE,
                "lines": [KERNEL_LINE], "cgroup": {"limit_bytes": 8 << 30, "oom_kill": 1}}


def test_oom_reason_quotes_the_kernel_line():
    v = classify(Evidence(levels=(level(),), identity=GOOD_ID, oom=OOM_EVIDENCE))
    assert v.verdict is Verdict.OOM
    assert v.reason == f"killed for memory (cgroup oom_kill, limit 8 GiB): {KERNEL_LINE}"


@pytest.mark.parametrize(
    "others",
    [
        {"levels": (level(ok=0, failed=100, dominant={"type": "connect", "http_status": None, "count": 100}),)},
        {"levels": (level(ok=70, failed=30),)},
        {"levels": (level(),), "capped": "budget ran out"},
        {"levels": (level(ok=0, failed=100, dominant={"type": "http_4xx", "http_status": 404, "count": 100}),)},
        {"start_failure": "server was killed for memory while starting"},
    ],
    ids=["all-failed", "degraded", "capped", "404s", "start-failure"],
)
def test_oom_takes_precedence(others):
    ev = Evidence(identity=GOOD_ID, oom=OOM_EVIDENCE, **others)
    assert classify(ev).verdict is Verdict.OOM


def test_skipped_still_wins_over_oom():
    assert classify(Evidence(skipped="not installed", oom=OOM_EVIDENCE)).verdict is Verdict.SKIPPED


def test_oom_is_never_retried():
    v = classify(Evidence(oom=OOM_EVIDENCE))
    assert v.retryable is False and v.to_json()["retryable"] is False
    ok = classify(Evidence(levels=(level(),), identity=GOOD_ID))
    assert "retryable" not in ok.to_json(), "other verdicts keep the schema's shape"


def test_oom_evidence_without_a_kernel_line():
    ev = {"source": "vmstat oom_kill", "pid": 7, "process": "vllm", "note": "SIGKILL sent by no one here"}
    v = classify(Evidence(oom=ev))
    assert v.verdict is Verdict.OOM
    assert v.reason == "pid 7 (vllm) killed for memory (vmstat oom_kill): SIGKILL sent by no one here"


def test_a_server_that_exited_is_failed_whatever_it_answered_before():
    exited = "server exited with code 3 during c=8 after 40 of 100 requests"
    v = classify(Evidence(levels=(level(1), level(8, ok=40)), identity=GOOD_ID, server_exit=exited))
    assert v.verdict is Verdict.FAILED and v.reason == exited


def test_a_server_killed_for_memory_is_oom_not_an_exit():
    ev = Evidence(levels=(level(),), identity=GOOD_ID, server_exit="server exited with signal SIGKILL during c=1",
                  oom="Memory cgroup out of memory: Killed process 7 (llama-server)")
    assert classify(ev).verdict is Verdict.OOM


@pytest.mark.parametrize(("failed", "n", "low", "high"), [
    (12, 40, 18.1, 45.4),   # the example: 30% of 40
    (0, 40, 0.0, 8.8),
    (0, 16, 0.0, 19.4),     # the smallest clean sample whose interval stays below 20%
    (30, 100, 21.9, 39.6),
])
def test_wilson_interval_matches_the_formula(failed, n, low, high):
    lo, hi = wilson_interval(failed, n)
    assert (round(100 * lo, 1), round(100 * hi, 1)) == (low, high)


def test_degraded_reason_carries_the_interval_and_uncertain_when_it_straddles():
    v = classify(Evidence(levels=(level(ok=28, failed=12, dominant={"type": "http_5xx", "http_status": 500,
                                                                    "count": 12}),), identity=GOOD_ID))
    assert v.verdict is Verdict.DEGRADED and "uncertain" in v.annotations
    assert v.reason.startswith("12/40 requests failed (30.0%, 95% CI 18.1-45.4%), mostly http_5xx 500")


def test_a_large_clear_sample_is_not_uncertain_and_a_small_clean_one_is():
    assert "uncertain" not in classify(Evidence(levels=(level(ok=270, failed=30),), identity=GOOD_ID)).annotations
    small = classify(Evidence(levels=(level(ok=8),), identity=GOOD_ID))
    assert small.verdict is Verdict.OK and "uncertain" in small.annotations
    assert "8/8 requests ok (failure rate 0.0%, 95% CI 0.0-32.4%)" in small.reason


def test_an_ok_cell_with_a_level_that_produced_nothing_still_explains_itself():
    v = classify(Evidence(levels=(level(1, ok=200), level(8, ok=0, failed=10, tps=None)), identity=GOOD_ID))
    assert v.verdict is Verdict.OK and "c=8: no output" in v.reason


@pytest.mark.parametrize(("failed", "n", "below_threshold"), [(0, 16, True), (0, 15, False), (4, 40, False),
                                                               (10, 100, True), (30, 300, True)])
def test_the_readmes_sample_sizes(failed, n, below_threshold):
    """docs/running-cells.md, "Small samples say so": how many requests a decision at 20% needs."""
    assert (wilson_interval(failed, n)[1] < 0.2) is below_threshold


def failing_level(errors: list[RequestError], ok: int = 0) -> dict:
    """A level whose failed requests ended with `errors`: its samples and dominant error as
    bench.core.metrics summarizes them."""
    records = [RequestRecord(index=i, prompt_name=f"p{i}", error=e) for i, e in enumerate(errors)]
    return {**level(ok=ok, failed=len(errors), dominant=metrics.dominant_error(records)),
            "error_samples": metrics.error_samples(records)}


def test_all_429_is_rate_limited_with_the_servers_retry_after():
    error = RequestError(ErrorType.HTTP_4XX, "HTTP 429 Too Many Requests: slow down", http_status=429,
                         retry_after="2")
    v = classify(Evidence(levels=(failing_level([error] * 40),) * 2, identity=GOOD_ID))
    assert v.verdict is Verdict.ALL_FAILED
    assert v.reason == "80/80 requests failed, rate-limited: HTTP 429 x 80 (Retry-After: 2)"


def test_some_429_without_retry_after_is_degraded_and_rate_limited():
    error = RequestError(ErrorType.HTTP_4XX, "HTTP 429 Too Many Requests", http_status=429)
    v = classify(Evidence(levels=(failing_level([error] * 12, ok=28),), identity=GOOD_ID))
    assert v.verdict is Verdict.DEGRADED
    assert v.reason.endswith("), rate-limited: HTTP 429 x 12 (no Retry-After)")


def test_an_all_failed_reason_quotes_the_servers_words():
    words = "HTTP 400 Bad Request: request (263 tokens) exceeds the available context size (256 tokens)"
    error = RequestError(ErrorType.HTTP_4XX, words, http_status=400)
    v = classify(Evidence(levels=(failing_level([error] * 9),), identity=GOOD_ID))
    assert v.reason == f"9/9 requests failed, mostly http_4xx 400 (9x): {words}"


def test_a_reason_quotes_no_words_for_an_error_of_cellbenchs_own():
    error = RequestError(ErrorType.TRUNCATED, "stream ended without [DONE] or finish_reason after 9 bytes")
    v = classify(Evidence(levels=(failing_level([error] * 9),), identity=GOOD_ID))
    assert v.reason == "9/9 requests failed, mostly truncated (9x)"


def test_a_level_of_compressed_streams_annotates_the_cell():
    v = classify(Evidence(levels=({**level(), "content_encodings": {"gzip": 100}},), identity=GOOD_ID))
    assert v.verdict is Verdict.OK and "compressed" in v.annotations
    assert "compressed" not in classify(Evidence(levels=(level(),), identity=GOOD_ID)).annotations


# ------------------------------------------------------------------ verdict strings, stated once


def test_the_schemas_verdict_enum_is_the_verdict_enum():
    from bench.core.result.files import result_schema
    assert set(result_schema()["$defs"]["verdict"]["properties"]["verdict"]["enum"]) == {v.value for v in Verdict}


def test_every_verdict_has_one_look_and_the_reports_take_theirs_from_it():
    from bench.core.verdicts import VERDICT_LOOKS
    from bench.reports.review import columns
    assert set(VERDICT_LOOKS) == set(Verdict)
    assert sorted(v.rank for v in Verdict) == list(range(len(Verdict)))
    assert columns.VERDICT_RANK == ("failed", "oom", "wrong-model", "all-failed", "capped", "degraded", "fixed",
                                        "ok", "skipped")
    assert set(columns.VERDICT_COLOURS) == {v.value for v in Verdict}
    assert {v for v in Verdict if v.tone == "failure"} == {v for v in Verdict if v.is_failure}  # failures are red
    assert {v.value for v in Verdict if v.listed_as_failure} == {"failed", "all-failed", "wrong-model", "degraded",
                                                                 "capped"}  # an OOM has its own journal section
