from __future__ import annotations

import pytest

from backends.chat_format import probe_values
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


def transformers_render(source, messages, **kwargs):
    """What transformers' own chat-template environment renders (the reference this renderer follows)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    return render_jinja_template([messages], chat_template=source, **kwargs)[0][0]


@pytest.mark.parametrize("source", IDIOMS)
def test_the_budget_changes_nothing_real_templates_render(source):
    conversation = [*MESSAGES, {"role": "assistant", "content": "<think>hm</think>Hello"}, {"role": "user",
                                                                                             "content": "Again"}]
    plain = transformers_render(source, conversation, bos_token="<s>", eos_token="</s>", add_generation_prompt=True)
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


# --- What real templates need beyond Jinja's defaults, inside the sandbox


@pytest.mark.parametrize("call", [
    "tojson", "tojson(ensure_ascii=False)", "tojson(ensure_ascii=True)", "tojson(indent=2)", "tojson(indent='\t')",
    "tojson(separators=(',', ':'))", "tojson(sort_keys=True)", "tojson(ensure_ascii=False, indent=4, sort_keys=True)",
    "tojson(False, 2)",
])
def test_tojson_takes_transformers_keyword_arguments(call):
    """GLM 4.6/4.7, Kimi K3, MiniMax M2/M3, StepFun, Ling, Reka, MiniCPM5, GigaChat and Hunyuan write
    tojson(ensure_ascii=False) and friends; the text is transformers' to the character."""
    source = "{{ {'b': 'Météo ☀ \"x\"\\n', 'a': [1, 2.5, none, true], 'c': {'z': '😀'}}|" + call + " }}"
    assert chat_template.render(source, MESSAGES) == transformers_render(source, MESSAGES)


def test_tojson_lists_what_map_gives():
    """llama.cpp's own DeepSeek R1 template writes tools|map(attribute='function')|tojson(indent=2)."""
    assert chat_template.render("{{ messages|map(attribute='role')|tojson }}", MESSAGES) == '["system", "user"]'
    assert chat_template.render("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')"
                                "|tojson }}", MESSAGES) == '["Hi"]'


@pytest.mark.parametrize("bad", ["indent=[2]", "separators=','", "separators=(',', 1)", "separators=(',',)"])
def test_tojson_refuses_arguments_it_cannot_take(bad):
    with pytest.raises(chat_template.TemplateError, match="tojson"):
        chat_template.render("{{ messages|tojson(" + bad + ") }}", MESSAGES)


def test_the_generation_tag_renders_its_body_in_a_scope_of_its_own():
    """transformers' {% generation %} (LFM2.5, Laguna): a call block, so a plain `set` inside stays inside."""
    source = ("{% set ns = namespace(n=0) %}{% for m in messages %}{% generation %}{% set x = 1 %}{% set ns.n = "
              "ns.n + 1 %}[{{ m.content }}]{% endgeneration %}{% endfor %}{{ x is defined }} {{ ns.n }}")
    assert chat_template.render(source, MESSAGES) == "[Be brief.][Hi]False 2" == transformers_render(source, MESSAGES)
    assert chat_template.declares_tools("{% generation %}{{ tools }}{% endgeneration %}")


def test_a_template_may_change_the_lists_it_made_and_only_those():
    """Kimi K2 queues its tool-call ids in namespace(ids=[]) and pops them back; what the template is given stays
    immutable."""
    queue = ("{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}{% set _ = ns.ids.extend(['b', 'c'])"
             " %}{% set _ = ns.ids.insert(0, 'z') %}{{ ns.ids.pop(0) }}{{ ns.ids.pop(0) }}{{ ns.ids|length }}")
    assert chat_template.render(queue, MESSAGES) == "za2"
    assert chat_template.render("{% set l = [1] + [2] %}{% set _ = l.append(3) %}{{ l }}", MESSAGES) == "[1, 2, 3]"
    for given in ("messages", "messages[1:]", "messages|list", "messages + []"):
        source = "{% set _ = (" + given + ").append(1) %}{{ messages|length }}"
        if given == "messages + []":  # a new list the template made: its own
            assert chat_template.render(source, MESSAGES) == "2"
        else:
            with pytest.raises(chat_template.TemplateError, match="refused"):
                chat_template.render(source, MESSAGES)
    with pytest.raises(chat_template.TemplateError, match="refused"):
        chat_template.render("{% set l = [] %}{{ l.__class__ }}{{ l.sort() }}", MESSAGES)
    with pytest.raises(chat_template.TemplateError, match="refused"):
        chat_template.render("{% set d = {} %}{% set _ = d.update({'a': 1}) %}", MESSAGES)


