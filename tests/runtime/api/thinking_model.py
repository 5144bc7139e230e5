"""A tiny checkpoint that always reasons first: after its prompt it writes a fixed
``<think>`` body and ``</think>``, then whatever the constraint (or its noise) gives.

Built from the seeded tiny Llama by weight surgery: with every attention output and MLP
down projection zeroed, each layer adds nothing to the residual stream, so the next-token
logits depend on the last token only (``lm_head @ norm(embed[last])``); the LM head rows
of the script's tokens are then set so that each script token's successor wins by a wide
margin. The script's tokens must be distinct (a bigram model has one successor per token).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

REASONING = "Let me see."
THINK_TEMPLATE = (  # ChatML that opens the assistant turn inside the reasoning
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{% else %}{{ '<think>\\n' }}{% endif %}{% endif %}"
)
MARGIN = 30.0  # logit of the scripted successor over the (rescaled) rest


def build_thinking_model(source: Path, target: Path, tokenizer) -> Path:  # noqa: ANN001
    """Copy ``source`` to ``target`` with the script wired in (see the module docstring)."""
    if (target / "model.safetensors").exists():
        return target
    shutil.copytree(source, target, dirs_exist_ok=True)
    weights = load_file(str(source / "model.safetensors"))
    for name in weights:
        if name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
            weights[name] = torch.zeros_like(weights[name])
    start = tokenizer.encode("<think>\n", add_special_tokens=False)[-1]
    script = [start, *tokenizer.encode(REASONING + "</think>", add_special_tokens=False)]
    assert len(set(script)) == len(script), "script tokens must be distinct"
    embed, norm = weights["model.embed_tokens.weight"], weights["model.norm.weight"]
    hidden = embed * torch.rsqrt(embed.pow(2).mean(-1, keepdim=True) + 1e-5) * norm
    head = weights["lm_head.weight"] * 0.1  # the noise stays well below the margin
    for prev, nxt in zip(script, script[1:]):
        h = hidden[prev]
        head[nxt] = MARGIN * h / h.dot(h)  # logit MARGIN after prev, small after others
    weights["lm_head.weight"] = head.contiguous()
    save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target
