"""Agent domains for the agent split: tool schemas, user tasks and tool-result generators.

Self-written for cellbench (CC0-1.0). Each domain is a small, plausible tool API (files, calendar,
email, shell, weather, tickets, search, database, git/CI, shop support). A task is a user request
plus the tool calls an agent would make for it; result generators fabricate payloads of a
requested size, so `build_splits.py` can steer each trace to its token target. All randomness
comes from the `random.Random` passed in: the same seed gives the same bytes.

Size: ten domains' tool schemas, tasks and result generators, mostly data, one block per domain.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import corpus

# (tool name, args, rng, budget in characters, task slots) -> the tool message's content.
# The slots let a result mention the ids that later calls in the same task use.
ResultFn = Callable[[str, dict, random.Random, int, dict], str]


@dataclass(frozen=True)
class Task:
    request: str                         # user message, str.format()ed with the task's slots
    calls: tuple[tuple[tuple[str, dict], ...], ...]  # steps; each step is 1+ parallel calls
    answer: str                          # the assistant's closing message for the task


@dataclass(frozen=True)
class Domain:
    name: str
    purpose: str                         # one line for the system prompt
    tools: tuple[dict, ...]              # OpenAI `tools` entries
    tasks: tuple[Task, ...]
    slots: Callable[[random.Random], dict]
    result: ResultFn


def tool(name: str, description: str, props: dict[str, dict], required: tuple[str, ...]) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": list(required)}}}


def s(desc: str, **extra: object) -> dict:
    return {"type": "string", "description": desc, **extra}


def i(desc: str, **extra: object) -> dict:
    return {"type": "integer", "description": desc, **extra}


def b(desc: str) -> dict:
    return {"type": "boolean", "description": desc}


def arr(desc: str, item: dict) -> dict:
    return {"type": "array", "description": desc, "items": item}


def fill(value: object, slots: dict) -> object:
    """Format every string inside `value` with the task's slots."""
    if isinstance(value, str):
        # A lone "{slot}" keeps the slot's type, so integer arguments stay integers.
        if value.startswith("{") and value.endswith("}") and value[1:-1] in slots:
            return slots[value[1:-1]]
        return value.format(**slots)
    if isinstance(value, dict):
        return {k: fill(v, slots) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, slots) for v in value]
    return value


def person(rng: random.Random) -> str:
    return f"{rng.choice(corpus.FIRST_NAMES)} {rng.choice(corpus.LAST_NAMES)}"


def email_of(name: str, domain: str = "northwind.example") -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{last.replace(' ', '')}@{domain}".encode("ascii", "ignore").decode()


