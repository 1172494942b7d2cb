"""Build a tiny Llama with random weights and a byte-level BPE tokenizer, all locally.

Runs inside the engine's virtual environment (transformers and tokenizers come with vLLM):
    python build_model.py OUTPUT_DIR
No model hub is reached. The same seed gives the same model.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL = ["<s>", "</s>", "<unk>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]


def corpus() -> list[str]:
    # Enough varied English, code and numbers for 2048 merges; the weights are random anyway.
    words = ("the server cache token request latency prefix batch engine model queue decode prefill "
             "throughput percentile monitor alert prometheus grafana locust stream chunk memory block").split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(400)]
    lines += [f"def f{i}(x):\n    return x * {i} + {i * i}" for i in range(200)]
    lines += [f"{i} {i * 3.14159:.3f} {hex(i)} 2026-11-{i % 28 + 1:02d}T{i % 24:02d}:{i % 60:02d}:00Z"
              for i in range(300)]
    return lines


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    (out / "loadwatch-model.txt").write_text("tiny Llama built locally by loadwatch; random weights\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
