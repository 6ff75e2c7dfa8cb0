"""Turn llama.cpp's own chat tests into the data of QuantDesk's conformance suite.

llama-cpp-python's source distribution (the one every install of the ``llama`` extra compiles) vendors llama.cpp
with ``tests/test-chat.cpp``: ~425 chains ``tst.test(reply).tools(…).reasoning_format(…).expect(…).run()`` that render
one of ``models/templates/*.jinja`` and parse a model's raw reply into content, ``reasoning_content`` and tool calls.
Rather than reading the C++ with a hand-written C++ parser, this script lets llama.cpp tell: it copies the test file,
adds a few lines that write every case llama.cpp runs as one JSON line (the request, the reply, what llama.cpp
expects, and what llama.cpp itself rendered and parsed), builds ``test-chat`` from the same sources and runs it.

Re-run it when the llama-cpp-python version changes (tests/backends/chat_format/test_llama_cpp_conformance.py fails
when the data was made from another version than the installed one)::

    python -m tests.backends.chat_format.extract_llama_cpp_cases [--sdist FILE] [--jobs N]

It needs cmake and a C++ compiler; building test-chat takes ~10 minutes on 2 cores. Nothing of llama.cpp's code is
kept: only the cases, as data, in ``data/llama_cpp_chat_cases.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "llama_cpp_chat_cases.json"

# Inserted after the test file's globals: where each case is written, and how.
_DUMP_GLOBALS = r'''
static std::string     g_qd_template;
static std::ofstream * g_qd_dump = nullptr;

static json qd_msg(const common_chat_msg & m) {
    json calls = json::array();
    for (const auto & c : m.tool_calls) {
        calls.push_back({ { "name", c.name }, { "arguments", c.arguments }, { "id", c.id } });
    }
    return { { "content", m.content }, { "reasoning_content", m.reasoning_content }, { "tool_calls", calls } };
}

static json qd_case(const peg_test_case & tc, const common_chat_params & p, const common_chat_msg * parsed,
                    const std::string & parse_error) {
    json messages = json::array();
    for (const auto & m : tc.params.messages) {
        messages.push_back(m.to_json_oaicompat(false));
    }
    json triggers = json::array();
    for (const auto & t : p.grammar_triggers) {
        triggers.push_back({ { "type", (int) t.type }, { "value", t.value } });
    }
    const char * choices[] = { "auto", "required", "none" };
    const char * continuations[] = { "none", "auto", "reasoning", "content" };
    return {
        { "template", g_qd_template },
        { "messages", messages },
        { "tools", tc.params.tools.empty() ? json() : common_chat_tools_to_json_oaicompat(tc.params.tools) },
        { "tool_choice", choices[tc.params.tool_choice] },
        { "parallel_tool_calls", tc.params.parallel_tool_calls },
        { "reasoning_format", common_reasoning_format_name(tc.params.reasoning_format) },
        { "enable_thinking", tc.params.enable_thinking },
        { "add_generation_prompt", tc.params.add_generation_prompt },
        { "continue_final_message", continuations[tc.params.continue_final_message] },
        { "json_schema", tc.params.json_schema },
        { "chat_template_kwargs", json(tc.params.chat_template_kwargs) },
        { "input", tc.input },
        { "is_partial", tc.is_partial },
        { "expect", qd_msg(tc.expect) },
        { "llama_cpp", {
            { "prompt", p.prompt },
            { "generation_prompt", p.generation_prompt },
            { "format", common_chat_format_name(p.format) },
            { "has_grammar", !p.grammar.empty() },
            { "grammar_lazy", p.grammar_lazy },
            { "grammar_triggers", triggers },
            { "supports_thinking", p.supports_thinking },
            { "thinking_start_tag", p.thinking_start_tag },
            { "thinking_end_tags", p.thinking_end_tags },
            { "preserved_tokens", p.preserved_tokens },
            { "additional_stops", p.additional_stops },
            { "parsed", parsed ? qd_msg(*parsed) : json() },
            { "parse_error", parse_error },
        } },
    };
}
'''

# Inserted in test_peg_parser once llama.cpp has built its parser: the case is written when the test ends, with
# whether llama.cpp's own checks passed.
_DUMP_CASE = r'''
    struct qd_writer {
        json c;
        bool passed = false;
        ~qd_writer() {
            if (g_qd_dump) {
                c["llama_cpp"]["passes"] = passed;
                (*g_qd_dump) << c.dump() << "\n";
                g_qd_dump->flush();
            }
        }
    } qd_w;
    if (g_qd_dump) {
        std::string qd_error;
        common_chat_msg qd_parsed;
        bool qd_ok = true;
        try {
            qd_parsed = parser.parse(tc.input, tc.is_partial);
        } catch (const std::exception & e) {
            qd_ok = false;
            qd_error = e.what();
        }
        qd_w.c = qd_case(tc, parser.params_, qd_ok ? &qd_parsed : nullptr, qd_error);
    }
'''


def _patch(source: str) -> str:
    def insert_after(text: str, anchor: str, addition: str) -> str:
        if text.count(anchor) != 1:
            raise SystemExit(f"test-chat.cpp changed: expected one {anchor!r}; update this script")
        return text.replace(anchor, anchor + addition)

    # qd_case needs peg_test_case, declared above the reconstruction flag: the globals go right after it.
    source = insert_after(source, "static bool g_force_reconstruction_test = false;\n", _DUMP_GLOBALS)
    source = insert_after(source, "    auto parser = make_peg_parser(tmpls, tc.params, detailed_debug);\n", _DUMP_CASE)
    end = "\n}\n\n// Fluent builder for PEG parser tests"
    if source.count(end) != 1:
        raise SystemExit("test-chat.cpp changed: the end of test_peg_parser moved; update this script")
    source = source.replace(end, "\n    qd_w.passed = true;\n}\n\n// Fluent builder for PEG parser tests")
    # Keep going after a case llama.cpp itself fails (it is recorded as such) instead of ending the run.
    call = "        test_peg_parser(tester_.tmpls_.get(), [this](peg_test_case & t) { t = tc_; }, tester_.detailed_debug_);\n"
    if source.count(call) != 1:
        raise SystemExit("test-chat.cpp changed: peg_test_builder::run moved; update this script")
    source = source.replace(call, "        g_qd_template = tester_.template_path();\n        try {\n    " + call
                            + "        } catch (const std::exception & e) {\n"
                              "            if (!g_qd_dump) { throw; }\n"
                              "            LOG_ERR(\"[qd] llama.cpp's own case failed: %s\\n\", e.what());\n"
                              "        }\n")
    main = "int main(int argc, char ** argv) {\n"
    source = insert_after(source, main, "    if (const char * path = getenv(\"QD_CASE_DUMP\")) {\n"
                                        "        g_qd_dump = new std::ofstream(path);\n    }\n")
    return source


def _sdist(path: str | None) -> Path:
    if path:
        return Path(path)
    from tests.fixtures.llama_cpp_sources import find_sdist

    found = find_sdist()
    if found is None:
        raise SystemExit("no llama-cpp-python source archive found: pass --sdist FILE (pip download --no-deps "
                         "--no-binary :all: llama-cpp-python==VERSION)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", help="llama-cpp-python's source archive (default: the cached one)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--build-dir", help="keep the build here (default: a temporary folder)")
    args = parser.parse_args(argv)
    sdist = _sdist(args.sdist)
    version = sdist.name.removeprefix("llama_cpp_python-").removesuffix(".tar.gz")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.build_dir or tmp)
        source_root = work / "src"
        if not (source_root / "CMakeLists.txt").exists():
            with tarfile.open(sdist) as archive:
                prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
                members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
                for member in members:
                    member.name = member.name[len(prefix):]
                archive.extractall(source_root, members=members, filter="data")
        test_file = source_root / "tests" / "test-chat.cpp"
        original = test_file.with_suffix(".cpp.orig")
        if not original.exists():
            original.write_bytes(test_file.read_bytes())
        test_file.write_text(_patch(original.read_text(encoding="utf-8")), encoding="utf-8")
        build = work / "build"
        subprocess.run(["cmake", "-S", str(source_root), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=ON",
                        "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_NATIVE=OFF"], check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "test-chat", f"-j{args.jobs}"], check=True)
        dump = work / "cases.jsonl"
        run = subprocess.run([str(build / "bin" / "test-chat")], cwd=source_root,
                             env={**os.environ, "QD_CASE_DUMP": str(dump)})
        cases = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines() if line.strip()]
        templates = sorted(p.name for p in (source_root / "models" / "templates").glob("*.jinja"))
    for n, case in enumerate(cases):
        case["template"] = case["template"].removeprefix("models/templates/")
        case["id"] = f"{n:03d}-{case['template'].removesuffix('.jinja')}"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"llama_cpp_python": version, "test_chat_exit_code": run.returncode,
                               "templates": templates, "cases": cases}, indent=1, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    print(f"{len(cases)} cases from llama-cpp-python {version} (test-chat exit {run.returncode}) -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
