"""A conversation's stored history: decoding, trimming, the per-conversation cache and token counting."""
