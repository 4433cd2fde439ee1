"""A real browser: JupyterLab headless on loopback, Debian's Chromium driven by Playwright (no browser
download). The query-inspector notebook run from the menu, a query typed into the widget, the results
table checked; the cluster-view notebook run, a recommendation saved with its button, the recommendations
changed; the daily digest run, its cards read, a paper saved with its button. Screenshots saved under
reports/browser/."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from scix_core.reports import NOTEBOOKS, notebooks_dir, reports_dir

pytestmark = [pytest.mark.model, pytest.mark.realdata, pytest.mark.browser]

CHROMIUM = os.environ.get("SCIX_CHROMIUM", "/usr/bin/chromium")
# the flags this closed network needs: no background connections, no sandbox as root
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
QUERY = "protein folding structure prediction"
SETTINGS = {  # JupyterLab user settings: every cell in the DOM, no news or extension-manager fetches
    # every cell in the DOM; the notebook's kernel started without asking (on a loaded machine JupyterLab
    # may otherwise put its "Select Kernel" dialog over the notebook)
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(scifact_notebook_home, data_dir, tmp_path):
    assert Path(CHROMIUM).exists(), (
        f"{CHROMIUM} missing: `make test` installs Debian's chromium (scripts/browser.sh)"
    )
    root = tmp_path / "lab"
    root.mkdir()
    for name in ("query-inspector", "cluster-view", "digest"):
        shutil.copy(notebooks_dir() / NOTEBOOKS[name], root)
    for name, values in SETTINGS.items():
        path = tmp_path / "settings" / name.replace("/", os.sep, 1).replace("/", os.sep)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "SCIX_HOME": str(scifact_notebook_home),
        "SCIX_DATA_DIR": str(data_dir),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"),
    }
    env.pop("SCIX_NOTEBOOK_STATIC", None)  # a live frontend: the widget, not the static report
    log = open(tmp_path / "jupyterlab.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.5)
    yield lambda name: f"{base}/lab/tree/{NOTEBOOKS[name]}?token={token}"
    proc.terminate()  # shuts its kernels down too
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _accept_kernel_dialog(page) -> None:
    """A "Select Kernel" dialog, if JupyterLab shows one anyway: take the preferred kernel."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and dialog.first.is_visible():
        button = dialog.first.locator("button", has_text="Select")
        if button.count():
            button.first.click()


def _run_all_cells(page) -> None:
    """Run → Run All Cells, retried until the last cell's prompt shows it queued or ran (on a cold machine
    the first click can land before the notebook panel is the current widget and do nothing, and a kernel
    started twice can leave the later cells unrun)."""
    for _ in range(4):
        _accept_kernel_dialog(page)
        try:
            page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-editor").first.click(timeout=15_000)
        except Exception:  # playwright's TimeoutError: a dialog came up meanwhile; accept it and retry
            continue
        page.keyboard.press("Escape")  # command mode: the notebook, not the editor, has focus
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel").get_by_text(
            "Run All Cells", exact=True
        ).click()
        try:  # the last cell queued or run: Run All reached the whole notebook, not just its first cell
            page.locator(".jp-Notebook .jp-CodeCell").last.locator(".jp-InputPrompt").filter(
                has_text=re.compile(r"\[(\*|\d+)\]")
            ).wait_for(timeout=20_000)
            return
        except Exception:  # playwright's TimeoutError: try again
            page.keyboard.press("Escape")
    raise AssertionError("Run All Cells never started the notebook")


@contextmanager
def _page(url: str, shot: Path):
    """A Chromium page on ``url`` with the notebook run (Run All Cells); a failure leaves ``*-failed.png``."""
    from playwright.sync_api import sync_playwright

    shot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 2400})
        try:
            page.goto(url)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
            _run_all_cells(page)
            yield page
        except Exception:
            page.screenshot(path=str(shot.with_name(f"{shot.stem}-failed.png")))
            raise
        finally:
            browser.close()


def test_query_inspector_in_jupyterlab(lab):
    shot = reports_dir() / "browser" / "query-inspector.png"
    with _page(lab("query-inspector"), shot) as page:
        box = page.locator(".widget-text input[type='text']").first
        box.wait_for(timeout=180_000)
        page.wait_for_selector("table.scix-hits", timeout=180_000)  # the first gold query's results
        box.fill(QUERY)
        box.press("Enter")
        heading = page.get_by_text(f'Results for "{QUERY}"')
        heading.wait_for(timeout=120_000)
        rows = page.locator("table.scix-hits tbody tr")
        assert rows.count() == 10
        assert page.locator(".jp-OutputArea-output .ok", has_text="hybrid · lanes lexical").count() == 1
        assert page.locator(".scix .banner").count() == 0  # nothing dropped
        heading.scroll_into_view_if_needed()
        page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_cluster_view_save_button_changes_the_recommendations(lab):
    shot = reports_dir() / "browser" / "cluster-view.png"
    with _page(lab("cluster-view"), shot) as page:
        page.wait_for_selector("table.scix-recs", timeout=180_000)
        first = page.locator("table.scix-recs tbody tr").first.locator("td").nth(1).inner_text()
        assert page.get_by_text("Tier 1 (clustered)").count() >= 1
        page.locator(".widget-button", has_text="save").first.click()
        page.wait_for_function(
            "id => { const c = document.querySelector('table.scix-recs tbody tr td:nth-child(2)');"
            " return c && c.innerText !== id; }",
            arg=first,
            timeout=120_000,
        )
        cells = page.locator("table.scix-recs tbody tr td:nth-child(2)").all_inner_texts()
        assert first not in cells  # saved papers never come back
        page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_daily_digest_reads_well_and_its_save_button_writes_a_save(lab):
    shot = reports_dir() / "browser" / "digest.png"
    with _page(lab("digest"), shot) as page:
        page.wait_for_selector(".scix .paper .why", timeout=180_000)
        papers = page.locator(".scix .paper")
        assert papers.count() >= 10  # ten ranked and the exploration picks
        first = papers.first.get_attribute("data-paper")
        card = papers.first.inner_text()
        assert "nearest saved paper" in card and "score:" in card and "interest cluster" in card
        page.locator(".widget-button", has_text="save").first.click()
        page.wait_for_function(
            "id => { const c = document.querySelector('.scix .paper');"
            " return c && c.getAttribute('data-paper') !== id; }",
            arg=first,
            timeout=120_000,
        )
        shown = [p.get_attribute("data-paper") for p in page.locator(".scix .paper").all()]
        assert first not in shown  # a saved paper never comes back
        page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
