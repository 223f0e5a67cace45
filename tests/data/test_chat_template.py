"""A chat template read as code: which templates only print each content, and the rendering without transformers."""
from __future__ import annotations

import subprocess
import sys

import pytest

from packing_core.data import load_documents
from packing_core.data.chat_template import TemplateError, frames, prints_content_only, render, renders_alone
from packing_core.models.tokenizers import load_tokenizer


@pytest.fixture(scope="module")
def smollm2():
    return load_tokenizer("smollm2")


def _chats(n: int) -> list[list[dict]]:
    """Real chats: GSM8K questions and worked answers, with and without a system turn, one or two rounds."""
    docs = load_documents("gsm8k")
    out = []
    for i in range(n):
        messages = [{"role": "system", "content": "Solve it."}] if i % 2 else []
        for r in range(1 + i % 3 // 2):
            d = docs[(7 * i + r) % len(docs)]
            messages += [{"role": "user", "content": d.prompt}, {"role": "assistant", "content": d.answer}]
        out.append(messages)
    return out


# templates that print a content and nothing else with it, and templates that do more
PRINTS_ONLY = [
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}",
    "{% for m in messages %}{{ '<s>' + m.role + ': ' + m.content + '</s>' }}{% endfor %}",
    "{% for m in messages %}{{ m['role'] ~ ':' ~ m.get('content', '') }}\n{% endfor %}",
    "{% for m in messages %}{% if loop.first %}[BOS]{% endif %}{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}",
]
DOES_MORE = [
    "{% for m in messages %}{{ m['content'] | trim }}{% endfor %}",
    "{% for m in messages %}{{ m['content'].strip() }}{% endfor %}",
    "{% for m in messages %}{% if '</think>' in m['content'] %}T{% endif %}{{ m['content'] }}{% endfor %}",
    "{% for m in messages %}{% set c = m['content'] %}{{ c }}{% endfor %}",
    "{{ messages | map(attribute='content') | join('\\n') }}",
    "{% for m in messages %}{% if m['content'] %}{{ m['content'] }}{% endif %}{% endfor %}",
    "{% macro say(m) %}{{ m['content'] }}{% endmacro %}{% for m in messages %}{{ say(m) | upper }}{% endfor %}",
]


@pytest.mark.parametrize("template", PRINTS_ONLY)
def test_a_template_that_only_prints_each_content_is_recognised(template):
    assert prints_content_only(template)


@pytest.mark.parametrize("template", DOES_MORE)
def test_a_template_that_tests_transforms_or_keeps_a_content_is_not(template):
    assert not prints_content_only(template)


def test_smollm2_s_own_template_only_prints_each_content_and_renders_alone(smollm2):
    assert prints_content_only(smollm2.chat_template) and renders_alone(smollm2.chat_template)
    assert not renders_alone("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")


@pytest.mark.parametrize("template", [None, "{% for m in messages %}{{ m['content'] }"])
def test_no_template_or_a_broken_one_is_neither(template):
    assert not prints_content_only(template) and not renders_alone(template)


@pytest.mark.parametrize("generation", [False, True])
def test_the_rendering_is_transformers_own_on_real_chats(smollm2, generation):
    """transformers' apply_chat_template(tokenize=False) on the same chats, for SmolLM2's template and others."""
    hf = smollm2.hf
    tagged = smollm2.chat_template.replace("{{'<|im_start|>' + message['role']", "{% generation %}{{'<|im_start|>' + "
                                           "message['role']").replace("{% endfor %}", "{% endgeneration %}{% endfor %}")
    assert tagged != smollm2.chat_template
    for template in (smollm2.chat_template, tagged, *PRINTS_ONLY,
                     "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                     "{% if ns.n > 99 %}{% break %}{% endif %}{{ ns.n }}:{{ m['content'] }}{% endfor %}"):
        for chat in _chats(12):
            theirs = hf.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation,
                                            chat_template=template)
            assert render(template, chat, generation) == theirs


def test_a_template_that_raises_says_its_own_message_and_an_empty_chat_is_refused_as_transformers_does():
    with pytest.raises(TemplateError, match="roles must alternate"):
        render("{{ raise_exception('roles must alternate') }}", [{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError, match="Cannot apply chat template to an empty conversation"):
        render("{{ messages }}", [])


def test_frames_are_the_texts_around_the_contents(smollm2):
    roles = ("system", "user", "assistant")
    found = frames(lambda m, g: render(smollm2.chat_template, m, g), roles, True)
    chat = _chats(2)[1]
    assert "".join(f + c for f, c in zip(found, [m["content"] for m in chat] + [""])) == \
        render(smollm2.chat_template, chat, True)


def test_frames_refuse_a_template_that_prints_a_content_twice_or_escaped():
    twice = "{{ messages | tojson }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert prints_content_only(twice)           # the syntax tree cannot see it: the stand-ins do
    assert frames(lambda m, g: render(twice, m, g), ("user",), False) is None
    escaped = "{% for m in messages %}{{ m['content'] | e }}{% endfor %}"
    assert frames(lambda m, g: render(escaped, m, g), ("user",), False) is None


def test_scanning_chats_with_smollm2_imports_neither_transformers_nor_torch(tmp_path):
    """The template renders here: a scan worker starts in a second, not after importing torch."""
    import json

    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in _chats(50)))
    code = (f"import sys, functools; import packing_core as pc; "
            f"p = pc.scan([{str(path)!r}], functools.partial(pc.load_tokenizer, 'smollm2'), workers=0); "
            f"print(p.documents, p.kind, 'transformers' in sys.modules, 'torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["50", "messages", "False", "False"]
