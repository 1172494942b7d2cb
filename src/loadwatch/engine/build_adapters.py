"""Build LoRA adapters for the tiny Llama, all locally, with peft.

Runs inside the engine's virtual environment (peft installed there by adapters.ensure_adapters):
    python build_adapters.py MODEL_DIR OUTPUT_DIR RANK NAME [NAME ...]
One adapter per name, of that rank on q_proj and v_proj, the same seed giving the same adapter. peft
starts B at zero so that a fresh adapter changes nothing; here B is drawn at random too, so that each
adapter changes what the model writes, as a trained one would.
"""

from __future__ import annotations

import sys
from pathlib import Path

TARGETS = ["q_proj", "v_proj"]
B_STD = 0.5  # large enough that the greedy answer differs from the base model's and each other's


def main(model_dir: Path, out: Path, rank: int, names: list[str]) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    for index, name in enumerate(names):
        torch.manual_seed(1000 + index)
        base = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
        model = get_peft_model(base, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS))
        with torch.no_grad():
            for parameter_name, parameter in model.named_parameters():
                if "lora_B" in parameter_name:
                    parameter.normal_(0.0, B_STD)
        model.save_pretrained(out / name)
    (out / "loadwatch-adapters.txt").write_text("\n".join(names) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
