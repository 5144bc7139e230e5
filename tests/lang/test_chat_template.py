"""Chat templates: the model's own HF template through role prefixes/suffixes, the registry
override, matching by model path, and fallbacks."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import jinja2
import pytest
from transformers import AutoTokenizer

import radixlm as sgl
from radixlm.lang.chat_template import (
    ChatTemplate,
    HFChatTemplate,
    get_chat_template,
    get_chat_template_by_model_path,
    resolve_chat_template,
)

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Spain?"},
    {"role": "assistant", "content": "Madrid."},
]


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_path):
    return AutoTokenizer.from_pretrained(tiny_llama_path)


class FakeTokenizer:
    """A tokenizer with a jinja chat template and a BOS it adds on encode."""

    bos_token, bos_token_id = "<s>", 0

    def __init__(self, template: str) -> None:
        self.chat_template = template
        self._jinja = jinja2.Environment().from_string(template)

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        return self._jinja.render(messages=messages, bos_token=self.bos_token,
                                  raise_exception=self._raise)

    @staticmethod
    def _raise(message):
        raise ValueError(message)

    def __call__(self, text):
        return SimpleNamespace(input_ids=[0] + [ord(c) for c in text])


def _assemble(template, messages):
    """The conversation built role by role, as the interpreter does."""
    text = ""
    for i, m in enumerate(messages):
        prefix, suffix = template.get_prefix_and_suffix(m["role"], messages[:i])
        text += prefix + m["content"] + suffix
    return text


def test_roles_reproduce_the_models_own_template(tokenizer):
    template = resolve_chat_template("/models/tiny", tokenizer)
    assert isinstance(template, HFChatTemplate)
    assert _assemble(template, CONVERSATION) == tokenizer.apply_chat_template(
        CONVERSATION, tokenize=False)
    assert template.stop_str == ("<|im_end|>",)


def test_a_program_builds_the_same_prompt_as_apply_chat_template(tokenizer, scripted):
    scripted.chat_template = resolve_chat_template("/models/tiny", tokenizer)

    @sgl.function
    def chat(s):
        s += sgl.system("Be brief.")
        s += sgl.user("What is the capital of France?")
        s += sgl.assistant(sgl.gen("a"))
        with s.user():
            s += "And of Spain?"
        s += sgl.assistant_begin()
        s += sgl.gen("b")

    state = chat.run(backend=scripted)
    history = state.messages()
    assert len(history) == 4
    expected = tokenizer.apply_chat_template(history, tokenize=False,
                                             add_generation_prompt=True)
    assert state.text() == expected + state["b"]


def test_a_template_that_writes_bos_does_not_double_it():
    tok = FakeTokenizer("{% for m in messages %}{% if loop.first %}{{ bos_token }}{% endif %}"
                        "[{{ m.role }}] {{ m.content }}\n{% endfor %}")
    template = HFChatTemplate(tok, get_chat_template("default"))
    assert template.get_prefix_and_suffix("user", []) == ("[user] ", "\n")
    assert template.get_prefix_and_suffix("assistant", [{"role": "user", "content": "x"}]) \
        == ("[assistant] ", "\n")


def test_a_role_the_template_refuses_falls_back_with_a_warning(caplog):
    tok = FakeTokenizer("{% for m in messages %}{% if m.role == 'system' %}"
                        "{{ raise_exception('System role not supported') }}{% endif %}"
                        "<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}")
    template = HFChatTemplate(tok, get_chat_template("default"))
    with caplog.at_level(logging.WARNING):
        assert template.get_prefix_and_suffix("system", []) == ("SYSTEM:", "\n")
    assert "System role not supported" in caplog.text
    assert template.get_prefix_and_suffix("user", []) == ("<user>", "</user>")


def test_the_registry_overrides_the_models_template(tokenizer):
    template = resolve_chat_template("/models/tiny", tokenizer, name="llama-3-instruct")
    assert template is get_chat_template("llama-3-instruct")
    with pytest.raises(ValueError, match="unknown chat template 'nope'.*chatml"):
        resolve_chat_template("/models/tiny", tokenizer, name="nope")


@pytest.mark.parametrize(("path", "name"), [
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-instruct"),
    ("/m/Llama-2-7b-chat-hf", "llama-2-chat"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "llama-2-chat"),
    ("Qwen/Qwen2-7B-Instruct", "qwen"),
    ("lmsys/vicuna-7b-v1.5", "vicuna_v1.1"),
    ("google/gemma-2-9b-it", "gemma-it"),
    ("/models/my-base-model", "default"),
])
def test_templates_are_matched_by_model_path(path, name):
    assert get_chat_template_by_model_path(path).name == name
    assert resolve_chat_template(path, tokenizer=None).name == name


def test_llama2_style_folds_the_system_prompt_into_the_first_user_turn():
    template = get_chat_template("llama-2-chat")
    prompt = template.get_prompt(CONVERSATION[:3])
    assert prompt == ("[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nWhat is the capital of France?"
                      " [/INST]Paris. </s><s>")


def test_register_a_custom_template():
    custom = ChatTemplate("test-custom", None, {"user": ("U> ", "\n"),
                                                 "assistant": ("A> ", "\n")},
                          stop_str=("\nU>",))
    sgl.lang.chat_template.register_chat_template(custom)
    assert resolve_chat_template("/x", None, name="test-custom") is custom
