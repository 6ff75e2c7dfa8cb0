"""Prompt lookup's guesses, on token lists (no engine): the latest earlier occurrence of the longest suffix n-gram,
whole tokens only, and a loop continued with its period."""

from __future__ import annotations

from backends.llama_cpp.draft import PromptLookup


def _guess(history, n=4, **kwargs):
    lookup = PromptLookup(**kwargs)
    lookup.start(history[:2])
    return lookup.propose(history, n)


def test_the_latest_occurrence_of_the_longest_suffix_wins():
    # "1 2 3" occurs twice before the end; the later one is followed by 7 8
    assert _guess([1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 6, 9, 1, 2, 3], n=2) == [7, 8]
    # no 3-gram match: the 2-gram "5 6" is found; then the 1-gram
    assert _guess([5, 6, 10, 11, 12, 0, 5, 6], n=3) == [10, 11, 12]
    assert _guess([5, 6, 10, 11, 12, 0, 6], n=2) == [10, 11]
    assert _guess([1, 2, 3], n=4) == []  # nothing repeats


def test_only_whole_tokens_match():
    # as int32 bytes 256, 0 are 00 01 00 00 | 00 00 00 00: token 1's bytes (01 00 00 00) straddle them, later than
    # the whole token 1 at the start; only the whole token may match
    assert _guess([1, 42, 256, 0, 1], n=1, max_ngram=1) == [42]


def test_a_loop_is_continued_with_its_period():
    assert _guess([9, 5, 5, 5, 5], n=4) == [5, 5, 5, 5]
    assert _guess([9, 1, 2, 1, 2, 1, 2], n=5) == [1, 2, 1, 2, 1]


def test_the_history_grows_with_the_reply():
    lookup = PromptLookup()
    history = [1, 2, 3, 4]
    lookup.start(history)
    assert lookup.propose(history, 2) == []
    history += [1, 2]
    assert lookup.propose(history, 2) == [3, 4]
