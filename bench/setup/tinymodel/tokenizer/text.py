"""Hand-written training text for the tiny model's tokenizer (written for cellbench, not copied).

It lives in a Python module, not a data file, so that it ships with the package wherever the code
does and can never be swapped for something else on disk. The mix mirrors what the tokenizer will
see in benchmarks: chat prose, code, and JSON tool calls. `corpus` expands it deterministically.
"""

PROSE = """\
A benchmark is only as honest as the conditions it records. When two servers answer the same
question, the one that answers first is not always the faster one: it may have started earlier,
cached the prompt, or skipped work that the other one did. So we write down everything we can
measure, and we say plainly what we could not measure.

The first token matters to a person waiting at a keyboard. The last token matters to a program
that needs the whole answer before it can act. Between the two lies the steady stream of tokens,
and its rate tells us how busy the machine is while it writes.

Good morning! I hope the trip went well. The train was late again, so I walked the last part of
the way along the river. It was cold but bright, and the water was very still. By the time I
reached the office the sun had come out and the streets were full of people on bicycles.

Could you help me plan a dinner for six people? Two of them do not eat meat, and one cannot eat
nuts. I was thinking of a warm soup to start, then roasted vegetables with rice, and a simple
fruit tart for dessert. How long should I give myself to cook all of it?

Of course. Start the rice and the vegetables first, because they take the longest. The soup can
simmer while the oven is busy. Make the tart in the morning so that it has time to cool. If you
set the table before the guests arrive, you will have about two hours of work in the evening.

The weather in the mountains changes quickly. In the morning the sky may be clear and blue, and by
noon a storm can roll in from the west. Hikers should carry a jacket, water, and a map, and they
should tell someone where they are going and when they expect to return.

Our library opens at nine o'clock on weekdays and at ten on Saturdays. It is closed on Sundays and
on public holidays. Members may borrow up to eight books at a time for three weeks. Late returns
cost a small fee, which is waived for children and for readers over seventy.

Thank you for your message. I have read the report and I agree with most of it. The section on
costs needs more detail, and the chart on page four uses a scale that makes small changes look
large. Could we meet on Thursday afternoon to go through the numbers together?

The experiment ran for twelve days. Each day we measured the temperature of the soil at three
depths, the amount of rain, and the height of the plants. The plants in the shaded plot grew more
slowly at first, but by the end of the second week they had caught up with the others.

When the queue is empty, a server can give each request its full attention. When many requests
arrive at once, it must decide how to share its time. Some servers batch requests together and
run them as one; others take turns. Batching raises the total rate but can delay the first token
of each request, because a new request must wait for a place in the next batch.

I am sorry, but I do not know the answer to that question. I can tell you what I do know: the
bridge was finished in the spring, it is about four hundred meters long, and it carries both cars
and trains. If you need the exact date, the city archive would be the best place to ask.

Please remember to save your work often. The program writes a backup every ten minutes, but a
power cut can still lose the changes you made since the last backup. Use the menu at the top of
the screen, or press the keys shown next to each command.

Memory is the first limit a large model meets. The weights must fit, and so must the cache that
holds the keys and values of every token the model has seen. A longer context needs a larger
cache, and many parallel requests need one cache each. When memory runs out, the server either
refuses new work or moves old work aside, and both show up in the measurements.

Here is a short summary of the meeting. We agreed to move the release to the second week of the
month. Anna will finish the documentation, Ben will test the installer on the older machines,
and Chen will write the notes for the support team. The next meeting is on Monday at ten.

The city has four seasons. Winter is short and wet, spring is mild, summer is hot and dry, and
autumn brings strong winds from the sea. Most visitors come in late spring, when the gardens are
in flower and the evenings are long enough to eat outside.

Why is the sky blue? Sunlight is made of many colors. When it passes through the air, the short
blue waves are scattered in all directions much more than the long red waves. So when we look at
any part of the sky away from the sun, we see mostly the scattered blue light.

To make a cup of tea, boil fresh water and pour it over the leaves. Green tea prefers water that
has cooled for a minute or two; black tea likes it hot. Let it steep for three to five minutes,
then remove the leaves so the tea does not turn bitter.

The model answered in a language that nobody had asked for. We looked at the prompt again and
found that the template had dropped the system message. Once the template was fixed, the answers
came back in English, and the scores on the test set rose by several points.

Every result file names the machine, the server, the model, and the version of each. Without
these, a number is only a number. With them, someone else can run the same test next year and
tell whether a change in speed came from the software or from the hardware.

My grandmother kept a small garden behind the house. She grew beans, tomatoes, onions, and a few
rows of flowers that she cut for the kitchen table. She said that a garden teaches patience,
because nothing you do today will show until next month.

The shop is on the corner of Market Street and Hill Road, next to the bakery. It sells maps,
notebooks, pens, and a small range of travel guides. Parking is difficult in the afternoon, so
most customers come on foot or take the number twelve bus, which stops right outside.

A careful reader asks three questions of any claim: who measured it, how did they measure it, and
what would they have seen if the claim were false? The third question is the hardest, and it is
the one that separates a test from a demonstration.

Yes, the package arrived this morning. The box was slightly damaged on one side, but everything
inside was fine. I have already set up the printer and it works well. Thank you for sending it so
quickly, and please pass my thanks on to the rest of the team.

Numbers we report: time to first token in milliseconds, tokens per second for each stream, total
tokens per second across all streams, the number of requests that failed, and the peak memory of
the server process. Each number comes with the count of samples it was computed from.

The river rises every spring when the snow melts in the hills. Farmers along its banks have built
low walls to keep the water out of their fields, and the town has a siren that sounds when the
level passes a mark on the old stone bridge.

Learning a new language takes time. Read a little every day, listen to people speaking it, and do
not be afraid of making mistakes. Most people will be glad that you are trying, and they will
help you find the word you are looking for.

It is raining in London, sunny in Madrid, and windy in Oslo. Tomorrow the rain moves east toward
Berlin and Warsaw, while the south stays warm and dry. Temperatures will fall by a few degrees
over the weekend, and there may be frost in the north on Sunday night.

The assistant should call a tool only when it needs information it does not have. If the user
asks for the weather, call the weather tool with the city name. If the user asks for a sum of two
numbers, just answer. After a tool returns, read its result and reply in plain words.
"""

