"""Build the tiny model (HF folder + GGUF) and keep one built copy per recipe in the model cache.

Everything is derived from the shipped corpus, the template and fixed seeds, so two builds with the
same package versions are byte-identical; `digest` lets results name exactly which model they used.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from filelock import FileLock

from bench.base.files import atomic_write
from bench.base.paths import models_dir
from bench.setup.tinymodel.hf import json_bytes, write_hf
from bench.setup.tinymodel.template import chat_template
from bench.setup.tinymodel.to_gguf import write_gguf
from bench.setup.tinymodel.tokenizer.bpe import train_tokenizer, vocabulary
from bench.setup.tinymodel.weights import hf_weights

RECIPE_VERSION = "2"  # bump on any change to what build() writes: the cache is keyed by it
MARKER = "tiny.json"  # written last; a directory without it is an interrupted build
HF_DIR = "hf"
GGUF_FILE = "tiny.gguf"
# The packages whose versions decide the bytes; recorded in the marker to explain a changed digest.
BUILD_PACKAGES = ("tokenizers", "numpy", "safetensors", "gguf")


@dataclass(frozen=True)
class TinyModel:
    root: Path
    hf_dir: Path
    gguf_path: Path
    digest: str  # sha256 over the names and bytes of every model file


def _model_files(root: Path) -> list[Path]:
    return sorted([*(root / HF_DIR).iterdir(), root / GGUF_FILE])


def _digest(root: Path) -> str:
    sha = hashlib.sha256()
    for path in _model_files(root):
        content = path.read_bytes()
        # Name and length first, so moving bytes between files cannot keep the digest.
        sha.update(f"{path.relative_to(root).as_posix()}\0{len(content)}\0".encode())
        sha.update(content)
    return sha.hexdigest()


def build(out_dir: Path) -> TinyModel:
    """Write the model into `out_dir` (created if needed); deterministic, about a second."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer()
    template = chat_template()
    weights = hf_weights()
    write_hf(out_dir / HF_DIR, tokenizer, weights, template)
    write_gguf(out_dir / GGUF_FILE, vocabulary(tokenizer), weights, template)
    return TinyModel(root=out_dir, hf_dir=out_dir / HF_DIR, gguf_path=out_dir / GGUF_FILE, digest=_digest(out_dir))


def cache_dir() -> Path:
    return models_dir() / f"tiny-{RECIPE_VERSION}"


def _cached(root: Path) -> TinyModel | None:
    try:
        record = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    model = TinyModel(root=root, hf_dir=root / HF_DIR, gguf_path=root / GGUF_FILE, digest=record.get("digest", ""))
    if not (model.digest and model.hf_dir.is_dir() and model.gguf_path.is_file()):
        return None
    return model


def ensure_tiny_model() -> TinyModel:
    """The cached build for this recipe, building it first if needed (once per machine)."""
    root = cache_dir()
    found = _cached(root)
    if found is not None:
        return found
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root.parent / f"{root.name}.lock")):
        found = _cached(root)  # another process may have built it while we waited
        if found is not None:
            return found
        shutil.rmtree(root, ignore_errors=True)  # leftovers of a killed build
        started = time.monotonic()
        model = build(root)
        record = {
            "recipe": RECIPE_VERSION,
            "digest": model.digest,
            "build_seconds": round(time.monotonic() - started, 2),
            "packages": {name: metadata.version(name) for name in BUILD_PACKAGES},
        }
        atomic_write(root / MARKER, json_bytes(record))
        return model
