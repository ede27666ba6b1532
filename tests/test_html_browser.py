"""The html report in a real browser: Debian's headless chromium driven by chromedriver (selenium).

A small real experiment (two memcpy implementations swept over size and alignment, and a loop
timed and counted, two variants) goes through `flagbench run` into a store; `flagbench report
--format html` and `flagbench demo` (which resumes the same run) write the pages. Each page must
load with no console error and no network request, its plots must have a size on screen, and a
symbol named like markup must show as text. Screenshots land in the test's tmp dir.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import flagbench_isolated as flagbench

from flagbench.store import Store

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
pytestmark = [pytest.mark.slow,   # a headless browser
              pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                                 reason="chromium and chromium-driver are installed by scripts/install-deps")]
HOSTILE = "<script>alert(1)</script>|`x`"

COPIES_C = r"""
#include <stddef.h>
#include <stdint.h>
void *copy_bytes(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	while (n--)
		*d++ = *s++;
	return dst;
}
typedef uint64_t __attribute__((may_alias, aligned(1))) uword_t;
void *copy_words(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	for (; n >= 8; n -= 8, d += 8, s += 8)
		*(uword_t *)d = *(const uword_t *)s;
	while (n--)
		*d++ = *s++;
	return dst;
}
uint64_t spin(uint64_t n)
{
	uint64_t acc = 1;
	for (uint64_t i = 0; i < n; i++) {
		__asm__ volatile(".rept " XSTR(WORK) "\n\tnop\n\t.endr");
		acc = acc * 3 + i;
	}
	return acc;
}
"""




@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """(report.html, demo.html) from one real run."""
    root = tmp_path_factory.mktemp("html")
    case = root / "cases" / "tiny"
    case.mkdir(parents=True)
    (case / "copies.c").write_text("#define STR(x) #x\n#define XSTR(x) STR(x)\n" + COPIES_C)
    (case / "experiment.toml").write_text(textwrap.dedent("""
        description = "two copies and a loop, default vs more nops"
        sources = ["copies.c"]
        targets = ["x86_64"]
        compilers = ["gcc"]
        cflags = ["-O1", "-fno-builtin"]
        show = ["spin"]

        [variants]
        base = { defines = { WORK = 0 } }
        more = { defines = { WORK = 4 } }

        [[bench]]
        name = "spin"
        kind = "micro"
        function = "spin"
        metrics = ["time", "insns"]
        samples = 6

        [[bench]]
        name = "copies"
        kind = "memcpy"
        functions = ["copy_bytes", "copy_words"]
        sizes = [32, 4096]
        alignments = [[0, 0], [3, 1]]
        metrics = ["time"]
        samples = 6
        """))
    db = root / "fb.db"
    done = flagbench("run", str(case), "--db", str(db), cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    with Store(db) as store:   # a name that is markup, stored as any sample is
        run_id = store.runs()[-1]["id"]
        for i in range(6):
            for variant, value in (("base", 10.0 + i), ("more", 12.0 + i)):
                store.add_sample(run_id, HOSTILE, f"{variant}/x86_64/gcc", "ns_per_iter", value, unit="ns",
                                 executor="native")
    report = root / "report.html"
    done = flagbench("report", "--db", str(db), "--format", "html", "-o", str(report), cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    demo = root / "out" / "demo.md"
    done = flagbench("demo", "tiny", "--cases-dir", str(root / "cases"), "--db", str(db), "--out", str(demo),
                     cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    return report, demo.with_suffix(".html")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def _open(driver, page: Path, shot: Path) -> dict:
    driver.get_log("performance")   # drop what an earlier page logged
    driver.get_log("browser")
    driver.get(page.as_uri())
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 40, 16000))
    driver.save_screenshot(str(shot))
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    return {"console": driver.get_log("browser"), "requests": requests}


def _no_network(seen: dict, page: Path) -> None:
    """The log saw the page itself load (so it does record requests), and nothing else went out."""
    assert page.as_uri() in seen["requests"]
    assert [u for u in seen["requests"] if u.split(":", 1)[0] in ("http", "https", "ws", "wss", "ftp")] == []


def _visible_plots(driver) -> list:
    plots = driver.find_elements("css selector", "svg.plot")
    return [p for p in plots if p.size["width"] > 50 and p.size["height"] > 50]


def test_pages_in_chromium(pages, browser, tmp_path_factory):
    """One test, so pytest-xdist builds the pages and starts the browser once."""
    _report_page(pages, browser, tmp_path_factory)
    _demo_page(pages, browser, tmp_path_factory)


def _report_page(pages, browser, tmp_path_factory):
    report, _ = pages
    shot = tmp_path_factory.mktemp("shots") / "report.png"
    seen = _open(browser, report, shot)
    assert [e for e in seen["console"] if e["level"] in ("SEVERE", "WARNING")] == []
    _no_network(seen, report)
    plots = _visible_plots(browser)
    # the sweep: aligned and unaligned panels; the loop and the hostile bench: a forest each
    assert len(plots) >= 4, [p.get_attribute("outerHTML")[:200] for p in plots]
    lines = browser.find_elements("css selector", "svg.plot polyline.series")
    assert len(lines) == 2 * 4 and all(line.size["width"] > 0 for line in lines)   # 2 panels x 4 columns
    intervals = browser.find_elements("css selector", "svg.plot line.ci")
    assert intervals and all(i.size["width"] > 0 for i in intervals)
    # the markup-looking bench name is text on the page, and ran nothing
    assert HOSTILE in browser.find_element("tag name", "main").text
    assert browser.execute_script("return document.scripts.length") == 0
    assert shot.stat().st_size > 10_000


def _demo_page(pages, browser, tmp_path_factory):
    """The demo page: summary links resolve, size bars drawn."""
    _, demo = pages
    shot = tmp_path_factory.mktemp("shots") / "demo.png"
    seen = _open(browser, demo, shot)
    assert [e for e in seen["console"] if e["level"] in ("SEVERE", "WARNING")] == []
    _no_network(seen, demo)
    links = browser.find_elements("css selector", "table a[href^='#']")
    assert links
    for link in links:   # every summary number points at something on the page
        target = link.get_attribute("href").split("#", 1)[1]
        assert browser.find_elements("id", target), target
    bars = browser.find_elements("css selector", "svg.plot rect.bar")
    assert bars and all(b.size["height"] > 0 for b in bars)
    assert len(_visible_plots(browser)) >= 3
    if shutil.which("file"):
        assert "PNG image" in subprocess.run(["file", str(shot)], capture_output=True, text=True).stdout
