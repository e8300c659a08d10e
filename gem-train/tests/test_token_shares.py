"""Rank shares of a batch balanced by tokens, not by turn counts (issue 35, point 2)."""

from itertools import pairwise

from gem_train.distributed import token_shard_ranges


def test_shares_are_contiguous_and_balanced_by_tokens():
    """A count split would give rank 0 the three long turns (3000 tokens against 30); by tokens each rank gets
    about half, the shares cover the batch in rank order (the one-process order), and the split is deterministic."""
    lengths = [1000, 1000, 1000, 10, 10, 10]
    ranges = token_shard_ranges(lengths, 2)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in pairwise(ranges))
    tokens = [sum(lengths[s:e]) for s, e in ranges]
    assert max(tokens) - min(tokens) <= max(lengths)
    assert token_shard_ranges(lengths, 2) == ranges
