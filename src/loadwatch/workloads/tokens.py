"""Token counts and texts of a given token length, from the server's own tokenizer.

vLLM serves /tokenize and /detokenize, so lengths are the model's, with no tokenizer installed
here. A server without them gets an approximation (about 4 characters a token) and a warning.
"""

from __future__ import annotations

import logging
import random
from typing import Protocol

from loadwatch.client.failures import RequestFailed
from loadwatch.client.stream import Streamer

log = logging.getLogger(__name__)
WORDS = ("time latency server cache token batch queue engine model prefix decode prefill stream chunk "
         "memory block request answer question river mountain garden window market letter number "
         "orange silver quiet rapid gentle bright simple careful").split()


def random_words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...

    def text_of_length(self, rng: random.Random, n: int) -> str: ...


class ServerTokenizer:
    """Texts of n tokens made of WORDS. Three round trips a prompt made a thousand 1,024-token
    prompts cost 8 s of a run's time before its first request; instead each word's cost is measured
    once, texts are composed locally to the exact count, and the first TRUST texts are counted by
    the server. Where they come out exact (tokenizers that split at spaces: BPE, byte-level BPE,
    SentencePiece), the rest is trusted; where one does not, every text is built and counted by
    the server."""

    TRUST = 3

    def __init__(self, streamer: Streamer, model: str | None) -> None:
        self.streamer, self.model = streamer, model
        self._costs: tuple[dict[str, int], dict[str, int]] | None = None  # a text's first word, a later one
        self.composes: bool | None = None  # None until TRUST composed texts were counted
        self._checked = 0

    def _post(self, path: str, payload: dict) -> dict:
        if self.model:
            payload = {"model": self.model, **payload}
        return self.streamer.post_json(path, payload)

    def count(self, text: str) -> int:
        return int(self._post("/tokenize", {"prompt": text, "add_special_tokens": False})["count"])

    def text_of_length(self, rng: random.Random, n: int) -> str:
        if self.composes is not False:
            text = self._compose(rng, n)
            if text is not None:
                if self.composes:
                    return text
                if self.count(text) == n:
                    self._checked += 1
                    self.composes = True if self._checked >= self.TRUST else None
                    return text
            self.composes = False
            log.info("%s: texts of WORDS are not counted word by word; each prompt is counted by the server",
                     self.streamer.origin)
        return self._counted_text(rng, n)

    def _compose(self, rng: random.Random, n: int) -> str | None:
        """Words whose measured costs add up to n, or None where no word fits what is left."""
        if self._costs is None:
            anchor = self.count(WORDS[0])
            self._costs = ({w: self.count(w) for w in WORDS},
                           {w: self.count(f"{WORDS[0]} {w}") - anchor for w in WORDS})
        first, later = self._costs
        words, left, costs = [], n, first
        every = [w for w, c in later.items() if c > 0]
        widest = max(later.values())
        while left > 0:
            fitting = every if costs is later and left >= widest else [w for w, c in costs.items() if 0 < c <= left]
            if not fitting:
                return None
            word = rng.choice(fitting)
            words.append(word)
            left -= costs[word]
            costs = later
        return " ".join(words)

    def _counted_text(self, rng: random.Random, n: int) -> str:
        ids: list[int] = []
        words = max(n, 8)
        while len(ids) < n:
            ids = self._post("/tokenize", {"prompt": random_words(rng, words), "add_special_tokens": False})["tokens"]
            words *= 2
        text = self._post("/detokenize", {"tokens": ids[:n]})["prompt"]
        # Decoding and re-encoding can merge or split a token at the edges; trim or pad to land on n.
        for _ in range(8):
            count = self.count(text)
            if count == n:
                break
            text = text.rsplit(" ", 1)[0] if count > n else text + " " + rng.choice(WORDS)
        return text


class ApproximateTokenizer:
    CHARS_PER_TOKEN = 4

    def count(self, text: str) -> int:
        return max(1, len(text) // self.CHARS_PER_TOKEN)

    def text_of_length(self, rng: random.Random, n: int) -> str:
        text = ""
        while len(text) < n * self.CHARS_PER_TOKEN:
            text += rng.choice(WORDS) + " "
        return text[: n * self.CHARS_PER_TOKEN]


def tokenizer_for(streamer: Streamer, model: str | None) -> Tokenizer:
    server = ServerTokenizer(streamer, model)
    try:
        server.count("probe")
    except (RequestFailed, KeyError, TypeError, ValueError) as exc:
        log.warning("%s has no usable /tokenize (%s): token lengths are approximated at %d characters a "
                    "token", streamer.origin, exc, ApproximateTokenizer.CHARS_PER_TOKEN)
        return ApproximateTokenizer()
    return server