def test_a_missing_value_or_none_added_to_text_counts_as_nothing():
    """FireFunction v2 writes suffix + "\\n" + functions, which nobody gives; llama.cpp's engine adds it as ""."""
    assert chat_template.render("{{ 'a' + functions + 'b' }}|{{ none + 'c' }}|{{ 'd' ~ none }}", MESSAGES) \
        == "ab|c|dNone"  # ~ stays Jinja's (transformers renders "dNone" too)
    with pytest.raises(chat_template.TemplateError):
        chat_template.render("{{ functions + 1 }}", MESSAGES)


def test_safe_keeps_the_text_as_it_is():
    """Functionary v3.1 writes "Use the function '"|safe + name + "'\\n"|safe + tool|tojson: Jinja's Markup would
    HTML-escape every quote of the JSON."""
    assert chat_template.render("{{ \"'\"|safe + '\"x\" & <y>' }}", MESSAGES) == "'\"x\" & <y>"
    assert chat_template.render("{{ '<a>'|e }}", MESSAGES) == "&lt;a&gt;"  # asked-for escaping still escapes


def test_a_namespace_holds_no_underscore_attribute():
    for source in ("{% set ns = namespace(_x=1) %}", "{% set ns = namespace() %}{% set ns._x = 1 %}"):
        with pytest.raises(chat_template.TemplateError, match="refused"):
            chat_template.render(source, MESSAGES)


def test_tools_are_left_out_where_a_template_loops_over_them_unguarded():
    """Hermes 2 Pro's and Command R+'s tool_use templates loop over tools whether there are any or not: None fails,
    and llama.cpp, which gives no tools when there are none, renders them with an empty list."""
    loop = "{% for t in tools %}{{ t.function.name }}{% endfor %}{{ tools is defined }}"
    assert chat_template.render(loop, MESSAGES) == "False"
    assert chat_template.render(loop, MESSAGES, tools=[{"function": {"name": "f"}}]) == "fTrue"
    guarded = "{% if tools is not none %}T{% endif %}{{ documents is none }}"
    assert chat_template.render(guarded, MESSAGES) == "True"  # None, as transformers passes it
    with pytest.raises(chat_template.TemplateError, match="raised: no"):
        chat_template.render("{% for t in tools %}{% endfor %}{{ raise_exception('no') }}", MESSAGES)


def test_variables_reach_the_template():
    source = "{{ enable_thinking }} {{ kw.a[0] }} {{ date_string }}"
    assert chat_template.render(source, MESSAGES, variables={"enable_thinking": False, "kw": {"a": ["x"]},
                                                             "date_string": "1 Jan 2026"}) == "False x 1 Jan 2026"


def test_probes_record_what_the_template_did_and_ordinary_renders_nothing():
    probe = chat_template.probe("{% if messages[0].content is string %}{{ messages[0].content }}{% endif %}"
                                "{{ messages[1].role }}", [{"role": "user", "content": "A"},
                                                           {"role": "user", "content": "B"}])
    assert probe.ok and probe.text == "Auser"
    assert probe.used("messages.0.content") and probe.used("messages.0.content", "test_is_string")
    assert probe.used("messages.1.role") and not probe.used("messages.1.content")
    assert probe_values.USES.get() is None


def test_rendering_reads_only_what_the_template_reads():
    """A caller's dict that notes the keys read from it (backends/chat_format/analysis.py's probes) sees the
    template's reads only: sizing the input for the budget reads nothing."""
    class Noting(dict):
        read: set = set()

        def __getitem__(self, key):
            Noting.read.add(key)
            return super().__getitem__(key)

        def items(self):
            Noting.read.update(self.keys())
            return super().items()

    chat_template.render("{{ messages[0].role }}", [Noting({"role": "user", "content": "hi"})],
                         tools=[Noting({"name": "f"})])
    assert Noting.read == {"role"}
