"""The docs' reference pages, generated from the code: `python -m loadwatch.reference` writes
docs/reference/*.md, and a test fails when a page is out of step with the code that it describes."""