def hexid(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def date(rng: random.Random, month: int | None = None) -> str:
    return f"2026-{month or rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def clock(rng: random.Random) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"


def grow(make: Callable[[int], object], budget: int, wrap: Callable[[list], object],
         indent: int | None = None) -> str:
    """JSON-dump `wrap(items)`, adding items from `make(index)` until it reaches `budget` chars."""
    items: list = [make(0)]
    text = json.dumps(wrap(items), ensure_ascii=False, indent=indent)
    while len(text) < budget and len(items) < 400:
        items.append(make(len(items)))
        text = json.dumps(wrap(items), ensure_ascii=False, indent=indent)
    return text


def prose(rng: random.Random, budget: int) -> str:
    """Paragraphs from the corpus essays, in order within a topic, until `budget` chars."""
    out: list[str] = []
    title, paras = rng.choice(corpus.TOPICS)
    out.append(f"# {title}")
    k = 0
    while sum(len(p) + 2 for p in out) < budget:
        if k == len(paras):
            title, paras = rng.choice(corpus.TOPICS)
            out.append(f"## {title}")
            k = 0
        out.append(paras[k])
        k += 1
    return "\n\n".join(out)


def log_lines(rng: random.Random, budget: int, service: str) -> str:
    levels = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
    msgs = (
        "request completed path=/api/v2/orders status=200 duration_ms={n}",
        "request completed path=/api/v2/search status=200 duration_ms={n}",
        "upstream timeout host=db-primary:5432 after_ms={n}",
        "connection pool exhausted active=64 waiting={k}",
        "cache miss key=product:{n} ttl_s=300",
        "retrying job id={h} attempt={k}",
        "health check ok latency_ms={k}",
        "slow query duration_ms={n} statement=SELECT ... FROM order_items WHERE order_id = $1",
        "worker heartbeat queue_depth={k}",
        "request failed path=/api/v2/checkout status=503 error=\"upstream unavailable\"",
        "config reloaded source=/etc/{s}/config.yaml keys_changed={k}",
    )
    lines: list[str] = []
    size = 0
    while size < budget:
        msg = rng.choice(msgs).format(n=rng.randint(3, 4800), k=rng.randint(1, 40),
                                      h=hexid(rng, 8), s=service)
        line = f"2026-03-{rng.randint(10, 12):02d}T{clock(rng)}Z {rng.choice(levels):<5} {service} {msg}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


# ---------------------------------------------------------------- files

def _files_slots(rng: random.Random) -> dict:
    user = rng.choice(corpus.FIRST_NAMES).lower()
    proj = rng.choice(("harbour-map", "tide-tables", "bakery-pos", "rota-planner", "seedbank"))
    return {"root": f"/home/{user}/projects/{proj}", "proj": proj,
            "word": rng.choice(("TODO", "deprecated", "timeout", "password", "FIXME", "retry")),
            "file": rng.choice(("src/app.py", "src/storage.py", "config/settings.yaml",
                                "docs/notes.md", "src/api/routes.py", "README.md"))}


def _files_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    path = str(args.get("path") or args.get("source") or "/")
    if name == "list_directory":
        exts = (".py", ".md", ".yaml", ".json", ".csv", ".txt", "")
        stems = ("app", "storage", "routes", "models", "utils", "settings", "notes", "schema",
                 "test_api", "fixtures", "migrate", "export", "cli", "report", "data")
        return grow(lambda n: {"name": f"{rng.choice(stems)}_{n}{rng.choice(exts)}",
                               "type": rng.choice(("file", "file", "file", "directory")),
                               "size": rng.randint(0, 90000), "modified": f"{date(rng)}T{clock(rng)}Z"},
                    budget, lambda xs: {"path": path, "entries": xs, "truncated": False})
    if name == "search_files":
        return grow(lambda n: {"path": f"{path}/src/{rng.choice(('app', 'api/routes', 'storage', 'jobs/sync'))}.py",
                               "line": rng.randint(1, 900),
                               "text": rng.choice(("# TODO: handle timeout from the upstream service",
                                                   "    retry(fetch, attempts=3)  # FIXME flaky",
                                                   "timeout = settings.get('timeout', 30)",
                                                   "    raise TimeoutError('sync took too long')",
                                                   "# deprecated: use storage.save_batch instead"))},
                    budget, lambda xs: {"query": args.get("query"), "matches": xs})
    if name == "read_file":
        if path.endswith((".md", ".txt")):
            return prose(rng, budget)
        if path.endswith((".yaml", ".yml")):
            keys = ("timeout", "retries", "pool_size", "log_level", "cache_ttl", "region", "bucket")
            lines: list[str] = []
            while sum(len(x) + 1 for x in lines) < budget:
                lines.append(f"{rng.choice(('server', 'database', 'cache', 'worker'))}_{len(lines)}:")
                lines += [f"  {k}: {rng.randint(1, 500)}" for k in rng.sample(keys, 4)]
            return "\n".join(lines)
        code: list[str] = []
        while sum(len(c) + 1 for c in code) < budget:
            code.append(rng.choice(corpus.CODE_SNIPPETS))
        return "\n\n".join(code)
    if name == "file_info":
        return json.dumps({"path": path, "size": rng.randint(100, 80000), "owner": "dev",
                           "mode": "0644", "modified": f"{date(rng)}T{clock(rng)}Z"})
    return json.dumps({"ok": True, "path": path, "bytes_written": rng.randint(100, 9000)})


FILES = Domain(
    name="files",
    purpose="a coding assistant with access to the user's project directory",
    tools=(
        tool("list_directory", "List the files and folders in a directory of the workspace.",
             {"path": s("Absolute directory path."), "recursive": b("Include subdirectories.")}, ("path",)),
        tool("read_file", "Read a text file. Long files can be read in line ranges.",
             {"path": s("Absolute file path."), "start_line": i("First line, 1-based."),
              "end_line": i("Last line, inclusive.")}, ("path",)),
        tool("search_files", "Search file contents for a literal string or a regular expression.",
             {"query": s("Text or regular expression to look for."), "path": s("Directory to search."),
              "glob": s("Only files matching this pattern, e.g. '*.py'.")}, ("query", "path")),
        tool("write_file", "Create or overwrite a text file.",
             {"path": s("Absolute file path."), "content": s("The full new content.")}, ("path", "content")),
        tool("file_info", "Return size, owner, permissions and modification time of a file.",
             {"path": s("Absolute file path.")}, ("path",)),
        tool("move_file", "Move or rename a file.",
             {"source": s("Current path."), "destination": s("New path.")}, ("source", "destination")),
    ),
    tasks=(
        Task("Can you find every {word} in {root} and tell me which files need the most attention?",
             ((("search_files", {"query": "{word}", "path": "{root}", "glob": "*.py"}),),
              (("read_file", {"path": "{root}/src/app.py"}),),
              (("read_file", {"path": "{root}/src/storage.py"}),)),
             "Most of the {word} markers are in src/app.py and src/storage.py. I would start with storage.py."),
        Task("What's in {root}? Give me an overview of the project layout and read the README.",
             ((("list_directory", {"path": "{root}", "recursive": False}),),
              (("read_file", {"path": "{root}/README.md"}), ("list_directory", {"path": "{root}/src"}))),
             "The project has a small src package, a config folder and documentation; the README describes setup."),
        Task("Please check {root}/{file} and tell me whether the settings look sane.",
             ((("file_info", {"path": "{root}/{file}"}),), (("read_file", {"path": "{root}/{file}"}),)),
             "The file is readable. A few values look high, especially the pool sizes; details below."),
        Task("Move the old notes in {root}/docs into an archive folder and write a short index file.",
             ((("list_directory", {"path": "{root}/docs"}),),
              (("move_file", {"source": "{root}/docs/notes.md", "destination": "{root}/docs/archive/notes.md"}),),
              (("write_file", {"path": "{root}/docs/INDEX.md", "content": "# Docs index\n\n- archive/notes.md\n"}),)),
             "Done: the notes are in docs/archive and docs/INDEX.md lists them."),
    ),
    slots=_files_slots,
    result=_files_result,
)


# ---------------------------------------------------------------- calendar

def _calendar_slots(rng: random.Random) -> dict:
    d = date(rng)
    return {"day": d, "who": person(rng), "who2": person(rng), "evt": f"evt_{hexid(rng, 10)}",
            "title": rng.choice(("quarterly planning", "design review", "1:1", "budget sign-off",
                                 "vendor call", "team lunch", "retrospective"))}


def _calendar_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    titles = ("Standup", "Design review", "Hiring panel", "Lunch with {p}", "Budget sync", "Focus time",
              "Customer call", "Retrospective", "Dentist", "Training: incident response", "Board prep")
    if name in ("list_events", "find_free_slots"):
        def event(n: int) -> dict:
            h = rng.randint(8, 17)
            if name == "find_free_slots":
                return {"start": f"{args.get('window_start', date(rng))[:10]}T{h:02d}:00:00",
                        "end": f"{args.get('window_start', date(rng))[:10]}T{h:02d}:{rng.choice(('30', '45'))}:00",
                        "all_attendees_free": rng.random() < 0.7}
            return {"id": slots["evt"] if n == 0 else f"evt_{hexid(rng, 10)}",
                    "title": slots["title"].capitalize() if n == 0 else rng.choice(titles).format(p=person(rng)),
                    "start": f"{date(rng)}T{h:02d}:{rng.choice(('00', '30'))}:00",
                    "end": f"{date(rng)}T{h + 1:02d}:00:00",
                    "location": rng.choice(("Room 4B", "Video call", "Cafe on Dock Street", "Room 2A")),
                    "attendees": [email_of(person(rng)) for _ in range(rng.randint(1, 5))],
                    "status": rng.choice(("confirmed", "confirmed", "tentative"))}
        key = "slots" if name == "find_free_slots" else "events"
        return grow(event, budget, lambda xs: {key: xs, "timezone": "Europe/London"}, indent=1)
    if name == "get_event":
        return json.dumps({"id": args.get("event_id"), "title": "Design review", "description":
                           prose(rng, min(budget, 1200)), "organizer": email_of(person(rng))}, ensure_ascii=False)
    return json.dumps({"id": f"evt_{hexid(rng, 10)}", "status": "confirmed", "html_link":
                       f"https://calendar.northwind.example/e/{hexid(rng, 12)}"})


CALENDAR = Domain(
    name="calendar",
    purpose="a scheduling assistant that manages the user's work calendar",
    tools=(
        tool("list_events", "List calendar events between two ISO-8601 timestamps.",
             {"start": s("Window start, ISO-8601."), "end": s("Window end, ISO-8601."),
              "calendar_id": s("Calendar to read; defaults to the user's primary calendar.")}, ("start", "end")),
        tool("get_event", "Return one event with its description and attendee responses.",
             {"event_id": s("The event id.")}, ("event_id",)),
        tool("find_free_slots", "Find times when all attendees are free.",
             {"attendees": arr("Email addresses.", {"type": "string"}), "duration_minutes": i("Meeting length."),
              "window_start": s("Earliest start, ISO-8601."), "window_end": s("Latest end, ISO-8601.")},
             ("attendees", "duration_minutes", "window_start", "window_end")),
        tool("create_event", "Create an event and send invitations.",
             {"title": s("Event title."), "start": s("ISO-8601 start."), "end": s("ISO-8601 end."),
              "attendees": arr("Email addresses to invite.", {"type": "string"}), "location": s("Room or link.")},
             ("title", "start", "end")),
        tool("update_event", "Change the time, title or attendees of an existing event.",
             {"event_id": s("The event id."), "start": s("New start."), "end": s("New end."),
              "title": s("New title.")}, ("event_id",)),
    ),
    tasks=(
        Task("What does my week look like starting {day}? Anything I could skip?",
             ((("list_events", {"start": "{day}T00:00:00", "end": "{day}T23:59:59"}),),),
             "Your week is busy on the first two days; the budget sync and one training look optional."),
        Task("Set up a {title} with {who} and {who2} sometime on {day}, 45 minutes.",
             ((("find_free_slots", {"attendees": ["{who}", "{who2}"], "duration_minutes": 45,
                                    "window_start": "{day}T09:00:00", "window_end": "{day}T17:00:00"}),),
              (("create_event", {"title": "{title}", "start": "{day}T14:00:00", "end": "{day}T14:45:00",
                                 "attendees": ["{who}", "{who2}"]}),)),
             "Booked the {title} for 14:00 on {day}; invitations have gone out."),
        Task("Move my {title} on {day} to the afternoon and tell me who has not replied.",
             ((("list_events", {"start": "{day}T00:00:00", "end": "{day}T23:59:59"}),),
              (("get_event", {"event_id": "{evt}"}),),
              (("update_event", {"event_id": "{evt}", "start": "{day}T15:00:00", "end": "{day}T16:00:00"}),)),
             "Moved to 15:00. Two attendees have not responded yet."),
    ),
    slots=_calendar_slots,
    result=_calendar_result,
)


# ---------------------------------------------------------------- email

def _email_slots(rng: random.Random) -> dict:
    return {"who": person(rng), "topic": rng.choice(("the invoice", "the offsite", "the contract renewal",
                                                      "last week's outage", "the hiring plan", "the roof repair")),
            "label": rng.choice(("Follow up", "Receipts", "Travel", "Waiting")),
            "m1": f"msg_{hexid(rng, 12)}", "m2": f"msg_{hexid(rng, 12)}"}


def _email_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    subjects = ("Re: {t}", "Quick question about {t}", "Fwd: {t}", "{t} - updated numbers",
                "Reminder: {t}", "Notes from today's call on {t}")
    topics = ("the invoice", "the offsite", "Q3 figures", "the contract renewal", "parking permits", "the audit")
    if name == "search_emails":
        first = (slots["m1"], slots["m2"])
        return grow(lambda n: {"id": first[n] if n < 2 else f"msg_{hexid(rng, 12)}", "from": email_of(person(rng)),
                               "subject": rng.choice(subjects).format(t=rng.choice(topics)),
                               "date": f"{date(rng)}T{clock(rng)}Z", "unread": rng.random() < 0.3,
                               "snippet": rng.choice(corpus.EMAIL_SENTENCES)},
                    budget, lambda xs: {"total": len(xs), "messages": xs})
    if name == "read_email":
        sender = person(rng)
        body = ["Hi,", ""]
        while sum(len(x) + 1 for x in body) < budget - 200:
            body.append(" ".join(rng.sample(corpus.EMAIL_SENTENCES, 3)))
            body.append(rng.choice(rng.choice(corpus.TOPICS)[1]))
        body += ["", "Best,", sender]
        return json.dumps({"id": args.get("message_id"), "from": email_of(sender), "to": ["me@northwind.example"],
                           "subject": rng.choice(subjects).format(t=rng.choice(topics)),
                           "body": "\n".join(body)}, ensure_ascii=False)
    if name == "list_labels":
        return json.dumps({"labels": ["Inbox", "Follow up", "Receipts", "Travel", "Waiting", "Newsletters"]})
    return json.dumps({"ok": True, "id": f"msg_{hexid(rng, 12)}"})


EMAIL = Domain(
    name="email",
    purpose="an email assistant with access to the user's mailbox",
    tools=(
        tool("search_emails", "Search the mailbox. Supports from:, to:, subject:, before: and after: operators.",
             {"query": s("Search query."), "folder": s("Folder, default Inbox."), "limit": i("Maximum results.")},
             ("query",)),
        tool("read_email", "Return the full message, including body and attachments list.",
             {"message_id": s("Message id from search results.")}, ("message_id",)),
        tool("send_email", "Send a new message.",
             {"to": arr("Recipients.", {"type": "string"}), "subject": s("Subject line."), "body": s("Plain-text body."),
              "cc": arr("Copy recipients.", {"type": "string"})}, ("to", "subject", "body")),
        tool("reply_email", "Reply to a message, keeping the thread.",
             {"message_id": s("Message to reply to."), "body": s("Plain-text body."), "reply_all": b("Reply to all.")},
             ("message_id", "body")),
        tool("label_email", "Add a label to a message.",
             {"message_id": s("Message id."), "label": s("Label name.")}, ("message_id", "label")),
        tool("list_labels", "List the mailbox labels.", {}, ()),
    ),
    tasks=(
        Task("Find the latest emails from {who} about {topic} and summarise what they want from me.",
             ((("search_emails", {"query": "from:{who} {topic}", "limit": 20}),),
              (("read_email", {"message_id": "{m1}"}),),
              (("read_email", {"message_id": "{m2}"}),)),
             "{who} is waiting on two things from you about {topic}; the second email sets a deadline."),
        Task("Label everything about {topic} as '{label}' and reply to the newest one saying I'll look at it Monday.",
             ((("list_labels", {}),), (("search_emails", {"query": "{topic}", "limit": 50}),),
              (("label_email", {"message_id": "{m1}", "label": "{label}"}),
               ("label_email", {"message_id": "{m2}", "label": "{label}"})),
              (("reply_email", {"message_id": "{m1}", "body": "Thanks, I'll look at this on Monday."}),)),
             "Labelled the messages and replied to the newest one."),
        Task("Draft and send a short update to {who} about {topic}; check what we last discussed first.",
             ((("search_emails", {"query": "{who} {topic}", "limit": 10}),),
              (("read_email", {"message_id": "{m1}"}),),
              (("send_email", {"to": ["{who}"], "subject": "Update on {topic}",
                               "body": "Hi, a quick update on {topic}: the numbers are final and attached."}),)),
             "Sent the update to {who}."),
    ),
    slots=_email_slots,
    result=_email_result,
)


# ---------------------------------------------------------------- shell

def _shell_slots(rng: random.Random) -> dict:
    return {"svc": rng.choice(corpus.SERVICES), "host": f"web-{rng.randint(1, 12):02d}",
            "since": rng.choice(("30m", "2h", "1h", "15m"))}


def _shell_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    svc = str(args.get("service") or args.get("filter") or "app")
    if name == "read_log":
        return log_lines(rng, budget, svc)
    if name == "list_processes":
        rows = ["  PID USER     %CPU %MEM COMMAND"]
        while sum(len(r) + 1 for r in rows) < budget:
            rows.append(f"{rng.randint(100, 99999):>5} {rng.choice(('app', 'root', 'postgres')):<8} "
                        f"{rng.uniform(0, 99):>4.1f} {rng.uniform(0, 30):>4.1f} "
                        f"{rng.choice(('python -m worker', 'nginx: worker process', 'postgres: writer', 'node server.js', svc))}")
        return "\n".join(rows)
    if name == "run_command":
        cmd = str(args.get("command", ""))
        if cmd.startswith("df"):
            rows = ["Filesystem      Size  Used Avail Use% Mounted on"]
            while sum(len(r) + 1 for r in rows) < budget:
                rows.append(f"/dev/nvme{rng.randint(0, 3)}n1p{rng.randint(1, 9)}  {rng.randint(20, 900)}G "
                            f"{rng.randint(1, 800)}G {rng.randint(1, 300)}G {rng.randint(1, 100)}% /data{len(rows)}")
            return "\n".join(rows)
        return json.dumps({"exit_code": 0, "stdout": log_lines(rng, budget, svc), "stderr": ""}, ensure_ascii=False)
    if name == "service_status":
        return json.dumps({"service": svc, "active": rng.choice(("active (running)", "failed", "activating")),
                           "since": f"{date(rng)}T{clock(rng)}Z", "restarts_24h": rng.randint(0, 9),
                           "memory_mb": rng.randint(80, 4000), "recent": log_lines(rng, min(budget, 1500), svc)},
                          ensure_ascii=False)
    return json.dumps({"service": svc, "restarted": True, "pid": rng.randint(1000, 60000)})


SHELL = Domain(
    name="shell",
    purpose="an on-call operations assistant with shell access to the production hosts",
    tools=(
        tool("run_command", "Run a shell command on a host and return exit code, stdout and stderr.",
             {"command": s("The command line."), "host": s("Host name."), "timeout_s": i("Seconds before the command is killed.")},
             ("command", "host")),
        tool("read_log", "Read the most recent log lines of a service.",
             {"service": s("Service name."), "lines": i("How many lines."), "since": s("Only lines newer than this, e.g. '30m'."),
              "level": s("Minimum level.", enum=["DEBUG", "INFO", "WARN", "ERROR"])}, ("service",)),
        tool("list_processes", "List processes on a host, optionally filtered by name.",
             {"host": s("Host name."), "filter": s("Substring of the command line.")}, ("host",)),
        tool("service_status", "Show the state of a systemd service, with its last log lines.",
             {"service": s("Service name."), "host": s("Host name.")}, ("service", "host")),
        tool("restart_service", "Restart a service. Requires the user's confirmation first.",
             {"service": s("Service name."), "host": s("Host name.")}, ("service", "host")),
    ),
    tasks=(
        Task("{svc} on {host} is throwing 503s since about {since} ago. Can you take a look?",
             ((("service_status", {"service": "{svc}", "host": "{host}"}),),
              (("read_log", {"service": "{svc}", "since": "{since}", "lines": 400}),),
              (("run_command", {"command": "df -h", "host": "{host}"}),),
              (("list_processes", {"host": "{host}", "filter": "{svc}"}),)),
             "The 503s line up with connection pool exhaustion in {svc}; disk and processes look normal."),
        Task("Check the last {since} of {svc} logs for errors and tell me if it's getting worse.",
             ((("read_log", {"service": "{svc}", "since": "{since}", "level": "WARN"}),),
              (("read_log", {"service": "{svc}", "since": "{since}", "level": "ERROR"}),)),
             "Errors are steady rather than growing; most are upstream timeouts."),
        Task("Is anything eating CPU on {host}? If {svc} is stuck, restart it.",
             ((("list_processes", {"host": "{host}"}),),
              (("run_command", {"command": "uptime && free -m", "host": "{host}"}),),
              (("restart_service", {"service": "{svc}", "host": "{host}"}),)),
             "{svc} was spinning at full CPU; I restarted it and load is dropping."),
    ),
    slots=_shell_slots,
    result=_shell_result,
)


# ---------------------------------------------------------------- weather

def _weather_slots(rng: random.Random) -> dict:
    a, c = rng.sample(corpus.TOWNS, 2)
    return {"town": a, "town2": c, "days": rng.randint(3, 10)}


def _weather_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    loc = str(args.get("location") or args.get("query") or "")
    if name == "get_forecast":
        return grow(lambda n: {"time": f"2026-06-{1 + n // 24:02d}T{n % 24:02d}:00", "temp_c": round(rng.uniform(8, 27), 1),
                               "feels_like_c": round(rng.uniform(6, 28), 1), "precip_mm": round(rng.uniform(0, 4) ** 2 / 4, 1),
                               "wind_kph": rng.randint(2, 55), "gust_kph": rng.randint(5, 80),
                               "summary": rng.choice(("clear", "partly cloudy", "showers", "overcast", "drizzle", "sunny intervals"))},
                    budget, lambda xs: {"location": loc, "units": "metric", "hourly": xs})
    if name == "search_locations":
        return json.dumps({"results": [{"name": loc, "region": rng.choice(("North Coast", "Lowlands", "Valley District")),
                                        "lat": round(rng.uniform(49, 59), 4), "lon": round(rng.uniform(-6, 2), 4)}]})
    if name == "get_air_quality":
        return json.dumps({"location": loc, "aqi": rng.randint(10, 140), "pm2_5": round(rng.uniform(2, 40), 1),
                           "ozone": round(rng.uniform(20, 120), 1), "pollen": rng.choice(("low", "moderate", "high"))})
    return json.dumps({"location": loc, "temp_c": round(rng.uniform(5, 25), 1), "humidity": rng.randint(40, 95),
                       "wind_kph": rng.randint(0, 50), "summary": rng.choice(("clear", "light rain", "fog"))})


WEATHER = Domain(
    name="weather",
    purpose="a trip-planning assistant with live weather data",
    tools=(
        tool("search_locations", "Resolve a place name to coordinates.", {"query": s("Place name.")}, ("query",)),
        tool("get_current_conditions", "Current weather at a location.", {"location": s("Place name or 'lat,lon'.")},
             ("location",)),
        tool("get_forecast", "Hourly forecast for the next days.",
             {"location": s("Place name or 'lat,lon'."), "days": i("Number of days, 1 to 14.", minimum=1, maximum=14),
              "units": s("Unit system.", enum=["metric", "imperial"])}, ("location", "days")),
        tool("get_air_quality", "Air quality index and pollen levels.", {"location": s("Place name.")}, ("location",)),
    ),
    tasks=(
        Task("I'm hiking near {town} over the next {days} days. When is the best window, and is the pollen bad?",
             ((("search_locations", {"query": "{town}"}),),
              (("get_forecast", {"location": "{town}", "days": "{days}", "units": "metric"}),
               ("get_air_quality", {"location": "{town}"}))),
             "The second and third days look driest near {town}; pollen is moderate."),
        Task("Compare the weather in {town} and {town2} for the weekend; which is better for a sailing trip?",
             ((("get_forecast", {"location": "{town}", "days": 3}), ("get_forecast", {"location": "{town2}", "days": 3})),
              (("get_current_conditions", {"location": "{town2}"}),)),
             "{town2} has steadier winds and less rain, so it is the better choice for sailing."),
    ),
    slots=_weather_slots,
    result=_weather_result,
)


# ---------------------------------------------------------------- tickets

def _tickets_slots(rng: random.Random) -> dict:
    return {"comp": rng.choice(("billing", "search", "mobile-app", "auth", "reports")),
            "who": person(rng), "tid": f"OPS-{rng.randint(1000, 9999)}"}


def _tickets_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    titles = ("Export to CSV drops the last row", "Login loop on Safari after password reset",
              "Search results ignore the date filter", "Invoice PDF shows wrong VAT number",
              "Push notifications arrive twice", "Report page times out for large accounts",
              "Typo in the welcome email", "Dark mode makes chart labels unreadable")
    if name == "search_tickets":
        return grow(lambda n: {"id": slots["tid"] if n == 0 else f"OPS-{rng.randint(1000, 9999)}", "title": rng.choice(titles),
                               "status": rng.choice(("open", "in_progress", "blocked", "open")),
                               "priority": rng.choice(("P1", "P2", "P3", "P3")), "assignee": email_of(person(rng)),
                               "updated": f"{date(rng)}T{clock(rng)}Z", "component": args.get("component", "billing")},
                    budget, lambda xs: {"tickets": xs, "total": len(xs)})
    if name == "get_ticket":
        comments: list[dict[str, Any]] = []
        while sum(len(json.dumps(c, ensure_ascii=False)) for c in comments) < budget - 400:
            comments.append({"author": email_of(person(rng)), "at": f"{date(rng)}T{clock(rng)}Z",
                             "body": " ".join(rng.sample(corpus.EMAIL_SENTENCES, 2)) + " "
                             + rng.choice(corpus.INCIDENT_ANALYSIS)})
        return json.dumps({"id": args.get("ticket_id"), "title": rng.choice(titles), "status": "open",
                           "priority": "P2", "description": rng.choice(corpus.INCIDENT_ANALYSIS),
                           "comments": comments}, ensure_ascii=False, indent=2)
    return json.dumps({"ok": True, "id": args.get("ticket_id") or f"OPS-{rng.randint(1000, 9999)}"})


TICKETS = Domain(
    name="tickets",
    purpose="a support engineer's assistant connected to the issue tracker",
    tools=(
        tool("search_tickets", "Search tickets by text, status, component and assignee.",
             {"query": s("Free text."), "status": s("Ticket status.", enum=["open", "in_progress", "blocked", "closed"]),
              "component": s("Component name."), "assignee": s("Assignee email."), "limit": i("Maximum results.")}, ("query",)),
        tool("get_ticket", "Return a ticket with its description and comment history.",
             {"ticket_id": s("Ticket id, e.g. OPS-1234.")}, ("ticket_id",)),
        tool("add_comment", "Add a comment to a ticket.", {"ticket_id": s("Ticket id."), "body": s("Comment text.")},
             ("ticket_id", "body")),
        tool("update_ticket", "Change status, priority or assignee.",
             {"ticket_id": s("Ticket id."), "status": s("New status."), "priority": s("New priority, P1-P4."),
              "assignee": s("New assignee email.")}, ("ticket_id",)),
        tool("create_ticket", "Open a new ticket.",
             {"title": s("Short title."), "description": s("Details and reproduction steps."),
              "priority": s("P1-P4."), "component": s("Component name.")}, ("title", "description")),
    ),
    tasks=(
        Task("What's open in {comp} right now, and which ticket should I pick up first?",
             ((("search_tickets", {"query": "", "status": "open", "component": "{comp}", "limit": 30}),),
              (("get_ticket", {"ticket_id": "{tid}"}),)),
             "{tid} is the one to pick up: it is P2, customer-facing and has a clear reproduction."),
        Task("Summarise {tid} for me, then reassign it to {who} and bump it to P1.",
             ((("get_ticket", {"ticket_id": "{tid}"}),),
              (("update_ticket", {"ticket_id": "{tid}", "priority": "P1", "assignee": "{who}"}),
               ("add_comment", {"ticket_id": "{tid}", "body": "Raised to P1 and reassigned after triage."}))),
             "{tid} is now P1 and assigned to {who}."),
        Task("Are there duplicates of {tid} in {comp}? Link them if so.",
             ((("get_ticket", {"ticket_id": "{tid}"}),),
              (("search_tickets", {"query": "export csv last row", "component": "{comp}"}),),
              (("add_comment", {"ticket_id": "{tid}", "body": "Possible duplicates found; linking."}),)),
             "Found two likely duplicates of {tid} and linked them."),
    ),
    slots=_tickets_slots,
    result=_tickets_result,
)


# ---------------------------------------------------------------- search

def _search_slots(rng: random.Random) -> dict:
    title, _ = rng.choice(corpus.TOPICS)
    site = rng.choice(("harbourtimes", "fieldnotes", "openkitchen", "techdigest"))
    slug = title.lower().replace(" ", "-")
    return {"topic": title.lower(), "u1": f"https://{site}.example/{slug}-{rng.randint(10, 999)}",
            "u2": f"https://learnwell.example/{slug}", "u3": f"https://citygazette.example/news/{slug}"}


def _search_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    sites = ("harbourtimes", "fieldnotes", "openkitchen", "techdigest", "citygazette", "learnwell")
    if name in ("web_search", "news_search"):
        def hit(n: int) -> dict:
            title, paras = rng.choice(corpus.TOPICS)
            para = rng.choice(paras)
            cut = para.find(". ", 120)
            return {"rank": n + 1, "title": f"{title} - {rng.choice(('guide', 'explained', 'a beginner asks', 'notes'))}",
                    "url": (slots["u1"], slots["u2"], slots["u3"])[n] if n < 3 else
                    f"https://{rng.choice(sites)}.example/{title.lower().replace(' ', '-')}-{rng.randint(10, 999)}",
                    "snippet": para[:cut + 1] if cut > 0 else para[:200],
                    "published": date(rng)}
        return grow(hit, budget, lambda xs: {"query": args.get("query"), "results": xs})
    return json.dumps({"url": args.get("url"), "status": 200, "title": rng.choice(corpus.TOPICS)[0],
                       "text": prose(rng, budget)}, ensure_ascii=False)


SEARCH = Domain(
    name="search",
    purpose="a research assistant that can search the web and read pages",
    tools=(
        tool("web_search", "Search the web and return ranked results with snippets.",
             {"query": s("Search query."), "num_results": i("How many results, up to 20.")}, ("query",)),
        tool("news_search", "Search recent news articles.",
             {"query": s("Search query."), "since": s("Only articles after this date, YYYY-MM-DD.")}, ("query",)),
        tool("fetch_page", "Download a page and return its readable text.",
             {"url": s("Absolute URL."), "max_chars": i("Truncate the text to this many characters.")}, ("url",)),
    ),
    tasks=(
        Task("I want to understand {topic}. Find two good sources and give me the key points.",
             ((("web_search", {"query": "{topic}", "num_results": 10}),),
              (("fetch_page", {"url": "{u1}"}),),
              (("fetch_page", {"url": "{u2}"}),)),
             "Both sources agree on the basics of {topic}; the second adds practical advice."),
        Task("Any recent news on {topic}? Read the top article for me.",
             ((("news_search", {"query": "{topic}", "since": "2026-01-01"}),),
              (("fetch_page", {"url": "{u3}"}),)),
             "The most recent article is a local story; it is summarised below."),
    ),
    slots=_search_slots,
    result=_search_result,
)


# ---------------------------------------------------------------- database

def _db_slots(rng: random.Random) -> dict:
    return {"table": rng.choice(("orders", "customers", "shipments", "invoices")), "month": rng.randint(1, 12),
            "town": rng.choice(corpus.TOWNS)}


def _db_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    if name == "list_tables":
        return json.dumps({"tables": ["customers", "orders", "order_items", "products", "shipments", "invoices",
                                      "payments", "warehouses", "returns", "audit_log"]})
    if name == "describe_table":
        cols = [("id", "bigint", False), ("customer_id", "bigint", False), ("status", "text", False),
                ("total_cents", "integer", False), ("currency", "char(3)", False), ("created_at", "timestamptz", False),
                ("shipped_at", "timestamptz", True), ("warehouse_id", "integer", True), ("notes", "text", True)]
        return json.dumps({"table": args.get("table"), "columns": [{"name": c, "type": t, "nullable": n} for c, t, n in cols],
                           "indexes": ["PRIMARY KEY (id)", "btree (customer_id, created_at)", "btree (status)"],
                           "row_estimate": rng.randint(10**5, 10**8)})
    if name == "explain_query":
        lines: list[str] = []
        while sum(len(x) + 1 for x in lines) < budget:
            lines.append(f"{'  ' * (len(lines) % 5)}-> {rng.choice(('Seq Scan on orders', 'Index Scan using orders_customer_id_created_at_idx', 'Hash Join', 'Sort', 'HashAggregate', 'Bitmap Heap Scan on shipments'))}"
                         f"  (cost={rng.uniform(0, 9000):.2f}..{rng.uniform(9000, 99000):.2f} rows={rng.randint(1, 900000)} width={rng.randint(8, 120)})")
        return "\n".join(lines)
    return grow(lambda n: [rng.randint(1, 10**6), rng.choice(corpus.TOWNS), rng.choice(("shipped", "pending", "returned", "cancelled")),
                           rng.randint(100, 500000), f"{date(rng)} {clock(rng)}"],
                budget, lambda xs: {"columns": ["id", "town", "status", "total_cents", "created_at"], "rows": xs,
                                    "row_count": len(xs)})


DATABASE = Domain(
    name="database",
    purpose="a data analyst's assistant with read-only SQL access to the operations database",
    tools=(
        tool("list_tables", "List the tables in a schema.", {"schema": s("Schema name, default 'public'.")}, ()),
        tool("describe_table", "Columns, types, indexes and approximate row count of a table.",
             {"table": s("Table name.")}, ("table",)),
        tool("run_query", "Run a read-only SQL query and return rows as JSON.",
             {"sql": s("A single SELECT statement."), "limit": i("Maximum rows returned.")}, ("sql",)),
        tool("explain_query", "Show the query plan without running the query.", {"sql": s("A SELECT statement.")}, ("sql",)),
    ),
    tasks=(
        Task("How many {table} did we have per status in month {month}? Something looks off in {town}.",
             ((("list_tables", {}),), (("describe_table", {"table": "{table}"}),),
              (("run_query", {"sql": "SELECT status, count(*) FROM {table} WHERE extract(month FROM created_at) = {month} GROUP BY status", "limit": 100}),),
              (("run_query", {"sql": "SELECT * FROM {table} WHERE town = '{town}' ORDER BY created_at DESC", "limit": 200}),)),
             "Most {table} are shipped; {town} has an unusual share of returns this month."),
        Task("This report query on {table} is slow. Why?",
             ((("describe_table", {"table": "{table}"}),),
              (("explain_query", {"sql": "SELECT * FROM {table} o JOIN shipments s ON s.order_id = o.id WHERE o.status = 'pending'"}),)),
             "The plan does a sequential scan on {table}; an index on status would help."),
    ),
    slots=_db_slots,
    result=_db_result,
)


# ---------------------------------------------------------------- git and CI

def _git_slots(rng: random.Random) -> dict:
    return {"branch": rng.choice(("main", "release/2.4", "feature/export-v2", "fix/login-loop")),
            "job": rng.randint(10**5, 10**6 - 1), "sha": hexid(rng, 40),
            "who": person(rng), "path": rng.choice(("src/billing", "src/search", "web/app", "infra"))}


def _git_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    msgs = ("Fix off-by-one in CSV export", "Bump dependency pins", "Add retry to payment webhook",
            "Refactor search query builder", "Remove unused feature flag", "Speed up report aggregation",
            "Handle empty cart in checkout", "Update onboarding copy", "Log request ids in gateway")
    if name == "git_log":
        return grow(lambda n: {"commit": slots["sha"] if n == 0 else hexid(rng, 40),
                               "author": args.get("author") or person(rng), "date": f"{date(rng)}T{clock(rng)}Z",
                               "message": rng.choice(msgs)}, budget, lambda xs: {"commits": xs})
    if name in ("git_diff", "git_show"):
        out = [f"commit {args.get('commit')}"] if name == "git_show" else []
        while sum(len(x) + 1 for x in out) < budget:
            snippet = rng.choice(corpus.CODE_SNIPPETS).splitlines()
            out.append(f"diff --git a/{args.get('path', 'src/app')}/mod_{len(out)}.py b/{args.get('path', 'src/app')}/mod_{len(out)}.py")
            out.append(f"@@ -{rng.randint(1, 300)},{len(snippet)} +{rng.randint(1, 300)},{len(snippet)} @@")
            out += [rng.choice(("+", "-", " ", " ")) + line for line in snippet]
        return "\n".join(out)
    if name == "ci_status":
        return json.dumps({"branch": args.get("branch"), "pipeline": rng.randint(10000, 99999), "jobs": [
            {"id": slots["job"] if j == "integration-tests" else rng.randint(10**5, 10**6 - 1), "name": j,
             "status": "failed" if j == "integration-tests" else rng.choice(("success", "success", "running"))}
            for j in ("lint", "unit-tests", "integration-tests", "build-image", "deploy-staging")]})
    return log_lines(rng, budget, "ci-runner")


GIT = Domain(
    name="git",
    purpose="a developer assistant connected to the team's repository and CI",
    tools=(
        tool("git_log", "Recent commits, optionally for one path or author.",
             {"branch": s("Branch name."), "path": s("Limit to this path."), "author": s("Author name."),
              "limit": i("Maximum commits.")}, ("branch",)),
        tool("git_diff", "Diff between two refs.", {"base": s("Base ref."), "head": s("Head ref."), "path": s("Limit to this path.")},
             ("base", "head")),
        tool("git_show", "Show one commit with its diff.", {"commit": s("Commit hash.")}, ("commit",)),
        tool("ci_status", "Status of the latest pipeline on a branch.", {"branch": s("Branch name.")}, ("branch",)),
        tool("ci_job_log", "Log output of a CI job.", {"job_id": i("Job id."), "tail": i("Only the last N lines.")}, ("job_id",)),
    ),
    tasks=(
        Task("CI on {branch} is red. What broke and who touched it last?",
             ((("ci_status", {"branch": "{branch}"}),), (("ci_job_log", {"job_id": "{job}", "tail": 300}),),
              (("git_log", {"branch": "{branch}", "limit": 15}),)),
             "The integration tests fail since the last merge to {branch}; the failing test covers the export path."),
        Task("What changed in {path} between {branch} and main this week? Anything risky?",
             ((("git_log", {"branch": "{branch}", "path": "{path}", "limit": 20}),),
              (("git_diff", {"base": "main", "head": "{branch}", "path": "{path}"}),)),
             "Three commits touched {path}; the retry change is the one worth a second review."),
        Task("Show me what {who} committed most recently on {branch}.",
             ((("git_log", {"branch": "{branch}", "author": "{who}", "limit": 5}),), (("git_show", {"commit": "{sha}"}),)),
             "{who}'s latest commit refactors the query builder; the diff is below."),
    ),
    slots=_git_slots,
    result=_git_result,
)


# ---------------------------------------------------------------- shop support

def _shop_slots(rng: random.Random) -> dict:
    who = person(rng)
    product, _ = rng.choice(corpus.PRODUCTS)
    return {"who": who, "mail": email_of(who, "mail.example"), "product": product,
            "order": f"ORD-{rng.randint(100000, 999999)}", "cid": f"cus_{hexid(rng, 10)}",
            "track": f"PW{rng.randint(10**9, 10**10 - 1)}"}


def _shop_result(name: str, args: dict, rng: random.Random, budget: int, slots: dict) -> str:
    if name == "lookup_customer":
        return json.dumps({"customer_id": slots["cid"], "email": args.get("email"), "since": date(rng),
                           "tier": rng.choice(("standard", "plus")), "open_tickets": rng.randint(0, 3)})
    if name == "list_orders":
        return grow(lambda n: {"order_id": f"ORD-{rng.randint(100000, 999999)}", "date": date(rng),
                               "items": [rng.choice(corpus.PRODUCTS)[0] for _ in range(rng.randint(1, 3))],
                               "total": round(rng.uniform(9, 400), 2), "status": rng.choice(("delivered", "shipped", "processing", "returned"))},
                    budget, lambda xs: {"orders": xs})
    if name == "track_shipment":
        return grow(lambda n: {"time": f"{date(rng)}T{clock(rng)}Z", "location": rng.choice(corpus.TOWNS) + " depot",
                               "event": rng.choice(("collected", "in transit", "arrived at depot", "out for delivery",
                                                    "delivery attempted", "held at depot"))},
                    budget, lambda xs: {"tracking_number": args.get("tracking_number"), "carrier": "Parcelwise", "events": xs})
    if name == "search_kb":
        return grow(lambda n: {"article": f"KB-{rng.randint(100, 999)}", "title": rng.choice((
            "Returns within 30 days", "Refunds for damaged items", "Late deliveries", "Warranty claims", "Changing an address")),
            "excerpt": " ".join(rng.sample(corpus.REVIEW_POINTS, 2)).format(k="item")}, budget, lambda xs: {"results": xs})
    if name == "get_order":
        return json.dumps({"order_id": args.get("order_id"), "status": "delivered", "tracking_number": slots["track"],
                           "lines": [{"sku": hexid(rng, 6), "name": p, "qty": rng.randint(1, 2), "price": round(rng.uniform(9, 120), 2)}
                                     for p, _ in rng.sample(corpus.PRODUCTS, 3)], "notes": rng.choice(corpus.REVIEW_POINTS).format(k="item")})
    return json.dumps({"refund_id": f"re_{hexid(rng, 10)}", "status": "pending", "amount": args.get("amount")})


SHOP = Domain(
    name="shop",
    purpose="a customer-support agent for an online outdoor-equipment shop",
    tools=(
        tool("lookup_customer", "Find a customer by email.", {"email": s("Customer email.")}, ("email",)),
        tool("list_orders", "List a customer's orders, newest first.", {"customer_id": s("Customer id."), "limit": i("Maximum orders.")},
             ("customer_id",)),
        tool("get_order", "Order details with lines and tracking number.", {"order_id": s("Order id.")}, ("order_id",)),
        tool("track_shipment", "Carrier tracking events.", {"tracking_number": s("Tracking number.")}, ("tracking_number",)),
        tool("issue_refund", "Refund all or part of an order. Needs a reason.",
             {"order_id": s("Order id."), "amount": {"type": "number", "description": "Amount in the order currency."},
              "reason": s("Reason shown to the customer.")}, ("order_id", "amount", "reason")),
        tool("search_kb", "Search the help-centre articles for policy.", {"query": s("Search text.")}, ("query",)),
    ),
    tasks=(
        Task("Customer {who} ({mail}) says the {product} from {order} never arrived. Please sort it out.",
             ((("lookup_customer", {"email": "{mail}"}),), (("get_order", {"order_id": "{order}"}),),
              (("track_shipment", {"tracking_number": "{track}"}),), (("search_kb", {"query": "late delivery refund"}),)),
             "The parcel is held at the depot; per policy I can reship or refund. I suggest reshipping."),
        Task("{mail} wants a refund for a damaged {product} in {order}. Check the policy and refund if allowed.",
             ((("get_order", {"order_id": "{order}"}),), (("search_kb", {"query": "refund damaged item"}),),
              (("issue_refund", {"order_id": "{order}", "amount": 49.5, "reason": "Item arrived damaged"}),)),
             "Refund issued for the damaged {product}; the customer will see it in 3-5 days."),
        Task("Give me {who}'s order history ({mail}) and flag anything unusual.",
             ((("lookup_customer", {"email": "{mail}"}),), (("list_orders", {"customer_id": "{cid}", "limit": 50}),)),
             "{who} orders regularly; two returns in the last month stand out."),
    ),
    slots=_shop_slots,
    result=_shop_result,
)

DOMAINS: tuple[Domain, ...] = (FILES, CALENDAR, EMAIL, SHELL, WEATHER, TICKETS, SEARCH, DATABASE, GIT, SHOP)

# Organisations and personas that open system prompts, so measured prompts don't share a prefix.
ORGS: tuple[str, ...] = corpus.COMPANIES + (
    "Kestrel Housing Trust", "Pellingford Council", "Saltcombe Sailing Club", "Redwater Clinic",
    "Thistledown Books", "Oakhaven Studio",
)
ASSISTANT_NAMES: tuple[str, ...] = ("Atlas", "Beacon", "Cobalt", "Dory", "Ember", "Finch", "Gale", "Heron",
                                    "Iris", "Juno", "Kite", "Linden", "Moss", "Nova", "Otter", "Pike")
