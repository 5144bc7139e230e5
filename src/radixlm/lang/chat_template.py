"""Chat templates: how ``system``/``user``/``assistant`` roles become text.

By default a backend that has the model's tokenizer uses the model's own Hugging Face chat
template (``apply_chat_template``), so programs build exactly the prompts the model was trained
on (SGLang's hand-written templates can drift from them and break cache hits and outputs).
A role's (prefix, suffix) is read off the template by rendering the conversation so far with
and without one more message holding a sentinel. The registry of hand-written templates
(SGLang's record format) remains as an override (``chat_template_name=...``) and as the
fallback when no tokenizer or HF template is available.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

logger = logging.getLogger(__name__)

Message = dict[str, Any]


class ChatTemplateStyle(Enum):
    PLAIN = auto()
    LLAMA2 = auto()  # the system text is folded into the first user turn


@dataclass(frozen=True)
class ChatTemplate:
    """A hand-written template: per-role (prefix, suffix) strings."""

    name: str
    default_system_prompt: str | None
    role_prefix_and_suffix: dict[str, tuple[str, str]]
    stop_str: tuple[str, ...] = ()
    image_token: str = "<image>"
    audio_token: str = "<audio>"
    style: ChatTemplateStyle = ChatTemplateStyle.PLAIN

    def get_prefix_and_suffix(self, role: str, hist_messages: list[Message]
                              ) -> tuple[str, str]:
        """The text before and after a ``role`` message that follows ``hist_messages``."""
        prefix, suffix = self.role_prefix_and_suffix.get(role, ("", ""))
        if self.style is ChatTemplateStyle.LLAMA2:
            user_prefix = self.role_prefix_and_suffix.get("user", ("", ""))[0]
            if role == "system" and not hist_messages:
                return user_prefix + prefix, suffix
            if role == "user" and len(hist_messages) == 1 and \
                    hist_messages[0]["role"] == "system":
                return "", suffix
        return prefix, suffix

    def get_prompt(self, messages: list[Message]) -> str:
        """The whole conversation as text."""
        out = ""
        for i, m in enumerate(messages):
            content = m["content"]
            if m["role"] == "system" and content is None:
                if self.default_system_prompt is None:
                    continue
                content = self.default_system_prompt
            prefix, suffix = self.get_prefix_and_suffix(m["role"], messages[:i])
            out += f"{prefix}{content}{suffix}"
        return out


_SENTINEL = "\x1fRADIXLM-CONTENT\x1f"


@dataclass
class HFChatTemplate:
    """The model's own Hugging Face chat template, seen through the same interface.

    ``fallback`` supplies a role's strings when the HF template refuses it (for example a
    template without a system role) or renders inconsistently (an earlier message changes
    once a later one is added); a warning says so once per role.
    """

    tokenizer: Any
    fallback: ChatTemplate
    name: str = "hf"
    default_system_prompt: str | None = None
    image_token: str = "<image>"
    audio_token: str = "<audio>"
    stop_str: tuple[str, ...] = ()
    _warned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        _, suffix = self.get_prefix_and_suffix(
            "assistant", [{"role": "user", "content": "x"}])
        stop = suffix.strip()
        self.stop_str = (stop,) if stop else ()

    def _render(self, messages: list[Message]) -> str:
        if not messages:
            return ""
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=False)

    def get_prefix_and_suffix(self, role: str, hist_messages: list[Message]
                              ) -> tuple[str, str]:
        hist = [{"role": m["role"], "content": _text_content(m["content"])}
                for m in hist_messages]
        try:
            before = self._render(hist)
            after = self._render(hist + [{"role": role, "content": _SENTINEL}])
        except Exception as exc:  # noqa: BLE001 - any template error means "not supported"
            return self._fallback(role, hist_messages, f"the template raised {exc}")
        if not after.startswith(before) or after.count(_SENTINEL) != 1:
            return self._fallback(role, hist_messages,
                                  "earlier messages render differently once it is added")
        prefix, suffix = after[len(before):].split(_SENTINEL)
        if not hist:
            prefix = self._strip_bos(prefix)
        return prefix, suffix

    def _strip_bos(self, prefix: str) -> str:
        # The tokenizer adds BOS itself when it encodes; a template that also writes it would
        # put two BOS tokens in every prompt.
        bos = getattr(self.tokenizer, "bos_token", None)
        if bos and prefix.startswith(bos) and _adds_bos(self.tokenizer):
            return prefix[len(bos):]
        return prefix

    def _fallback(self, role: str, hist: list[Message], why: str) -> tuple[str, str]:
        if role not in self._warned:
            self._warned.add(role)
            logger.warning("the model's chat template cannot render a %r message here (%s); "
                           "using the %r template's strings for it", role, why,
                           self.fallback.name)
        return self.fallback.get_prefix_and_suffix(role, hist)

    def get_prompt(self, messages: list[Message]) -> str:
        return self._render(messages)


def _text_content(content: Any) -> str:
    if isinstance(content, list):  # OpenAI parts (text + image_url)
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _adds_bos(tokenizer: Any) -> bool:
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    ids = tokenizer("a").input_ids
    return bool(ids) and ids[0] == bos_id


# -- registry ------------------------------------------------------------------------------

chat_template_registry: dict[str, ChatTemplate] = {}
matching_function_registry: list[Callable[[str], ChatTemplate | None]] = []


def register_chat_template(template: ChatTemplate) -> ChatTemplate:
    """Add (or replace) a hand-written template under ``template.name``."""
    chat_template_registry[template.name] = template
    return template


def register_chat_template_matching_function(
        func: Callable[[str], ChatTemplate | None]) -> Callable[[str], ChatTemplate | None]:
    """Register ``func(model_path) -> template | None``; later registrations are tried first."""
    matching_function_registry.insert(0, func)
    return func


def get_chat_template(name: str) -> ChatTemplate:
    try:
        return chat_template_registry[name]
    except KeyError:
        raise ValueError(f"unknown chat template {name!r}; registered: "
                         f"{sorted(chat_template_registry)}") from None


def get_chat_template_by_model_path(model_path: str) -> ChatTemplate:
    """The first registered template whose matcher accepts ``model_path``, else ``default``."""
    for match in matching_function_registry:
        template = match(model_path)
        if template is not None:
            return template
    return get_chat_template("default")


def resolve_chat_template(model_path: str, tokenizer: Any = None, name: str | None = None
                          ) -> ChatTemplate | HFChatTemplate:
    """The template a backend uses: ``name`` from the registry if given, else the tokenizer's
    own HF template if it has one, else the registry's match for ``model_path``."""
    if name:
        return get_chat_template(name)
    fallback = get_chat_template_by_model_path(model_path)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return HFChatTemplate(tokenizer, fallback, name=f"hf:{model_path}")
    return fallback


