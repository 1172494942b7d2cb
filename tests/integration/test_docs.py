"""The docs site (issue 42): it builds with `mkdocs build --strict` (a broken link or anchor of a
page is an error there: mkdocs.yml's validation), every link of the built pages, the theme's
included, reaches a file (linkchecker), every alert's runbook_url lands on a section of the runbooks
page, and the site opens offline in Chromium.

linkchecker's anchor plugin is left off: mkdocs checks the pages' anchors already, and the plugin
reads and parses a page again for each anchor linked to it (382 URLs for 92, 100 s of CPU against
5 s on this machine, a tenth of the integration tier's CPU on two cores)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from loadwatch.rules import alerts
from tests.conftest import REPO
from tests.pages import open_offline

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def site():
    # Readable by all: linkchecker run as root reads as `nobody`, and pytest's own folders are root's alone.
    out = Path(tempfile.mkdtemp(prefix="loadwatch-site-"))
    out.chmod(0o755)
    built = subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                           capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    yield out
    shutil.rmtree(out, ignore_errors=True)


def test_every_link_of_the_built_site_resolves(site):
    checked = subprocess.run([str(BIN / "linkchecker"), "--no-status", str(site / "index.html")],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert " 0 warnings found. 0 errors found." in checked.stdout


def test_a_link_to_an_anchor_a_page_lacks_fails_the_build(tmp_path):
    """What the site's own build is trusted with in place of linkchecker's anchor plugin: a page of
    two, under the site's mkdocs.yml (INHERIT), one linking to a heading the other lacks."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the limit](other.md#the-limit).\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A limit\n")
    (tmp_path / "mkdocs.yml").write_text(f"INHERIT: {REPO / 'mkdocs.yml'}\ndocs_dir: docs\nsite_dir: site\n"
                                         "nav: [index.md, other.md]\n")
    built = subprocess.run([str(BIN / "mkdocs"), "build"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 1, built.stdout + built.stderr
    assert "does not contain an anchor '#the-limit'" in built.stderr, built.stderr


def test_every_alerts_runbook_url_is_a_section_of_the_built_runbooks_page(site):
    page = (site / "runbooks.html").read_text()
    path = urlsplit(alerts.DEFAULT_RUNBOOK_BASE).path.strip("/")
    assert (site / f"{path}.html").exists()
    for alert in alerts.ALERTS:
        url = urlsplit(alerts.rule(alert, alerts.DEFAULT_RUNBOOK_BASE)["annotations"]["runbook_url"])
        assert url.path.strip("/") == path and f'id="{url.fragment}"' in page, alert.name


@pytest.mark.needs("chromium")
def test_the_site_opens_offline_with_every_picture(site):
    for page, name in (("index.html", "site-home.png"), ("guides/capacity.html", "site-guide-capacity.png")):
        shot = site / name
        drawn = open_offline(site / page, screenshot=shot)
        assert drawn["errors"] == [] and all(drawn["images"]), (page, drawn)
        if os.environ.get("LOADWATCH_SCREENSHOT_DIR"):  # the closing note's figures: docs/screenshots
            shutil.copyfile(shot, Path(os.environ["LOADWATCH_SCREENSHOT_DIR"]) / shot.name)
