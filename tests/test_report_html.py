"""The HTML report in a real headless browser (Debian's Chromium at /usr/bin/chromium): it loads
with no console message at all (the page has no script, and its Content Security Policy makes the
browser log any attempt to load something), the DOM holds the grid, and a screenshot shows the
grid's colours. CI installs the browser (`apt-get install -y chromium`); elsewhere these skip."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from retire.report import weekly as report
from retire.core.project import Project
from retire.report.vocabulary import OUTCOMES
from tests.support import png
from tests.support.reportshop import NOW, build_shop, shop_verdicts

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install -y chromium)")


def chromium(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
        "--enable-logging=stderr", "--v=0", *extra, page.as_uri(),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("http_", "https_", "HTTP_", "HTTPS_"))}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL, check=False)


def console_messages(stderr: str) -> list[str]:
    """What the page said on the console (script errors, CSP refusals, console.* calls)."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]\d*", line)]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = build_shop(tmp_path_factory.mktemp("html") / "shop")
    written = report.generate(Project(root), now=NOW, verdicts=shop_verdicts(), packs=None)
    return written.paths[1]


def test_the_console_check_can_fail(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">"
                   "<p>x</p><img src=\"http://127.0.0.1:9/x.png\">")
    done = chromium(tmp_path, bad, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert any("127.0.0.1:9" in line for line in console_messages(done.stderr))


def test_report_page_loads_without_console_messages_and_has_the_grid(page, tmp_path):
    done = chromium(tmp_path, page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    dom = done.stdout
    assert '<table class="grid">' in dom
    assert dom.count('class="o-') >= 6
    assert "Shim retirement report — 2026-W47" in dom and "<svg" in dom


def test_screenshot_shows_the_grid_colours(page, tmp_path):
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1400,1800", "--hide-scrollbars")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    shown = ("needed", "upstream-fixed", "shim-broken", "skipped")  # the outcomes the shop has
    wanted = {png.hex_colour(OUTCOMES[o].colour): o for o in shown}
    counts = png.colour_counts(shot.read_bytes(), wanted)
    # A 26 px cell is ~600 solid pixels (less its glyph); a stray anti-aliased pixel is not a cell.
    assert {wanted[c]: n for c, n in counts.items() if n < 200} == {}
    absent = png.hex_colour(OUTCOMES["crashed"].colour)  # no crashed cell in the shop: not on screen
    assert png.colour_counts(shot.read_bytes(), [absent])[absent] < 200  # its legend swatch only
