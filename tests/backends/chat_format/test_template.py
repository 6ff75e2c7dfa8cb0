from __future__ import annotations

import pytest

from backends.chat_format import template as chat_template
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


# The idioms of real chat templates (DeepSeek-R1's namespace and </think> split, Mistral's alternation check and
# tool-call ids, Gemma's recursive argument macro with dictsort, Llama 3's strftime_now and tojson): the budget's
# hooks must not change a character of what they render.
IDIOMS = [
    "{%- set ns = namespace(system='') -%}{%- for m in messages -%}{%- if m['role'] == 'system' -%}"
    "{%- set ns.system = m['content'] -%}{%- endif -%}{%- endfor -%}{{ bos_token }}{{ ns.system }}"
    "{%- for m in messages -%}{%- if m['role'] == 'assistant' -%}{%- set c = m['content'] -%}"
    "{%- if '</think>' in c -%}{%- set c = c.split('</think>')[-1] -%}{%- endif -%}{{ '<|A|>' + c + eos_token }}"
    "{%- elif m['role'] == 'user' -%}{{ '<|U|>' ~ m['content'] }}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt %}<|A|><think>\n{% endif %}",
    "{%- set loop_messages = messages[1:] if messages[0]['role'] == 'system' else messages -%}"
    "{%- set filtered = [] -%}{%- for m in loop_messages -%}{%- set filtered = filtered + [m] -%}{%- endfor -%}"
    "{%- for m in filtered -%}{%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{- raise_exception('roles must alternate') }}{%- endif -%}{%- endfor -%}"
    "{%- for m in loop_messages %}[{{ m['role']|upper }}] {{ m['content']|trim }}{{ ' ' * 2 }}"
    "{%- if not loop.last %}|{% endif %}{%- endfor %} id={{ ('call_' ~ '0123456789abc')[-9:] }}"
    " {{ '%s-%d' % ('n', messages|length) }} {{ '{}:{}'.format('a', 1) }}",
    "{%- macro arg(a) -%}{%- if a is string -%}<|\"|>{{ a }}<|\"|>{%- elif a is mapping -%}{{ '{' }}"
    "{%- for k, v in a|dictsort -%}{{ k }}:{{ arg(v) }}{%- if not loop.last %},{% endif -%}{%- endfor -%}{{ '}' }}"
    "{%- elif a is sequence -%}[{%- for i in a -%}{{ arg(i) }}{{ ',' if not loop.last }}{%- endfor -%}]"
    "{%- else -%}{{ a }}{%- endif -%}{%- endmacro -%}"
    "{{ arg({'b': [1, 'x', {'c': true}], 'a': none}) }}{{ messages|map(attribute='role')|join(',') }}"
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}{{ (messages|last)['content']|center(20) }}",
    "{{ {'type': 'function', 'parameters': {'q': 'x'}}|tojson }}{{ [1, 2]|tojson(indent=2) }}"
    "{{ strftime_now('%Y') | length }}{{ range(3)|batch(2)|list }}{{ 'a\tb'.expandtabs(4) }}"
    "{{ 'a\nb'|indent(2, true) }}{{ 'x,y'.replace(',', ';') }}{{ 'abc'|wordwrap(2) }}",
]


@pytest.mark.parametrize("source", IDIOMS)
def test_the_budget_changes_nothing_real_templates_render(source):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = chat_template._tojson
    env.globals.update(raise_exception=chat_template._raise_exception, strftime_now=chat_template._strftime_now)
    conversation = [*MESSAGES, {"role": "assistant", "content": "<think>hm</think>Hello"}, {"role": "user",
                                                                                             "content": "Again"}]
    plain = env.from_string(source).render(messages=conversation, bos_token="<s>", eos_token="</s>",
                                           add_generation_prompt=True)
    assert chat_template.render(source, conversation, bos_token="<s>", eos_token="</s>") == plain


def test_a_long_conversation_with_a_long_system_prompt_fits_the_budget():
    """4,096 messages (the server's limit) through a template that looks at the whole list and the system prompt
    on every turn: real work, far inside the budget."""
    source = ("{% for m in messages %}{% if loop.first and messages[0]['role'] == 'system' %}"
              "{{ messages[0]['content']|trim }}{% endif %}{{ m['role'] }}/{{ messages|length }}: "
              "{{ m['content']|trim }}{% if messages[0]['content'].startswith('You') %}.{% endif %}{% endfor %}")
    messages = [{"role": "system", "content": "You " + "are helpful. " * 20_000}]
    messages += [{"role": "user" if i % 2 else "assistant", "content": f"turn {i}"} for i in range(4095)]
    text = chat_template.render(source, messages)
    assert text.count("/4096: turn") == 4095
