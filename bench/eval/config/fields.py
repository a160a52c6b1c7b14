"""Reading a YAML mapping field by field: each value checked for its type and range, and every
failure an `EvalConfigError` that names the file and the field's path (`rows[3].client`).

The eval config's loader (bench.eval.config.loader) reads its own fields with these checks; unknown
keys fail in `mapping`, so a typo never silently drops a setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.eval.config.schema import EvalConfigError


class FieldReader:
    def __init__(self, source: Path):
        self.source = source

    def fail(self, where: str, problem: str) -> EvalConfigError:
        return EvalConfigError(f"eval config {self.source}: {where}: {problem}")

    def mapping(self, value: Any, where: str, allowed: tuple[str, ...] | None = None) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(where, f"keys must be strings, got {key!r}")
            if allowed is not None and key not in allowed:
                raise self.fail(f"{where}.{key}", f"unknown field; allowed: {', '.join(allowed)}")
        return value

    def text(self, data: dict, key: str, where: str) -> str:
        """A required non-empty string."""
        if key not in data:
            raise self.fail(f"{where}.{key}" if where else key, "is required")
        return self.optional_text(data, key, where) or ""

    def optional_text(self, data: dict, key: str, where: str) -> str | None:
        """A non-empty string, or None when the key is absent."""
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{where}.{key}" if where else key, f"must be a non-empty string, got {value!r}")
        return value

    def number(self, data: dict, key: str, where: str, default, *, integer: bool, minimum: float):
        value = data.get(key, default)
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if value is not None and (isinstance(value, bool) or not ok_type or value < minimum):
            kind = "an integer" if integer else "a number"
            raise self.fail(f"{where}.{key}", f"must be {kind} >= {minimum}, got {value!r}")
        return value

    def env(self, value: Any, where: str) -> dict[str, str]:
        env = self.mapping(value, where)
        bad = [k for k, v in env.items() if not isinstance(v, (str, int, float)) or isinstance(v, bool)]
        if bad:
            raise self.fail(f"{where}.{bad[0]}", "must be a string or number")
        return {k: str(v) for k, v in env.items()}

    def text_list(self, data: dict, key: str, where: str = "") -> tuple[str, ...]:
        value = data.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.fail(f"{where}{key}", "must be a list of non-empty strings")
        return tuple(value)
