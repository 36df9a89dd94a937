"""A stand-in for a tokenizer when an HTTP run has none: renders chat prompts for hashing only (never sent)."""

from __future__ import annotations

import json
from typing import Any

from specbench.errors import SpecbenchError


class ServerChatTemplate:
    """The server applies its own chat template to the messages; this text only identifies the prompt."""

    chat_template = "server-side"

    def apply_chat_template(
        self, conversation: list[dict[str, str]], *, tokenize: bool = False, add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        return json.dumps({"messages": conversation, "add_generation_prompt": add_generation_prompt})

    def __len__(self) -> int:
        raise SpecbenchError("this workload needs the server's tokenizer over HTTP: pass --tokenizer PATH")
