"""The embedded engine's LoRA flags: the local adapters added only where the flags enable LoRA and
name none of their own."""

from pathlib import Path

from loadwatch.engine import adapters

ROOT = Path("/cache/tiny-lora")


def test_enable_lora_serves_the_local_adapters_at_their_rank():
    args = adapters.serving_args(["--enable-lora", "--max-loras", "1"], ROOT)
    assert args == ["--enable-lora", "--max-loras", "1", "--lora-modules",
                    *(f"lora-{i}=/cache/tiny-lora/lora-{i}" for i in range(1, 5)), "--max-lora-rank", "8"]


def test_the_users_own_modules_or_rank_are_kept():
    own = ["--enable-lora", "--lora-modules", "mine=/x"]
    assert adapters.serving_args(own, ROOT) == own
    assert adapters.serving_args(["--enable-lora", "--max-lora-rank=16"], ROOT)[-1] == "lora-4=/cache/tiny-lora/lora-4"


def test_without_enable_lora_nothing_is_built_or_added(tmp_path):
    from loadwatch.engine.settings import EngineSettings

    settings = EngineSettings(home=tmp_path)
    assert adapters.with_adapters(settings, tmp_path / "model", ["--max-num-seqs", "8"]) == ["--max-num-seqs", "8"]
    assert not adapters.adapters_dir(settings).exists()
