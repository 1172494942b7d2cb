"""What the saved documents of a command (capacity.json, tune.json, an experiment's summary.json)
share: read whichever schema_version wrote them, written with the keys they had before their models,
indented. Each is one model below every layer that reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Self

from pydantic import BaseModel


def unset(value: object) -> bool:
    """`exclude_if` for a key the documents write only where it has a value (tune.json's fleet,
    summary.json's problem): files read by older readers keep the keys they had."""
    return value is None


class Document(BaseModel):
    @classmethod
    def read(cls, path: Path) -> Self:
        """The file, whichever schema_version wrote it (a file without one is version 1)."""
        return cls.model_validate_json(path.read_text())

    def json_text(self) -> str:
        """The file's text: the same keys as before the model, indented."""
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"