CODE = '''\
def mean(values: list[float]) -> float:
    """The arithmetic mean; raises on an empty list instead of returning nan."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q / 100.0
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    weight = position - lower
    return ordered[lower] * (1.0 - weight) + ordered[upper] * weight


class Timer:
    """Measures wall time of a block with the monotonic clock."""

    def __init__(self) -> None:
        self.started = 0.0
        self.elapsed = 0.0

    def __enter__(self) -> "Timer":
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.monotonic() - self.started


async def stream_tokens(session, url: str, payload: dict) -> list[str]:
    tokens = []
    async with session.post(url, json=payload) as response:
        response.raise_for_status()
        async for line in response.content:
            text = line.decode("utf-8").strip()
            if not text.startswith("data: "):
                continue
            data = text[len("data: "):]
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices", []):
                delta = choice.get("delta", {})
                if delta.get("content"):
                    tokens.append(delta["content"])
    return tokens


def load_config(path: Path) -> dict:
    with path.open("r", encoding="utf-8") as handle:
        config = yaml.safe_load(handle) or {}
    if not isinstance(config, dict):
        raise TypeError(f"{path}: expected a mapping, got {type(config).__name__}")
    return config


for index, item in enumerate(items):
    if item is None:
        continue
    total += item.size
    print(f"{index:4d} {item.name:<20} {item.size:>10,d}")

while retries < max_retries:
    try:
        result = fetch(url, timeout=5.0)
        break
    except ConnectionError as error:
        retries += 1
        wait = min(2 ** retries, 30)
        logger.warning("attempt %d failed: %s; retrying in %ds", retries, error, wait)
        time.sleep(wait)
else:
    raise RuntimeError("gave up after %d attempts" % max_retries)

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Request:
    prompt: str
    max_tokens: int = 128
    temperature: float = 0.0
    stop: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"prompt": self.prompt, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "stop": self.stop}


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        print("usage: report.py RESULTS_DIR", file=sys.stderr)
        sys.exit(2)
    root = Path(args[0])
    for path in sorted(root.glob("*.json")):
        data = json.loads(path.read_text())
        print(path.stem, data["tokens_per_second"], data["ttft_ms"])

const total = items.reduce((sum, item) => sum + item.price * item.quantity, 0);
function formatPrice(value) {
  return new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(value);
}

SELECT name, COUNT(*) AS runs, AVG(tokens_per_second) AS speed
FROM results
WHERE model = 'tiny' AND failed = 0
GROUP BY name
ORDER BY speed DESC;

#!/bin/sh
set -eu
port=8080
./server --host 127.0.0.1 --port "$port" &
pid=$!
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.25; done
curl -s "http://127.0.0.1:$port/v1/models"
kill "$pid"
'''

TOOLS = """\
{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather \
for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", \
"description": "The city name, e.g. Paris"}, "unit": {"type": "string", "enum": ["celsius", \
"fahrenheit"]}}, "required": ["city"]}}}
{"type": "function", "function": {"name": "search_files", "description": "Search the project for \
files whose text matches a pattern.", "parameters": {"type": "object", "properties": {"pattern": \
{"type": "string"}, "path": {"type": "string", "description": "A folder to search in"}, \
"max_results": {"type": "integer", "minimum": 1, "maximum": 100}}, "required": ["pattern"]}}}
{"type": "function", "function": {"name": "read_file", "description": "Read a text file.", \
"parameters": {"type": "object", "properties": {"path": {"type": "string"}, "start_line": \
{"type": "integer"}, "end_line": {"type": "integer"}}, "required": ["path"]}}}
{"type": "function", "function": {"name": "run_command", "description": "Run a shell command and \
return its output.", "parameters": {"type": "object", "properties": {"command": {"type": \
"string"}, "timeout_seconds": {"type": "number"}}, "required": ["command"]}}}
{"type": "function", "function": {"name": "convert_currency", "description": "Convert an amount \
between currencies.", "parameters": {"type": "object", "properties": {"amount": {"type": \
"number"}, "from": {"type": "string"}, "to": {"type": "string"}}, "required": ["amount", "from", \
"to"]}}}
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
{"name": "search_files", "arguments": {"pattern": "def main", "path": "src", "max_results": 20}}
{"name": "read_file", "arguments": {"path": "README.md", "start_line": 1, "end_line": 40}}
{"name": "run_command", "arguments": {"command": "ls -la", "timeout_seconds": 10}}
{"name": "convert_currency", "arguments": {"amount": 125.5, "from": "EUR", "to": "JPY"}}
{"temperature": 18.5, "unit": "celsius", "conditions": "partly cloudy", "humidity": 0.62}
{"matches": [{"path": "src/app.py", "line": 12}, {"path": "src/cli.py", "line": 3}], "truncated": false}
{"stdout": "total 8\\ndrwxr-xr-x 2 user user 4096 .\\n", "stderr": "", "exit_code": 0}
{"error": {"message": "The model does not exist", "type": "invalid_request_error", "code": 404}}
{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": \
{"content": "Hello"}, "finish_reason": null}]}
{"usage": {"prompt_tokens": 42, "completion_tokens": 128, "total_tokens": 170}}
"""
