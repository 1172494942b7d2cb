"""`loadwatch report` on a run folder: report.md's request-by-request split and report.html, one
self-contained page. Here, not in the unit tier: a run's first Bokeh page takes about a second to
build, over the unit tier's limit on a busy machine."""

import json
import re

from loadwatch.cli import main
from tests.conftest import closed_port
from tests.unit.metrics.test_ttft_split import queued, record
from tests.unit.report.test_html import run_folder
from tests.unit.report.test_report import RESULTS


def test_the_report_says_request_by_request_where_the_time_went(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "records": "results.requests.jsonl"}))
    (tmp_path / "results.requests.jsonl").write_text(
        "".join(json.dumps(record(i, 0.010)) + "\n" for i in range(20)))
    assert main(["report", str(tmp_path), "--prometheus", f"http://127.0.0.1:{closed_port()}"]) == 0
    text = (tmp_path / "report.md").read_text()
    assert "## Request by request" in text and "20 of the 20 measured requests" in text
    assert "| engine: scheduled to first token (prefill) | 10.0 ms | 10.0 ms | 10.0 ms |" in text


def test_the_page_is_one_file_with_its_script_inlined_and_says_what_is_missing(tmp_path):
    run = run_folder(tmp_path, [queued(i, 0.001) for i in range(30)])
    assert main(["report", str(run), "--prometheus", f"http://127.0.0.1:{closed_port()}"]) == 0
    page = (run / "report.html").read_text()
    assert "Bokeh" in page and not re.search(r"<(script|link)[^>]+(src|href)=", page)  # nothing to fetch: offline
    assert "The engine's side is missing: cannot read from Prometheus" in page
    assert "all 30 measured requests" in page and '"q7"' in page  # the scatter's ids, for hover
    assert json.loads((run / "report.json").read_text())["html"] == "report.html"
