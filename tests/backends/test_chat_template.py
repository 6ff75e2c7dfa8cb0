from __future__ import annotations

import pytest

from backends import chat_template
from tests.fixtures.models import CHAT_TEMPLATE

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_renders_a_real_template_like_transformers_does(tiny_models):
    from transformers import AutoTokenizer

    expected = AutoTokenizer.from_pretrained(str(tiny_models.hf)).apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=False)
    assert chat_template.render(CHAT_TEMPLATE, MESSAGES) == expected


@pytest.mark.parametrize("attack", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ self.__init__.__globals__ }}",
    "{% set x = messages.append({'role': 'x'}) %}",  # the immutable sandbox refuses mutation too
])
def test_templates_reaching_for_python_internals_are_refused(attack):
    with pytest.raises(chat_template.TemplateError, match="refused|failed"):
        chat_template.render(attack, MESSAGES)


def test_template_errors_are_sentences():
    with pytest.raises(chat_template.TemplateError, match="malformed"):
        chat_template.render("{% for %}", MESSAGES)
    with pytest.raises(chat_template.TemplateError, match="raised: no system role"):
        chat_template.render("{{ raise_exception('no system role') }}", MESSAGES)
