"""A dataset file with a bad line stops Locust before any user starts, naming the line."""

import subprocess

from tests.conftest import locust_command


def test_a_bad_dataset_stops_the_run_before_it_starts(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": 42}\n')
    run = subprocess.run(locust_command("-H", "http://127.0.0.1:9", "--headless", "-t", "5s", "--metrics-port", "0",
                                        "--dataset", "jsonl", "--dataset-path", str(bad)),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "bad.jsonl line 2" in run.stderr and "Traceback" not in run.stderr
