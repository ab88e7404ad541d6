"""harness.core.lengths: the length syntax every command shares."""

import pytest

from harness.core.errors import UserError
from harness.core.lengths import format_length, parse_length, parse_lengths


def test_ranges_double_and_lists_merge():
    assert parse_lengths("4k-128k") == [4096, 8192, 16384, 32768, 65536, 131072]
    assert parse_lengths("1k,4k,16k") == [1024, 4096, 16384]
    assert parse_lengths("4k, 1k-2k,4k") == [1024, 2048, 4096]
    assert parse_lengths("4000") == [4000]
    assert parse_lengths("4000,4096") == [4000, 4096]  # cwe differs below 4096: both kept
    assert parse_lengths("1m") == [1048576]
    assert parse_lengths("256") == [256]
    assert parse_length("8K") == 8192


@pytest.mark.parametrize("bad", ["", " ", "4x", "4k-", "4k-8k-16k", "4k,,8k", "-4k", "k", "1.5k"])
def test_bad_syntax_is_a_user_error(bad):
    with pytest.raises(UserError):
        parse_lengths(bad)


def test_bounds_reversed_and_non_doubling_ranges():
    with pytest.raises(UserError, match="outside"):
        parse_lengths("249")
    assert parse_lengths("250") == [250]  # NoLiMa's shortest haystack in its own units
    with pytest.raises(UserError, match="outside"):
        parse_lengths("2m")
    with pytest.raises(UserError, match="reversed"):
        parse_lengths("128k-4k")
    with pytest.raises(UserError, match="doubling"):
        parse_lengths("3k-16k")


def test_format_length():
    assert [format_length(v) for v in (4096, 131072, 1048576, 4000)] == ["4K", "128K", "1M", "4000"]
    assert format_length(0) == "n/a"  # not-length-controlled samples (MMLU/HellaSwag), never "0M"
