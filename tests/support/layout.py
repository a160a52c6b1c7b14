"""A page's layout as headless Chromium draws it: the boxes of the elements a person would look at.

`boxes(page, selectors, clicks)` loads `page` in an iframe of a harness page beside it (same origin:
Chromium runs with --allow-file-access-from-files), clicks the elements `clicks` name in order (a
column header, say), then writes each selector's elements' boxes (x, y, width, height in CSS px at a
1200 px wide frame), whether each is shown, and its text, into the harness's DOM, which
`--dump-dom` prints. Presence and layout, not pixels: a test asserts what is there, where, and in
which order, so a font or antialiasing change never fails it.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HARNESS = """<!doctype html><html><body>
<iframe id="page" src="{page}" style="width:1200px;height:2000px;border:0"></iframe><pre id="boxes"></pre>
<script>
const selectors = {selectors}, clicks = {clicks};
document.getElementById("page").addEventListener("load", () => {{
  const d = document.getElementById("page").contentDocument;
  for (const sel of clicks) d.querySelector(sel).click();
  const out = {{}};
  for (const sel of selectors) out[sel] = [...d.querySelectorAll(sel)].map((e) => {{
    const r = e.getBoundingClientRect(), s = d.defaultView.getComputedStyle(e);
    const shown = s.display !== "none" && s.visibility !== "hidden" && r.width > 0;
    return {{x: r.x, y: r.y, w: r.width, h: r.height, shown, text: e.textContent.trim().slice(0, 200)}};
  }});
  document.getElementById("boxes").textContent = JSON.stringify(out);
}});
</script></body></html>"""


def boxes(chromium: str, page: Path, selectors: list[str], clicks: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    page = page.resolve()
    harness = page.with_name(f".layout-{page.stem}.html")
    harness.write_text(HARNESS.format(page=page.name, selectors=json.dumps(selectors), clicks=json.dumps(clicks)))
    try:
        with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
            done = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--allow-file-access-from-files", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
                 "--window-size=1250,2100", "--dump-dom", harness.as_uri()],
                capture_output=True, text=True, timeout=120)
    finally:
        harness.unlink()
    found = re.search(r'<pre id="boxes">(.*?)</pre>', done.stdout, re.S)
    assert found and found.group(1), f"no layout read back: {done.stderr[-2000:]}"
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return json.loads(text)


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two boxes share any area."""
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])
