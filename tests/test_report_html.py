"""The HTML report in a real headless browser (Debian's Chromium at /usr/bin/chromium): it loads
with no console message at all (the page has no script, and its Content Security Policy makes the
browser log any attempt to load something), the DOM holds the grid, and a screenshot shows the
grid's colours. CI installs the browser (`apt-get install -y chromium`); elsewhere these skip."""

from __future__ import annotations

import json
import os
import re
import subprocess
import types
from pathlib import Path

import pytest

from retire.core.project import Project
from retire.packs import store
from retire.report import weekly as report
from retire.report.vocabulary import OUTCOMES
from tests.conftest import ROOT
from tests.support import png
from tests.support.reportshop import (
    NOW,
    TRICKY_TITLE,
    build_shop,
    per_lane_verdicts,
    sample_bisections,
)

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    # each test starts a browser
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install -y chromium)",
    ),
]


def chromium(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        page.as_uri(),
    ]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("http_", "https_", "HTTP_", "HTTPS_"))
    }
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def console_messages(stderr: str) -> list[str]:
    """What the page said on the console (script errors, CSP refusals, console.* calls)."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]\d*", line)]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = build_shop(tmp_path_factory.mktemp("html") / "shop", beta_title=TRICKY_TITLE)
    # The committed catalogue's real filing queue: a table and long blocker lists to lay out.
    queue = types.SimpleNamespace(
        filing_queue=lambda _: store.filing_queue(ROOT), markdown_section=store.markdown_section
    )
    # with every section: per-lane steps, blockers, bisections, a title with Markdown in it
    written = report.generate(
        Project(root),
        now=NOW,
        verdicts=per_lane_verdicts(),
        packs=queue,
        bisect=lambda _: sample_bisections(),
    )
    return written.paths[1]


def test_the_console_check_can_fail(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!doctype html><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        '<p>x</p><img src="http://127.0.0.1:9/x.png">'
    )
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
    done = chromium(
        tmp_path, page, f"--screenshot={shot}", "--window-size=1400,2600", "--hide-scrollbars"
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    # the outcomes the shop has
    shown = ("needed", "upstream-fixed", "shim-broken", "skipped")
    wanted = {png.hex_colour(OUTCOMES[o].colour): o for o in shown}
    counts = png.colour_counts(shot.read_bytes(), wanted)
    # A 26 px cell is ~600 solid pixels (less its glyph); a stray anti-aliased pixel is not a cell.
    assert {wanted[c]: n for c, n in counts.items() if n < 200} == {}
    # no crashed cell in the shop: not on screen
    absent = png.hex_colour(OUTCOMES["crashed"].colour)
    # its legend swatch only
    assert png.colour_counts(shot.read_bytes(), [absent])[absent] < 200


# Measured in the page by a script added to a copy of it (the report itself has none, and its
# Content Security Policy would refuse one): what overflows the viewport outside a scroll box,
# what is clipped, and the WCAG contrast of every element's own text against what is behind it.
LAYOUT_SCRIPT = """
<script>
(function () {
  function rgb(text) { var m = text.match(/[\\d.]+/g) || []; return m.map(Number); }
  function lum(c) {
    var v = c.slice(0, 3).map(function (x) {
      x /= 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  }
  function behind(el) {
    for (var e = el; e; e = e.parentElement) {
      var c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.99)) return c;
    }
    return [255, 255, 255];
  }
  var width = document.documentElement.clientWidth, overflow = [], clipped = [], contrast = [];
  document.querySelectorAll("body *").forEach(function (el) {
    var r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    var name = el.tagName.toLowerCase()
      + (el.className && el.className.baseVal === undefined ? "." + el.className : "")
      + (el.id ? "#" + el.id : "");
    var inGrid = el.closest(".grid-wrap"), wider = el.scrollWidth > el.clientWidth + 1;
    if (!inGrid && r.width > 0 && r.right > width + 1)
      overflow.push(name + " ends at " + Math.round(r.right));
    if (!inGrid && el.clientWidth > 0 && wider && cs.overflowX === "visible")
      overflow.push(name + " holds text " + el.scrollWidth + " px wide in " + el.clientWidth);
    if ((cs.overflowX === "hidden" || cs.textOverflow === "ellipsis") && wider) clipped.push(name);
    var own = Array.prototype.some.call(el.childNodes, function (n) {
      return n.nodeType === 3 && n.textContent.trim();
    });
    if (own && cs.visibility !== "hidden" && r.width > 0) {
      var fore = el.namespaceURI === "http://www.w3.org/2000/svg" ? rgb(cs.fill) : rgb(cs.color);
      var a = lum(fore), b = lum(behind(el));
      var ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < 4.5)
        contrast.push(name + " " + cs.color + " on " + behind(el) + ": " + ratio.toFixed(2));
    }
  });
  // Short words split across two lines ("sourc" / "e-patch"): a break inside a word of up to 18
  // characters between spaces, hyphens and slashes. Long tokens (URLs, hashes) may wrap.
  var broken = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (var node = walker.nextNode(); node; node = walker.nextNode()) {
    // a long token marked breakable (.brk) may wrap anywhere
    var skip = ".grid-wrap table.grid, svg, .brk";
    if (!node.parentElement || node.parentElement.closest(skip)) continue;
    var re = /[^\\s\\-\\/]+/g, m;
    while ((m = re.exec(node.textContent)) !== null) {
      if (m[0].length > 18) continue;
      var range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      var tops = {};
      Array.prototype.forEach.call(range.getClientRects(), function (rect) {
        if (rect.width > 0) tops[Math.round(rect.top)] = true;
      });
      if (Object.keys(tops).length > 1) broken.push(m[0] + " in " + node.parentElement.tagName);
    }
  }
  var found = {width: width, scroll: document.documentElement.scrollWidth,
               overflow: overflow, clipped: clipped, contrast: contrast, broken: broken};
  parent.postMessage(JSON.stringify(found), "*");
})();
</script>
"""


def measured(page: Path, tmp_path: Path, width: int, script: str = LAYOUT_SCRIPT) -> dict:
    """The page laid out in a frame ``width`` CSS pixels wide (headless windows have a minimum
    width; a frame has none, and its media queries see its own width, as a phone's would)."""
    probe = tmp_path / f"measure-{width}.html"
    text = re.sub(
        r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text(encoding="utf-8")
    )
    probe.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
    frame = tmp_path / f"frame-{width}.html"
    frame.write_text(
        f'<!doctype html><body style="margin:0"><pre id="layout-check"></pre>'
        f'<iframe src="{probe.name}" style="width:{width}px;height:900px;border:0"></iframe>'
        '<script>addEventListener("message", function (e) {'
        ' document.getElementById("layout-check").textContent = e.data; });</script></body>'
    )
    done = chromium(
        tmp_path,
        frame,
        "--dump-dom",
        f"--window-size={width + 100},1000",
        "--virtual-time-budget=5000",
        "--allow-file-access-from-files",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, done.stdout[-2000:]
    return json.loads(
        found.group(1)
        .replace("&quot;", '"')
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
    )


@pytest.mark.parametrize("width", [390, 1280, 1400])
def test_layout_holds_at_phone_width_with_nothing_clipped(page, tmp_path, width):
    found = measured(page, tmp_path, width)
    assert found["width"] <= width
    # no sideways scrolling of the page itself
    assert found["scroll"] <= found["width"], found
    # only the lane grid scrolls, inside its own box
    assert found["overflow"] == [], found["overflow"]
    assert found["clipped"] == [], found["clipped"]
    # no short word split mid-word ("sourc e-patch" in the shims table at 1280 px)
    assert found["broken"] == [], "; ".join(found["broken"])


def test_every_text_has_contrast_of_at_least_4_5(page, tmp_path):
    assert measured(page, tmp_path, 1400)["contrast"] == []


def test_the_filing_queue_is_rendered_not_raw_markdown(page, tmp_path):
    done = chromium(tmp_path, page, "--dump-dom")
    section = done.stdout[done.stdout.index('<section id="filing-queue">') :]
    section = section[: section.index("</section>")]
    assert (
        "<pre>" not in section
        and "<table" in section
        and "<code>" in section
        and "|---|" not in section
    )


# Where things are, measured in the page as above: each section's top edge, and each lane
# header's right edge against the width the page has.
PLACES_SCRIPT = """
<script>
(function () {
  var found = {width: document.documentElement.clientWidth, sections: {}, lanes: []};
  document.querySelectorAll("section[id]").forEach(function (el) {
    found.sections[el.id] = Math.round(el.getBoundingClientRect().top);
  });
  document.querySelectorAll("#lanes table.grid th.lane").forEach(function (el) {
    if (el.offsetParent !== null) found.lanes.push(Math.round(el.getBoundingClientRect().right));
  });
  parent.postMessage(JSON.stringify(found), "*");
})();
</script>
"""

#: A dozen lanes, named as shops name them.
MANY_LANES = (
    "cpu",
    "stable",
    "nightly",
    "floor",
    "mamba3",
    "megatron-main",
    "torch2.11-te2.20",
    "torch2.10-te2.18",
    "h200-overlay",
    "rocm6.4",
    "cu130-preview",
    "py3.13-free",
)


@pytest.fixture(scope="module")
def wide_page(tmp_path_factory) -> Path:
    """The shop's report with beta carried on a dozen lanes."""
    from retire.verdicts.model import LaneVerdict, Verdict

    verdicts = per_lane_verdicts()
    beta = verdicts[1]
    lanes = tuple(
        LaneVerdict(name, "unknown", "nothing decides this lane yet", action="run it")
        for name in MANY_LANES
    )
    verdicts[1] = Verdict(beta.shim, beta.decision, beta.why, lanes=MANY_LANES, lane_verdicts=lanes)
    root = build_shop(tmp_path_factory.mktemp("wide") / "shop")
    written = report.generate(Project(root), now=NOW, verdicts=verdicts, packs=None)
    return written.paths[1]


def test_the_first_screen_at_1280_shows_what_needs_a_person(page, tmp_path):
    """Blocked, ready to retire and the attention list start within the first 800 px; the
    screenshot of that screen is kept with the test's files."""
    shot = tmp_path / "first-screen-1280.png"
    done = chromium(
        tmp_path, page, f"--screenshot={shot}", "--window-size=1280,800", "--hide-scrollbars"
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    tops = measured(page, tmp_path, 1280, PLACES_SCRIPT)["sections"]
    for name in ("blocked", "ready", "attention"):
        assert tops[name] < 800, (name, tops)
    # and before the matrices and tables that need no one
    assert max(tops[n] for n in ("blocked", "ready", "attention")) < min(
        tops[n] for n in ("lanes", "matrix", "shims", "evidence")
    ), tops


def test_a_dozen_lanes_are_all_in_view_at_390(wide_page, tmp_path):
    found = measured(wide_page, tmp_path, 390, PLACES_SCRIPT)
    # beta's dozen and alpha's gpu
    assert len(found["lanes"]) == len(MANY_LANES) + 1
    assert max(found["lanes"]) <= found["width"], found


# ---------------------------------------------------------------------------------------------
# issue 36: the first screen of a fresh adoption's first report, on a desktop and on a phone


@pytest.fixture(scope="module")
def fresh_page(tmp_path_factory) -> Path:
    """A shop's first report right after `patchlane init` and `shim new`: its history has
    commits, none touching shims/ yet; nothing is blocked; evidence from the cache only."""
    from tests.conftest import run_cli
    from tests.support.gitrepos import git

    root = tmp_path_factory.mktemp("fresh") / "shop"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# shop\n")
    git(root, "add", "README.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the shop")
    assert run_cli(root, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0")[0] == 0
    assert run_cli(root, "shim", "new", "my_fix", "--owner", "k@example.org")[0] == 0
    assert run_cli(root, "report", "--no-probe", "--week", "2026-W50")[0] == 0
    return root / "reports" / "2026-W50.html"


def _frame_screenshot(page: Path, tmp_path: Path, width: int, height: int) -> Path:
    """A screenshot of the page in a frame ``width`` CSS pixels wide (a phone's width: headless
    windows have a minimum width, a frame has none)."""
    frame = tmp_path / f"shot-frame-{width}.html"
    frame.write_text(
        f'<!doctype html><body style="margin:0"><iframe src="{page.as_uri()}" '
        f'style="width:{width}px;height:{height}px;border:0;display:block"></iframe></body>'
    )
    shot = tmp_path / f"first-screen-{width}.png"
    done = chromium(
        tmp_path,
        frame,
        f"--screenshot={shot}",
        f"--window-size={max(width, 500)},{height}",
        "--hide-scrollbars",
        "--allow-file-access-from-files",
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return shot


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_the_first_screen_of_a_fresh_adoption_shows_the_to_do(fresh_page, tmp_path, width, height):
    """No empty card ("Blocked: None"); the to-do within the first screen, at 1280 px and at
    390 px; advice ("no commit touches shims/ yet") styled as advice, after the to-do. The
    screenshot of that screen is kept with the test's files."""
    _frame_screenshot(fresh_page, tmp_path, width, height)
    text = fresh_page.read_text()
    assert 'id="blocked"' not in text and "None: no lane" not in text
    tops = measured(fresh_page, tmp_path, width, PLACES_SCRIPT)["sections"]
    # the to-do's heading and its first line are on the first screen
    assert tops["attention"] + 80 < height, (width, tops)
    assert tops["attention"] < tops["advice"] < tops["lanes"], tops
    advice = text[text.index('<section id="advice">') :]
    advice = advice[: advice.index("</section>")]
    assert '<blockquote class="note">' in advice and "no commit touches shims/ yet" in advice
    assert 'id="notes"' not in text and 'class="warning"' not in text
