"""Synthetic images for vision-language requests (--dataset random-mm): random pixels, JPEG-encoded,
sent as `image_url` data URLs beside the text of a chat message, as `vllm bench serve`'s random-mm
dataset sends them.

Each request gets images of its own. vLLM caches the processed form of an image it has seen (by its
pixels), so a few images sent over and over would measure that cache, not the vision encoder. The
pixels are drawn per request from the run's seed, and encoded in gevent's thread pool: Pillow lets
go of the GIL while it encodes, so a large image does not hold up the timestamps of the streams in
flight.
"""

from __future__ import annotations

import base64
import io
from dataclasses import replace
from itertools import count

import gevent
import numpy as np
from PIL import Image

from loadwatch.workloads.prompt import Cycle, Prompt

JPEG_QUALITY = 85


def image_size(text: str) -> tuple[int, int]:
    """`WIDTHxHEIGHT` as (width, height); the settings' pattern has checked its form."""
    width, height = text.split("x")
    return int(width), int(height)


def jpeg(seed: tuple[int, ...], size: tuple[int, int]) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, "JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def with_images(prompt: Prompt, images: list[bytes]) -> Prompt:
    """The prompt's last message as OpenAI content parts: its text, then each image as a data URL."""
    *earlier, last = prompt.messages
    parts: list[dict] = [{"type": "text", "text": str(last.get("content") or "")}]
    parts += [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(image).decode()}}
              for image in images]
    return replace(prompt, messages=(*earlier, {**last, "content": parts}), images=len(images),
                   image_bytes=sum(len(image) for image in images))


class ImagePrompts:
    """A text workload whose every prompt comes with `per_request` new images of `size`."""

    def __init__(self, text: Cycle, per_request: int, size: tuple[int, int], seed: int) -> None:
        self.text, self.per_request, self.size, self.seed = text, per_request, size, seed
        self.prompts = text.prompts
        self.part = 0  # which process of the run draws: each its own images, though all share --seed
        self._numbers = count()

    def share(self, part: int, parts: int) -> None:
        """The text from this process's part of the prompts (`part_start`); the images its own."""
        self.part = part
        self.text.share(part, parts)

    def __call__(self) -> Prompt:
        seeds = [(self.seed, self.part, next(self._numbers)) for _ in range(self.per_request)]
        pool = gevent.get_hub().threadpool
        return with_images(self.text(), [pool.apply(jpeg, (seed, self.size)) for seed in seeds])
