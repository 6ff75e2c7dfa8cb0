"""Reply parsers as llguidance grammars (backends/chat_format/grammar.py), fed real text through llguidance: small
parsers first, then every llama.cpp chat-test case of the families ported so far (grammar_cases.py): the grammar a
request gets must take the reply as test-chat checks it, and the forced-call grammar (``tool_choice: required``)
must take the replies that call a tool and refuse those that do not."""

from __future__ import annotations


import pytest

from backends.chat_format import builder, grammar
from backends.chat_format.builder import ChatBuilder
from backends.chat_format.peg import Parser
from backends.chat_format.template import TemplateError
from tests.backends.chat_format import grammar_cases, llama_cpp_cases


def lark_of(make, lazy=False, special=None):
    return grammar.to_lark(builder.build(make), lazy, special)


def accepts(lark, text, special=()):
    return grammar_cases.feed(lark, text, special).accepted


# --- the pieces of a parser


def test_text_up_to_a_delimiter_stops_where_the_delimiter_starts():
    # one lexeme: an llguidance terminal for the text alone would swallow "<fun" and never see "<function"
    lark = lark_of(lambda p: p.until("<function") + p.literal("<function>"))
    assert accepts(lark, "a <fun b <function>")
    assert accepts(lark, "<function>")
    assert not accepts(lark, "a <function> b <function>")


def test_text_before_a_rule_that_starts_with_its_delimiter_is_joined_to_that_rule():
    def make(p: ChatBuilder) -> Parser:
        call = p.rule("call", p.literal("<tool>") + p.schema(p.json(), "args", {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}) + p.literal("</tool>"))
        return p.content(p.until("<tool>")) + call

    lark = lark_of(make)
    assert accepts(lark, 'see <to <tool>{"n": 1}</tool>')
    assert not accepts(lark, 'see <tool>{"n": "one"}</tool>')  # the schema holds
    assert not accepts(lark, "no call at all")


def test_text_up_to_a_delimiter_that_overlaps_itself_ends_at_its_first_occurrence():
    # "x\n</a>" then "\n</a>\n" holds the delimiter earlier: as "text without it, then it" the lexeme would go on
    # past the first delimiter and fail on the next argument (Qwen3-Coder's "\n</parameter>\n")
    until = lark_of(lambda p: p.zero_or_more(p.literal("<a>\n") + p.until("\n</a>\n") + p.literal("\n</a>\n"))
                    + p.literal("</end>"))
    ac = lark_of(lambda p: p.zero_or_more(p.literal("<a>\n") + p.ac(p.until("\n</a>\n") + p.literal("\n</a>\n"),
                                                                     "\n</a>\n")) + p.literal("</end>"))
    for lark in (until, ac):
        assert accepts(lark, "<a>\nx\n</a>\n<a>\ny\n</a>\n</end>")
        assert not accepts(lark, "<a>\nx\n</a>\ny\n</a>\n</end>")


def test_a_lazy_grammar_is_its_trigger_rules_alone():
    def make(p: ChatBuilder) -> Parser:
        call = p.trigger_rule("call", p.literal("[CALL]") + p.chars("[a-z]", 1, -1))
        return p.content(p.until("[CALL]")) + p.optional(call)

    lazy = lark_of(make, lazy=True)
    assert accepts(lazy, "[CALL]abc")
    assert not accepts(lazy, "text [CALL]abc")
    assert accepts(lark_of(make), "text [CALL]abc")


def test_lookaheads_are_left_out_as_llama_cpp_leaves_them_out():
    # json_number ends with a negative lookahead (no digit may follow): the grammar has none
    lark = lark_of(lambda p: p.json_number() + p.literal("!"))
    assert accepts(lark, "-12.5e3!")
    assert not accepts(lark, "12.!")


def test_space_is_llama_cpp_s_space_rule():
    lark = lark_of(lambda p: p.literal("a") + p.space() + p.literal("b"))
    for text in ("ab", "a b", "a\nb", "a\n\n    \tb"):
        assert accepts(lark, text), text
    for text in ("a  b", "a\n\n\nb", "a\n" + " " * 21 + "b"):
        assert not accepts(lark, text), text


def test_ac_is_up_to_and_including_the_first_delimiter():
    lark = lark_of(lambda p: p.ac(p.until("]]>") + p.literal("]]>"), "]]>") + p.literal("</p>"))
    assert accepts(lark, "x ] ]> y]]></p>")
    assert not accepts(lark, "x]]>y]]></p>")


def test_a_json_schema_is_llguidance_s_json_with_llama_cpp_s_whitespace():
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"],
              "additionalProperties": False}
    lark = lark_of(lambda p: p.literal("<json>") + p.schema(p.json(), "out", schema))
    assert accepts(lark, '<json>{"amount": 1.5}')
    assert accepts(lark, '<json>{\n  "amount" : 2\n}')
    assert not accepts(lark, '<json>{"amount": "x"}')
    assert not accepts(lark, '<json>{"amount": 1, "other": 2}')


def test_a_parser_s_own_json_without_a_schema_is_a_recursive_rule():
    lark = lark_of(lambda p: p.json())
    assert accepts(lark, '{"a": [1, {"b": null}], "c": "d\\n"}')
    assert not accepts(lark, '{"a": [1, }')


def test_a_given_grammar_may_name_the_parser_s_rules():
    def make(p: ChatBuilder) -> Parser:
        p.rule("word", p.chars("[a-z]", 1, -1))
        return p.literal("<") + p.gbnf(p.rest(), 'word ("," word)*') + p.literal(">")

    lark = lark_of(make)
    assert accepts(lark, "<ab,cd>")
    assert not accepts(lark, "<ab,CD>")
    assert accepts(lark_of(lambda p: p.literal("a") + p.gbnf(p.rest(), "") + p.literal("b")), "ab")


