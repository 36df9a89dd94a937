"""Render a conversation to prompt text: the tokenizer's chat template, or the plain Vicuna v1.1 format."""

from __future__ import annotations

from specbench.errors import SpecbenchError
from specbench.workloads.base import Message, Prompt, Tokenizer

# FastChat's "vicuna_v1.1" conversation, which Spec-Bench uses for every model.
VICUNA_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)


def apply_chat_template(tokenizer: Tokenizer | None, messages: tuple[Message, ...]) -> str:
    """The tokenizer's template with the generation prompt appended (the assistant speaks next)."""
    if tokenizer is None:
        raise SpecbenchError("chat_template=True needs a tokenizer")
    conversation = [{"role": m.role, "content": m.content} for m in messages]
    try:
        text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    except ValueError as err:  # transformers: no chat_template set on this tokenizer
        raise SpecbenchError(
            f"cannot apply the tokenizer's chat template ({err}); run with chat_template off"
        ) from None
    if not isinstance(text, str):
        raise SpecbenchError(f"apply_chat_template returned {type(text).__name__}, expected str")
    return text


def render_vicuna(messages: tuple[Message, ...]) -> str:
    """`SYSTEM USER: q1 ASSISTANT: a1</s>USER: q2 ASSISTANT:` (FastChat ADD_COLON_TWO, seps " " and "</s>")."""
    roles = {"user": "USER", "assistant": "ASSISTANT"}
    system = VICUNA_SYSTEM
    if messages and messages[0].role == "system":  # a conversation's own system message replaces Vicuna's
        system, messages = messages[0].content, messages[1:]
    parts = [system, " "]
    for i, message in enumerate(messages):
        parts.append(f"{roles[message.role]}: {message.content}{' ' if i % 2 == 0 else '</s>'}")
    parts.append("ASSISTANT:")
    return "".join(parts)


def render_conversation(
    messages: tuple[Message, ...], tokenizer: Tokenizer | None, *, chat_template: bool
) -> Prompt:
    """A chat prompt whose last message is the user's; turn_index counts the user messages."""
    if not messages or messages[-1].role != "user":
        raise ValueError("a conversation prompt must end with a user message")
    text = apply_chat_template(tokenizer, messages) if chat_template else render_vicuna(messages)
    num_user_turns = sum(m.role == "user" for m in messages)
    return Prompt(
        text=text,
        messages=messages,
        add_special_tokens=not chat_template,
        turn_index=num_user_turns - 1,
    )


def replay_next_turn(
    sample_turns: tuple[str, ...], previous: Prompt, completion: str, tokenizer: Tokenizer | None, *, chat_template: bool
) -> Prompt | None:
    """The next user turn of a multi-turn sample, asked with the model's own `completion` in the history (never the
    dataset's reference answer); None after the last turn."""
    turn = previous.turn_index + 1
    if turn >= len(sample_turns):
        return None
    messages = previous.messages + (Message("assistant", completion.strip()), Message("user", sample_turns[turn]))
    return render_conversation(messages, tokenizer, chat_template=chat_template)
