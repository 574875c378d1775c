"""A tiny chat model built in memory and a short GRPO configuration, for the TRL and verl tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TINY_CORPUS = (
    "You are a helpful assistant. What is 2 + 2? What is 3 + 3? The answer is 4. Look up the word cat. "
    '<tool_response> {"name": "lookup", "arguments": {"word": "cat"}} system user assistant tools '
    "function description parameters properties required string type object Returns Args"
)


def tiny_chat_model(reply: str) -> tuple[Any, Any]:
    """A randomly initialised 1-layer Qwen2 and a tokenizer built here (nothing downloaded).

    The model answers every chat prompt with exactly `reply` and then `<|im_end|>`: attention
    and MLP outputs are zeroed, so each next token depends only on the current token, and the
    output head maps the generation prompt's last token to `reply` (one added token) and
    `reply` to end-of-turn, with a margin that makes sampling at temperature 1 deterministic.
    The tokenizer is byte-level BPE trained in memory with TRL's bundled Qwen2.5 chat template,
    which TRL knows how to parse tool calls from.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([TINY_CORPUS] * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    tokenizer.add_tokens([reply])
    tokenizer.chat_template = qwen2_5_chat_template
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    last = prompt["input_ids"][-1] if isinstance(prompt, Mapping) else prompt[-1]
    reply_id = tokenizer.convert_tokens_to_ids(reply)

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        head = model.lm_head.weight
        head.zero_()
        embeddings = model.model.embed_tokens.weight
        for current, following in ((last, reply_id), (reply_id, tokenizer.eos_token_id)):
            normed = embeddings[current] / embeddings[current].pow(2).mean().sqrt()  # what RMSNorm gives
            head[following] += 100.0 * normed / normed.pow(2).sum()
    return model, tokenizer


def grpo_config(output_dir: Any, **overrides: Any) -> Any:
    """GRPOConfig for a 2-step CPU run: 2 completions per prompt, short, nothing reported."""
    from trl import GRPOConfig

    options: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 2,
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 16,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        "dataloader_num_workers": 0,
    }
    options.update(overrides)
    return GRPOConfig(**options)