def test_delimiters_with_control_characters_are_escaped():
    lark = lark_of(lambda p: p.until("<|sep|>\n\n") + p.literal("<|sep|>\n\ncall"))
    assert accepts(lark, "text\n<|sep|>\ncall? <|sep|>\n\ncall")


def test_special_tokens_are_matched_as_tokens_not_as_their_text():
    special = ("<|start|>", "<|end|>")
    lark = lark_of(lambda p: p.literal("<|start|>assistant") + p.until("<|end|>") + p.literal("<|end|>"),
                   special=grammar_cases.token_ids(special))
    assert "<[257]>" in lark and "<[258]>" in lark
    assert accepts(lark, "<|start|>assistant hi <|end|>", special)
    assert not accepts(lark, "<|start|>assistant hi <|end|>")  # spelled out as text, byte by byte
    spanning = lark_of(lambda p: p.literal("call<|s") + p.literal("ep|>") + p.chars("[a-z]", 1, -1),
                       special=grammar_cases.token_ids(("<|sep|>",)))
    assert accepts(spanning, "call<|sep|>abc", ("<|sep|>",))


# --- llama.cpp's chat-test cases


def _cases(with_tools: bool) -> list:
    """The whole replies: with tools, or with a grammar in llama.cpp."""
    return [pytest.param(case, id=case["id"]) for case in llama_cpp_cases.cases()
            if (case["tools"] if with_tools else case["llama_cpp"]["has_grammar"]) and not case["is_partial"]]


def _rendered(check, case, templates, as_tokens):
    try:
        return check(case, templates, as_tokens)
    except TemplateError as exc:  # the renderer's part (tests/backends/chat_format/test_template.py)
        pytest.skip(f"the template does not render yet: {exc}")


def _special_token_limit(case, templates, as_tokens, tool_choice=""):
    """Skip where special tokens cannot do what the reply asks: sit inside free text (see tokens_in_free_text)."""
    if not as_tokens:
        return
    prepared = grammar_cases.prepare(case, templates, tool_choice)
    inside = grammar_cases.tokens_in_free_text(prepared, prepared.generation_prompt + case["input"])
    if inside:
        pytest.skip(f"the reply holds {', '.join(inside)} inside free text: as a special token, no grammar in "
                    "llguidance takes it there")


# replies the required parser itself does not read (llama.cpp's forced grammar refuses them as well)
NOT_READ_WHEN_REQUIRED = {
    "411-muse-glimmer": "an answer to the user before the call: with tool_choice required, muse-glimmer's parser "
                        "allows only thinking before the calls",
    "071-google-gemma-4-31B-it": "content before the call: with tool_choice required, Gemma 4's parser allows only "
                                 "its thought channel before the calls",
}


@pytest.mark.parametrize("as_tokens", [False, True], ids=["text", "special-tokens"])
@pytest.mark.parametrize("case", _cases(with_tools=False))
def test_the_request_s_grammar_takes_the_reply_as_test_chat_checks_it(case, as_tokens, llama_cpp_templates):
    verdict = _rendered(grammar_cases.check_as_llama_cpp, case, llama_cpp_templates, as_tokens)
    if verdict is None:
        pytest.skip("test-chat checks no grammar here (a lazy grammar the reply never triggers)")
    if not verdict.accepted:
        _special_token_limit(case, llama_cpp_templates, as_tokens)
    assert verdict.accepted, verdict.detail


@pytest.mark.parametrize("as_tokens", [False, True], ids=["text", "special-tokens"])
@pytest.mark.parametrize("case", _cases(with_tools=True))
def test_the_forced_call_grammar_takes_calls_and_refuses_replies_without_one(case, as_tokens, llama_cpp_templates):
    forced = _rendered(grammar_cases.check_forced, case, llama_cpp_templates, as_tokens)
    if forced is None:  # (test_llama_cpp_conformance.py fails the case for it)
        pytest.skip("no grammar: the format's tool-call syntax was not found")
    if forced.required_parser_reads_it and not forced.reply.accepted:
        _special_token_limit(case, llama_cpp_templates, as_tokens, "required")
    assert forced.reply.accepted == forced.required_parser_reads_it, forced.reply.detail
    if not case["expect"]["tool_calls"]:
        assert not forced.reply.accepted
    elif case["id"] in NOT_READ_WHEN_REQUIRED:
        assert not forced.required_parser_reads_it, "now read: drop it from NOT_READ_WHEN_REQUIRED"
    else:
        assert forced.reply.accepted, forced.reply.detail
    if forced.without_call is not None:
        assert not forced.without_call.accepted, "the reply cut before its call was taken as whole"


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "one-call"])
def test_a_forced_call_asked_as_one_call_takes_one_call_and_no_second(parallel, llama_cpp_templates):
    """Qwen 2.5's wrapped calls (``<tool_call>…</tool_call>`` each): with ``parallel_tool_calls: false`` the forced
    grammar takes one call and refuses a second, where llama.cpp's lets the model go on writing calls."""
    from backends.chat_format import formats

    template = formats.Template.of(llama_cpp_templates["Qwen-Qwen2.5-7B-Instruct.jinja"], "", "<|im_end|>")
    tools = [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {
        "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}]
    prepared = formats.apply(template, formats.Request(messages=[{"role": "user", "content": "hi"}], tools=tools,
                                                       tool_choice="required", parallel_tool_calls=parallel))
    lark = grammar.to_lark(prepared.parser, content=False)
    call = '<tool_call>\n{"name": "get", "arguments": {"x": "a"}}\n</tool_call>'
    assert accepts(lark, prepared.generation_prompt + call)
    assert accepts(lark, prepared.generation_prompt + call + "\n" + call) == parallel
