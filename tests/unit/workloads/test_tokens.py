"""Texts of an exact token length from the server's tokenizer, with few round trips."""

import random

from loadwatch.workloads.tokens import ServerTokenizer


class WordServer:
    """/tokenize and /detokenize of a tokenizer: by words (split at spaces, 'careful' two tokens), or
    by three characters at a time, which no sum of word costs predicts."""

    origin = "http://fake"

    def __init__(self, by_words: bool) -> None:
        self.by_words = by_words
        self.calls = 0

    def _tokens(self, text: str) -> list[str]:
        if self.by_words:
            return [piece for word in text.split() for piece in ([word[:4], word[4:]] if word == "careful" else [word])]
        return [text[i:i + 3] for i in range(0, len(text), 3)]

    def post_json(self, path: str, payload: dict) -> dict:
        self.calls += 1
        if path == "/tokenize":
            tokens = self._tokens(payload["prompt"])
            return {"count": len(tokens), "tokens": tokens}
        joined = "".join(payload["tokens"]) if not self.by_words else " ".join(payload["tokens"])
        return {"prompt": joined}


def test_texts_composed_from_word_costs_are_exact_and_trusted_after_three_checks():
    server = WordServer(by_words=True)
    tokenizer = ServerTokenizer(server, None)  # type: ignore[arg-type]
    rng = random.Random(7)
    texts = [tokenizer.text_of_length(rng, n) for n in (1, 2, 3, 50, 1024) * 20]
    assert [len(server._tokens(t)) for t in texts] == [1, 2, 3, 50, 1024] * 20
    assert tokenizer.composes is True
    word_costs = 2 * 34 + 1  # each word alone and after another, and the anchor word
    assert server.calls == word_costs + ServerTokenizer.TRUST  # a hundred texts, no call each
    assert len(set(texts)) > 90  # random, not one text repeated


def test_a_tokenizer_that_does_not_add_up_by_words_gets_every_text_counted():
    server = WordServer(by_words=False)
    tokenizer = ServerTokenizer(server, None)  # type: ignore[arg-type]
    rng = random.Random(7)
    texts = [tokenizer.text_of_length(rng, n) for n in (5, 40, 200)]
    assert [len(server._tokens(t)) for t in texts] == [5, 40, 200]
    assert tokenizer.composes is False
