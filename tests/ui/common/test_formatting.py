from app.ui.common.formatting import (SettledMarkdown, code_blocks, compact_count, human_bytes, human_memory, stats_summary,
                                      with_copy_links)


def test_sizes_use_decimal_for_files_and_binary_for_memory():
    assert human_bytes(4_920_000_000) == "4.9 GB"
    assert human_memory(8 * 2**30) == "8.0 GiB"
    assert human_bytes(512) == "512 B"
    assert human_memory(None) == "unknown"


def test_a_token_count_short_for_a_meter():
    assert [compact_count(n) for n in (0, 950, 1000, 1234, 4096, 9999, 32768)] == \
        ["0", "950", "1k", "1.2k", "4.1k", "10k", "33k"]


def test_code_blocks_and_copy_links():
    text = "Use:\n\n```python\nx = 1\n```\n\nor\n\n~~~\ny\n~~~\n"
    assert code_blocks(text) == ["x = 1", "y"]
    linked = with_copy_links(text, "copy")
    assert linked.index("```\n\n[Copy code](copy:0)") < linked.index("~~~\n\n[Copy code](copy:1)")
    assert code_blocks(linked) == ["x = 1", "y"]


def test_stats_summary_names_a_stopped_reply():
    line = stats_summary({"generated_tokens": 12, "decode_tps": 33.3, "ttft_ms": 1500, "prompt_tps": 250,
                          "stop_reason": "cancelled"})
    assert line == "12 tokens · 33.3 tok/s · first token 1.50 s · prompt 250 tok/s · stopped"


def test_stats_summary_says_how_much_of_the_draft_was_accepted():
    from app.datatypes import GenerationStats

    stats = GenerationStats(20, 10.0, 12.0, 41, 400.0, "length", 0, draft_tokens=48, accepted_tokens=36,
                            verify_passes=10)
    line = stats_summary(stats.to_public_dict())
    assert line.endswith(" · draft 75% accepted, 4.0 tokens a pass · hit max tokens")
    assert "draft" not in stats_summary(GenerationStats(20, 10.0, 12.0, 41, 400.0, "length", 0).to_public_dict())


def test_settled_markdown_stops_at_blank_lines_outside_code_fences():
    settler = SettledMarkdown()
    text = "Para one.\n\n```\ncode\n\nmore code\n"
    assert settler.update(text) == len("Para one.\n\n")  # the blank line inside the fence does not count
    text += "```\n\nNext"
    assert settler.update(text) == len(text) - len("Next")
    text += " para\n\n~~~~\n```\n\n"  # a ``` line does not close a ~~~~ fence
    assert settler.update(text) == len(text) - len("~~~~\n```\n\n")


def test_how_long_a_model_thought_reads_in_seconds():
    from app.ui.common.formatting import human_seconds

    assert [human_seconds(ms) for ms in (0, 20, 420, 4_540, 9_960, 12_400, 59_600, 125_000)] == [
        "0.0 s", "< 0.1 s", "0.4 s", "4.5 s", "10 s", "12 s", "1 min 0 s", "2 min 5 s"]
