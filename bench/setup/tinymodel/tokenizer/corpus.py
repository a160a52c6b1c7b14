"""The tokenizer's training corpus: the hand-written text plus dialogues generated from it.

The generated part gives BPE enough repeated chat and tool-call structure to fill a 2048-token
vocabulary. It uses no random module and no hashing of Python objects, only index arithmetic, so
the corpus is the same string on every machine and every Python version: that, together with
pinned package versions, is what makes the tiny model byte-identical everywhere.
"""

from __future__ import annotations

import json

from bench.setup.tinymodel.tokenizer.text import CODE, PROSE, TOOLS

CITIES = (
    "Paris", "London", "Madrid", "Oslo", "Berlin", "Warsaw", "Lisbon", "Rome", "Vienna", "Prague",
    "Dublin", "Athens", "Helsinki", "Tokyo", "Seoul", "Sydney", "Toronto", "Chicago", "Denver", "Lima",
)
CONDITIONS = ("sunny", "cloudy", "raining", "windy", "foggy", "snowing", "partly cloudy", "clear")
QUESTIONS = (
    "What is the weather in {city} today?",
    "Is it going to rain in {city}?",
    "How warm is it in {city} right now?",
    "Should I take a coat in {city} this evening?",
)
FILES = ("README.md", "src/app.py", "src/server.py", "tests/test_app.py", "docs/usage.md", "setup.cfg")
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _pick(options: tuple[str, ...], index: int, stride: int) -> str:
    """Walks `options` with a stride coprime to most lengths, so pairings vary without randomness."""
    return options[(index * stride + index // len(options)) % len(options)]


def _weather_dialogue(i: int) -> str:
    city = _pick(CITIES, i, 7)
    condition = _pick(CONDITIONS, i, 3)
    temperature = (i * 37) % 35 - 5
    call = {"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}}
    result = {"city": city, "temperature": temperature, "unit": "celsius", "conditions": condition}
    return (
        f"user: {_pick(QUESTIONS, i, 5).format(city=city)}\n"
        f"assistant:\n<tool_call>\n{json.dumps(call)}\n</tool_call>\n"
        f"user:\n<tool_response>\n{json.dumps(result)}\n</tool_response>\n"
        f"assistant: In {city} it is {condition} and {temperature} degrees Celsius at the moment.\n"
    )


def _file_dialogue(i: int) -> str:
    path = _pick(FILES, i, 5)
    first, last = 1 + i % 40, 41 + (i * 13) % 200
    call = {"name": "read_file", "arguments": {"path": path, "start_line": first, "end_line": last}}
    return (
        f"user: Please show me lines {first} to {last} of {path}.\n"
        f"assistant:\n<tool_call>\n{json.dumps(call)}\n</tool_call>\n"
        f"user:\n<tool_response>\n{json.dumps({'path': path, 'lines': last - first + 1})}\n</tool_response>\n"
        f"assistant: Here are the {last - first + 1} lines of {path} that you asked for.\n"
    )


def _arithmetic_dialogue(i: int) -> str:
    a, b = (i * 17) % 100, (i * 29) % 100
    words = f"{NUMBER_WORDS[a % 11]} and {NUMBER_WORDS[b % 11]}"
    return (
        f"user: What is {a} plus {b}? And what do you get when you add {words}?\n"
        f"assistant: {a} plus {b} is {a + b}. Adding {words} gives {a % 11 + b % 11}.\n"
    )


def generated(count: int = 50) -> list[str]:
    """`count` rounds of three dialogue kinds (~40 KB at the default)."""
    makers = (_weather_dialogue, _file_dialogue, _arithmetic_dialogue)
    return [make(i) for i in range(count) for make in makers]


def corpus() -> list[str]:
    """Every training document, in a fixed order."""
    hand_written = [block for text in (PROSE, CODE, TOOLS) for block in text.split("\n\n")]
    return hand_written + generated()
