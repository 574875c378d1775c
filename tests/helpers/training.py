"""A tiny chat model built in memory, a short GRPO configuration, and verl's agent loops
driven as verl's worker drives them, for the TRL and verl tests."""

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


class ModelServer:
    """verl's server-manager interface (`generate`: prompt token ids in, `TokenOutput` out) over a
    transformers model, in place of verl's vLLM/SGLang servers (which need CUDA)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.prompts: list[list[int]] = []

    async def generate(
        self, *, request_id: str, prompt_ids: list[int], sampling_params: Any, **kwargs: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        import torch  # heavy: only where a test generates

        ids = torch.tensor([prompt_ids])
        out = self.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=4,
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        new = out[0, len(prompt_ids) :].tolist()
        eos = self.tokenizer.eos_token_id
        return TokenOutput(token_ids=new[: new.index(eos) + 1] if eos in new else new)


def verl_config(prompt_length: int = 512) -> Any:
    """The part of verl's trainer config its agent loops read."""
    from omegaconf import OmegaConf

    rollout = {"prompt_length": prompt_length, "response_length": 256, "multi_turn": {"format": "hermes"}}
    return OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}, "data": {}})


async def play(spec: Any, server: ModelServer, tokenizer: Any, *, prompt_length: int = 512) -> list[Any]:
    """Each row through the agent loop its `agent_name` picks, built the way verl's worker builds it:
    the entry of the agent-loop config file in verl's registry, then `hydra.utils.instantiate`."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import envs._verl_agent_loop  # noqa: F401  # what verl's worker imports by the entry's _target_

    for entry in OmegaConf.create([spec.agent_loop_config]):  # as AgentLoopWorker reads the file
        _agent_loop_registry[entry.name] = entry
    config = verl_config(prompt_length)
    outputs = []
    for row in spec.train_dataset:
        loop = instantiate(
            config=_agent_loop_registry[row["agent_name"]],
            trainer_config=DictConfigWrap(config=config),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            hf_model_type=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            tools=ToolListWrap([]),
        )
        outputs.append(
            await loop.run({"temperature": 0.0}, raw_prompt=row["prompt"], extra_info=row["extra_info"])
        )
    return outputs
