"""Open every page of a built site in headless Chromium and list what is wrong: a page that does not load, a
console error, a request to another host, a broken internal link or anchor, an image that does not load, a
chapter page without plots. Used by tests/test_site.py; `python tests/site_check.py SITE SHOTS` runs it
alone."""

import functools
import http.server
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse


def serve(folder):
    "An HTTP server for `folder` on a free localhost port, in a background thread."

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


TABS = 4  # pages loading at once: their network-idle waits (half a second each) overlap


def _tab(browser, base):
    "A new page and the list its listeners fill: console errors, page errors, failed or foreign requests."
    page, errors = browser.new_page(), []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on(
        "request",
        lambda r: (
            errors.append(f"request to another host: {r.url}")
            if not r.url.startswith(base) and not r.url.startswith("data:")
            else None
        ),
    )
    return page, errors


def _page_problems(page, rel, resp, site, base, html) -> list:
    """What is wrong with the loaded page `rel`: its status, its images, its internal links and anchors, its
    plots. `html(path)`: a page's text."""
    problems = [] if resp is not None and resp.status == 200 else [f"{rel}: HTTP {resp and resp.status}"]
    imgs = page.eval_on_selector_all(
        "img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])"
    )
    problems += [f"{rel}: image {src} did not load" for src, ok in imgs if not ok]
    for h in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
        if not h.startswith(base):
            continue
        u = urlparse(h)
        target = site / unquote(u.path[len(urlparse(base).path) :])
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            problems.append(f"{rel}: broken link {h}")
        elif u.fragment and target.suffix == ".html" and f'id="{unquote(u.fragment)}"' not in html(target):
            problems.append(f"{rel}: missing anchor {h}")
    chapter = rel.startswith("nbs/0") and not rel.startswith("nbs/00")
    wide = page.eval_on_selector_all(
        "div.cell_input pre", "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).length"
    )
    if chapter and wide:
        problems.append(f"{rel}: {wide} code cell(s) wider than the column")
    if chapter and not any(src and ("png" in src or src.startswith("data:")) for src, _ in imgs):
        problems.append(f"{rel}: a chapter page without plots")
    return problems


def check(site, shots, chromium="/usr/bin/chromium"):
    """(pages, problems) of the site in `site`; screenshots of the index and chapter 03, in English and in
    Korean, and of one of chapter 03's solutions unfolded go to `shots` (None: no screenshots).
    `chromium`: a browser executable, or "playwright" for Playwright's own."""
    from playwright.sync_api import sync_playwright

    site = Path(site)
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_port}/"
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "_static" not in p.parts)
    problems = []
    with sync_playwright() as pw:
        executable = None if chromium == "playwright" else chromium
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        tabs = [_tab(browser, base) for _ in range(TABS)]
        # a link target's text, read once in this check: links to anchors read the same pages again and again
        html = functools.lru_cache(maxsize=None)(lambda path: path.read_text(errors="replace"))
        for i in range(0, len(pages), TABS):
            batch = list(zip(tabs, pages[i : i + TABS]))
            responses = []
            for (page, errors), rel in batch:  # start every load of the batch, then wait for each
                errors.clear()
                responses.append(page.goto(base + rel, wait_until="commit"))
            for ((page, errors), rel), resp in zip(batch, responses):
                page.wait_for_load_state("networkidle")
                problems += _page_problems(page, rel, resp, site, base, html)
                problems += [f"{rel}: {e}" for e in errors]
        if shots is not None:
            problems += _screenshots(tabs[0][0], base, Path(shots))
        browser.close()
    server.shutdown()
    return pages, problems


def _screenshots(page, base, shots) -> list:
    "The index and chapter 03 in both languages, and a solution unfolded, into `shots`; any problems."
    shots.mkdir(parents=True, exist_ok=True)
    for rel, name in (
        ("index.html", "index.png"),
        ("nbs/03_pytorch_loop.html", "chapter-03.png"),
        ("ko/index.html", "ko-index.png"),
        ("ko/nbs/03_pytorch_loop.html", "ko-chapter-03.png"),
    ):
        page.goto(base + rel, wait_until="networkidle")
        page.screenshot(path=str(shots / name), full_page=False)
    return _unfold_a_solution(page, base + "nbs/03_pytorch_loop.html", shots / "exercise-03.png")


def _unfold_a_solution(page, url, shot):
    "A worked solution is folded until its summary is clicked; the unfolded one is screenshot to `shot`."
    page.goto(url, wait_until="networkidle")
    solution = page.locator("details.sd-dropdown:has(> summary:has-text('Solution'))").first
    code = solution.locator("pre").first
    problems = [f"{url}: a solution shows before it is unfolded"] if code.is_visible() else []
    solution.locator("summary").click()
    if not code.is_visible():
        problems.append(f"{url}: a solution does not unfold")
    solution.scroll_into_view_if_needed()
    page.screenshot(path=str(shot), full_page=False)
    return problems


if __name__ == "__main__":
    pages, problems = check(sys.argv[1], sys.argv[2])
    print(len(pages), "pages")
    print("\n".join(problems[:60]))
    print(len(problems), "problems")
