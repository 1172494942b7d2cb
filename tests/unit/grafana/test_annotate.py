"""`loadwatch annotate` against a local server that answers Grafana's annotation API."""

from __future__ import annotations

import json

import pytest

from loadwatch.cli import main
from tests.conftest import free_port
from tests.fakes.grafana import FakeGrafana

RESULTS = {
    "run_id": "20261122T100000Z-abc123", "target": "http://127.0.0.1:8000", "completed": 120, "failed": 2,
    "request_throughput": 4.0, "p99_ttft_ms": 812.4, "started_at": 1795000000.25, "ended_at": 1795000030.5,
    "stages": [
        {"name": "step-1", "level": 4, "unit": "users", "start": 1795000000.25, "end": 1795000015.0,
         "completed": 50, "failed": 0, "request_throughput": 3.3, "p99_ttft_ms": 400.0},
        {"name": "step-2", "level": 8, "unit": "users", "start": 1795000015.0, "end": 1795000030.5,
         "completed": 70, "failed": 2, "request_throughput": 4.5, "p99_ttft_ms": None},
    ],
}


@pytest.fixture
def grafana():
    server = FakeGrafana()
    yield server
    server.close()


@pytest.fixture
def results(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULTS))
    return path


@pytest.fixture(autouse=True)
def no_token_of_the_caller(monkeypatch):
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    monkeypatch.delenv("GRAFANA_TOKEN_FILE", raising=False)


def test_run_and_stages_become_tagged_regions(grafana, results, capsys, monkeypatch):
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_test")
    assert main(["annotate", str(results.parent), "--grafana-url", grafana.url]) == 0
    run, first, second = grafana.posted
    assert (run["time"], run["timeEnd"]) == (1795000000250, 1795000030500)
    assert run["tags"] == ["loadwatch", "run", RESULTS["run_id"]]
    assert "120 requests, 2 failed, 4.00 req/s, TTFT p99 812 ms" in run["text"]
    assert first["tags"] == ["loadwatch", "stage", "step-1", RESULTS["run_id"]]
    assert (first["time"], first["timeEnd"]) == (1795000000250, 1795000015000)
    assert "stage step-2 at 8 users" in second["text"] and "TTFT p99 n/a" in second["text"]
    assert "3 annotations posted" in capsys.readouterr().out


def test_token_comes_from_a_file_before_the_environment(grafana, results, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_environment")
    (tmp_path / "token").write_text("glsa_test\n")
    assert main(["annotate", str(results), "--grafana-url", grafana.url, "--token-file", str(tmp_path / "token")]) == 0
    assert set(grafana.auth) == {"Bearer glsa_test"}
    assert "glsa_" not in capsys.readouterr().out


def test_a_token_on_the_command_line_is_refused_unechoed(grafana, results, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["annotate", str(results), "--grafana-url", grafana.url, "--token", "glsa_visible"])
    assert exit_info.value.code == 2 and not grafana.posted
    err = capsys.readouterr().err
    assert "--token is refused" in err and "GRAFANA_TOKEN" in err and "glsa_visible" not in err


def test_a_missing_token_file_is_named(grafana, results, tmp_path, capsys):
    assert main(["annotate", str(results), "--grafana-url", grafana.url, "--token-file",
                 str(tmp_path / "none")]) == 1
    assert f"cannot read the GRAFANA_TOKEN file {tmp_path / 'none'}" in capsys.readouterr().out


def test_a_refused_token_is_reported_plainly(grafana, results, capsys, monkeypatch):
    monkeypatch.setenv("GRAFANA_TOKEN", "wrong")
    assert main(["annotate", str(results), "--grafana-url", grafana.url]) == 1
    out = capsys.readouterr().out
    assert "refused the annotation (401)" in out and "invalid API key" in out and "Traceback" not in out


def test_an_unreachable_grafana_is_reported_plainly(results, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["annotate", str(results), "--grafana-url", url]) == 1
    assert f"cannot reach Grafana at {url}" in capsys.readouterr().out
