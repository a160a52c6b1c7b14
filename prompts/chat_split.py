"""The chat split: single-turn prompts in four input-length buckets, SiliconBench's mix.

Short prompts are questions from corpus.py; the others fill an instruction template with a
document composed to a token target: a newsletter, meeting minutes, an incident review, a travel
journal, product reviews, a quarterly report, Python code, an email or one paragraph. Each kind's
generator yields the units of one document (a heading, a paragraph, an agenda item...); `compose`
takes units until the document reaches its target.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import corpus
from provenance import LICENSE, provenance
from token_estimate import estimate_request, in_bucket

# Chat buckets: (name, lowest, highest input tokens, prompts with max_tokens 64, with 256).
# SiliconBench's mix; targets are drawn inside the bounds with a margin so that a tokenizer a
# little different from the estimate still lands every prompt in its bucket.
CHAT_BUCKETS = (("short", 10, 80, 10, 10), ("medium", 80, 500, 10, 10),
                ("long", 500, 2000, 15, 15), ("vlong", 2000, 4000, 15, 15))
CHAT_TARGETS = {"medium": (110, 430), "long": (620, 1720), "vlong": (2250, 3550)}


def digest_units(rng: random.Random) -> Iterator[str]:
    yield f"Community Digest, issue {rng.randint(12, 180)} ({rng.choice(corpus.TOWNS)} edition)"
    while True:
        for title, paras in rng.sample(corpus.TOPICS, len(corpus.TOPICS)):
            yield f"## {title}\n\n{paras[0]}"
            yield from paras[1:]


def minutes_units(rng: random.Random) -> Iterator[str]:
    people = [f"{rng.choice(corpus.FIRST_NAMES)} {rng.choice(corpus.LAST_NAMES)}" for _ in range(6)]
    yield (f"Minutes: {rng.choice(corpus.MEETING_KINDS)}, {rng.choice(corpus.TOWNS)}, "
           f"{rng.randint(1, 28)} {rng.choice(('March', 'June', 'September', 'November'))}\n"
           f"Present: {', '.join(people)}. Chair: {people[0]}.")
    n = 0
    while True:
        for item in rng.sample(corpus.AGENDA_ITEMS, len(corpus.AGENDA_ITEMS)):
            n += 1
            a, c = rng.sample(people, 2)
            fmt = {"a": a, "b": c, "n": rng.randint(3, 9), "m": rng.randint(0, 2),
                   "d": f"{rng.randint(1, 28)} {rng.choice(('April', 'July', 'October', 'December'))}"}
            lines = [f"{n}. {item[0].upper()}{item[1:]}"]
            lines += [d.format(**fmt) for d in rng.sample(corpus.DISCUSSION, rng.randint(2, 4))]
            lines.append(rng.choice(corpus.DECISIONS).format(**fmt))
            lines.append(rng.choice(corpus.ACTIONS).format(**fmt))
            yield "\n".join(lines)


def incident_units(rng: random.Random) -> Iterator[str]:
    yield f"Weekly incident review, platform group, week {rng.randint(1, 52)}"
    while True:
        svc = rng.choice(corpus.SERVICES)
        a, c = rng.choice(corpus.FIRST_NAMES), rng.choice(corpus.FIRST_NAMES)
        minute = rng.randint(0, 300)
        lines = [f"Incident: {svc} degradation (severity {rng.randint(2, 4)})", "Timeline (UTC):"]
        for event in rng.sample(corpus.TIMELINE_EVENTS, rng.randint(4, 7)):
            minute += rng.randint(2, 19)
            lines.append(f"- {minute // 60 + 8:02d}:{minute % 60:02d} "
                         + event.format(s=svc, a=a, b=c, p=rng.randint(2, 40)))
        lines.append("Analysis: " + " ".join(rng.sample(corpus.INCIDENT_ANALYSIS, 2)))
        yield "\n".join(lines)


def diary_units(rng: random.Random) -> Iterator[str]:
    yield f"Travel journal, {rng.choice(('spring', 'late summer', 'autumn'))} walking trip"
    day = 0
    while True:
        day += 1
        town = rng.choice(corpus.TOWNS)
        yield f"Day {day}, {town}\n" + " ".join(
            x.format(t=town) for x in rng.sample(corpus.DIARY_SENTENCES, rng.randint(4, 6)))


def reviews_units(rng: random.Random) -> Iterator[str]:
    product, kind = rng.choice(corpus.PRODUCTS)
    yield f"Customer reviews for the {product}"
    while True:
        points = " ".join(x.format(k=kind) for x in rng.sample(corpus.REVIEW_POINTS, rng.randint(2, 4)))
        opener = rng.choice(corpus.REVIEW_OPENERS).format(p=product, k=kind)
        yield (f"{rng.choice(corpus.FIRST_NAMES)} {rng.choice(corpus.LAST_NAMES)[0]}., rating "
               f"{rng.randint(1, 5)}/5\n{opener} {points}")


def report_units(rng: random.Random) -> Iterator[str]:
    yield (f"{rng.choice(corpus.COMPANIES)}: quarterly operating report, Q{rng.randint(1, 4)} 2026\n"
           "Prepared for the management board. Figures are unaudited.")
    places = list(corpus.REGIONS) + [f"{t} branch" for t in corpus.TOWNS]
    for place in places:
        fmt = {"r": place, "t": rng.choice(corpus.TOWNS), "x": rng.randint(120, 4800), "n": rng.randint(2, 60),
               "p": rng.randint(61, 94), "d": rng.choice(("up 4%", "down 7%", "up 12%", "flat", "down 2%"))}
        yield f"{place}\n" + " ".join(x.format(**fmt) for x in rng.sample(corpus.REPORT_SENTENCES, rng.randint(4, 6)))


def code_units(rng: random.Random) -> Iterator[str]:
    yield from rng.sample(corpus.CODE_SNIPPETS, len(corpus.CODE_SNIPPETS))


def email_units(rng: random.Random) -> Iterator[str]:
    yield f"Hi {rng.choice(corpus.FIRST_NAMES)},"
    yield from rng.sample(corpus.EMAIL_SENTENCES, len(corpus.EMAIL_SENTENCES))
    yield f"{rng.choice(corpus.FIRST_NAMES)}"


def paragraph_units(rng: random.Random) -> Iterator[str]:
    title, paras = rng.choice(corpus.TOPICS)
    yield rng.choice(paras)


# kind -> (unit generator, separator, instruction templates with {doc}, buckets it serves)
DocKind = tuple[Callable[[random.Random], Iterator[str]], str, tuple[str, ...], tuple[str, ...]]
DOC_KINDS: dict[str, DocKind] = {
    "digest": (digest_units, "\n\n", (
        "Please read the following article and provide a detailed summary:\n\n{doc}",
        "Summarise the newsletter below in five bullet points, then say which section a gardener "
        "would enjoy most.\n\n{doc}",
        "{doc}\n\nWhat are the three most surprising facts in the text above? Quote the sentence "
        "that supports each one.",
        "I don't have time to read all of this. Give me the gist of each section in one line.\n\n{doc}",
    ), ("medium", "long", "vlong")),
    "minutes": (minutes_units, "\n\n", (
        "Below are the minutes of a meeting. List every decision and every action item with its "
        "owner and due date.\n\n{doc}",
        "{doc}\n\nWrite a short email to members who missed this meeting, covering what was decided.",
    ), ("medium", "long", "vlong")),
    "incident": (incident_units, "\n\n", (
        "Here is this week's incident review. Write a two-paragraph summary for leadership and point "
        "out any pattern across the incidents.\n\n{doc}",
        "{doc}\n\nWhich of these incidents should get a follow-up action first, and why?",
    ), ("medium", "long", "vlong")),
    "diary": (diary_units, "\n\n", (
        "Read these travel journal entries and turn them into a day-by-day itinerary table "
        "(day, place, highlight).\n\n{doc}",
        "{doc}\n\nBased on the journal above, what would you tell a friend planning the same trip?",
    ), ("medium", "long", "vlong")),
    "reviews": (reviews_units, "\n\n", (
        "These are customer reviews of one product. Summarise the common praise and complaints, and "
        "estimate the average rating.\n\n{doc}",
        "{doc}\n\nShould the shop keep selling this product? Argue both sides briefly.",
    ), ("medium", "long", "vlong")),
    "report": (report_units, "\n\n", (
        "The following is an internal quarterly report. Which region performed best, which worst, "
        "and why? Answer in one paragraph each.\n\n{doc}",
        "{doc}\n\nDraft three questions the board should ask about this report.",
    ), ("medium", "long", "vlong")),
    "code": (code_units, "\n\n", (
        "Review the following Python code. Point out bugs, unclear names and missing tests.\n\n"
        "```python\n{doc}\n```",
        "```python\n{doc}\n```\n\nExplain what this code does, one function at a time.",
    ), ("medium",)),
    "email": (email_units, " ", (
        "Rewrite this email so it is polite, clear and short:\n\n{doc}",
        "{doc}\n\nHow would the recipient likely feel reading the message above? Suggest a kinder version.",
    ), ("medium",)),
    "paragraph": (paragraph_units, "\n\n", tuple(
        "{doc}\n\n" + q for q in corpus.PARAGRAPH_QUESTIONS), ("medium",)),
}


def compose(kind: str, rng: random.Random, target: int, cap: int) -> tuple[str, str]:
    """Fill one instruction template with units of `kind` until the request estimate reaches
    `target` tokens; never exceed `cap`. Returns (text, template id)."""
    make_units, sep, templates, _ = DOC_KINDS[kind]
    t = rng.randrange(len(templates))
    template = templates[t]
    units: list[str] = []
    text = template.format(doc="")
    misses = 0
    for unit in make_units(rng):
        candidate = template.format(doc=sep.join(units + [unit]).rstrip("\n"))
        if units and estimate_request([{"content": candidate}]) > cap:
            misses += 1  # this unit overshoots; a later, shorter one may still fit
            if misses > 40:
                break
            continue
        misses = 0
        units.append(unit)
        text = candidate
        if estimate_request([{"content": text}]) >= target:
            break
    return text, f"chat/{kind}/{t}"


def spread(rng: random.Random, lo: int, hi: int, n: int) -> list[int]:
    """n targets spread evenly over [lo, hi] (one per stratum), in random order."""
    out = [int(lo + (hi - lo) * (k + rng.random()) / n) for k in range(n)]
    rng.shuffle(out)
    return out


def chat_prompt(name: str, bucket: str, max_tokens: int, text: str, template: str) -> dict:
    est = estimate_request([{"content": text}])
    return {"name": name, "description": f"Input ~{est} tokens, output max {max_tokens}",
            "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "meta": {"bucket": bucket, "provenance": provenance(template, "text: prompts/corpus.py"),
                     "license": LICENSE}}


def build_chat(seed: int) -> tuple[list[dict], list[dict]]:
    """The chat split's measured prompts and its warm-up prompts."""
    rng = random.Random(f"{seed}:chat")
    prompts: list[dict] = []
    index = 0
    for bucket, lo, hi, n64, n256 in CHAT_BUCKETS:
        if bucket == "short":
            # Brief questions get the small budget, open-ended ones the large one.
            texts = [(64, q, "chat/short-factual") for q in rng.sample(corpus.SHORT_FACTUAL, n64)]
            texts += [(256, q, "chat/short-open") for q in rng.sample(corpus.SHORT_OPEN, n256)]
            for max_tokens, text, template in texts:
                name = f"p{index:03d}_{bucket}_out{max_tokens}"
                prompts.append(chat_prompt(name, bucket, max_tokens, text, template))
                index += 1
            continue
        kinds = [k for k, v in DOC_KINDS.items() if bucket in v[3]]
        targets = spread(rng, *CHAT_TARGETS[bucket], n64 + n256)
        for j, target in enumerate(targets):
            max_tokens = 64 if j < n64 else 256
            kind = kinds[(j + rng.randrange(len(kinds))) % len(kinds)]
            text, template = compose(kind, rng, target, cap=hi - (hi - lo) // 7)
            prompts.append(chat_prompt(f"p{index:03d}_{bucket}_out{max_tokens}", bucket, max_tokens, text, template))
            index += 1
    for p in prompts:
        lo, hi = next((lo, hi) for b, lo, hi, *_ in CHAT_BUCKETS if b == p["meta"]["bucket"])
        in_bucket(p["name"], estimate_request(p["messages"]), lo, hi)
    rng.shuffle(prompts)
    warmup = [
        chat_prompt("w00_short_out64", "short", 64, corpus.WARMUP_CHAT[0], "chat/warmup"),
        chat_prompt("w01_medium_out256", "medium", 256,
                    corpus.WARMUP_CHAT[1] + rng.choice(rng.choice(corpus.TOPICS)[1]), "chat/warmup"),
    ]
    text, _ = compose("report", rng, 1400, cap=1800)
    warmup.append(chat_prompt("w02_long_out256", "long", 256,
                              "Warm-up document for the server to digest before measurement begins.\n\n" + text,
                              "chat/warmup"))
    return prompts, warmup