def _roles(system: tuple[str, str], user: tuple[str, str], assistant: tuple[str, str]
           ) -> dict[str, tuple[str, str]]:
    return {"system": system, "user": user, "assistant": assistant}


_CHATML = _roles(("<|im_start|>system\n", "<|im_end|>\n"), ("<|im_start|>user\n", "<|im_end|>\n"),
                 ("<|im_start|>assistant\n", "<|im_end|>\n"))
_LLAMA3 = _roles(*[(f"<|start_header_id|>{r}<|end_header_id|>\n\n", "<|eot_id|>")
                   for r in ("system", "user", "assistant")])

for _template in (
    ChatTemplate("default", None, _roles(("SYSTEM:", "\n"), ("USER:", "\n"),
                                         ("ASSISTANT:", "\n"))),
    ChatTemplate("claude", None, _roles(("", ""), ("\n\nHuman: ", ""),
                                        ("\n\nAssistant:", ""))),
    ChatTemplate("chatml", None, _CHATML, stop_str=("<|im_end|>",)),
    ChatTemplate("qwen", "You are a helpful assistant.", _CHATML, stop_str=("<|im_end|>",)),
    ChatTemplate("vicuna_v1.1",
                 "A chat between a curious user and an artificial intelligence assistant. The "
                 "assistant gives helpful, detailed, and polite answers to the user's questions.",
                 _roles(("", " "), ("USER:", " "), ("ASSISTANT:", "</s>")),
                 image_token=" <image>\n"),
    ChatTemplate("llama-2-chat", None,
                 _roles(("<<SYS>>\n", "\n<</SYS>>\n\n"), ("[INST] ", " [/INST]"),
                        ("", " </s><s>")), style=ChatTemplateStyle.LLAMA2),
    ChatTemplate("llama-3-instruct", None, _LLAMA3, stop_str=("<|eot_id|>",),
                 image_token="<|image|>"),
    ChatTemplate("gemma-it", None, _roles(("", ""), ("<start_of_turn>user\n", "<end_of_turn>\n"),
                                          ("<start_of_turn>model\n", "<end_of_turn>\n")),
                 stop_str=("<end_of_turn>",)),
    ChatTemplate("deepseek-v3", None, _roles(("", ""), ("<｜User｜>", ""),
                                             ("<｜Assistant｜>", "<｜end▁of▁sentence｜>")),
                 stop_str=("<｜end▁of▁sentence｜>",)),
):
    register_chat_template(_template)


def _match_by_keywords(rules: list[tuple[tuple[str, ...], str]]
                       ) -> Callable[[str], ChatTemplate | None]:
    def match(model_path: str) -> ChatTemplate | None:
        path = model_path.lower()
        for words, name in rules:
            if all(w in path for w in words):
                return get_chat_template(name)
        return None
    return match


register_chat_template_matching_function(_match_by_keywords([
    (("deepseek-v3",), "deepseek-v3"), (("deepseek-r1",), "deepseek-v3"),
    (("llama-3", "instruct"), "llama-3-instruct"), (("llama-3",  "chat"), "llama-3-instruct"),
    (("llama-2", "chat"), "llama-2-chat"), (("mistral", "instruct"), "llama-2-chat"),
    (("mixtral", "instruct"), "llama-2-chat"), (("vicuna",), "vicuna_v1.1"),
    (("gemma", "it"), "gemma-it"), (("qwen",), "qwen"), (("chatml",), "chatml"),
    (("yi-", "chat"), "chatml"),
]))
