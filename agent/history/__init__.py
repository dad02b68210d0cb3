"""A conversation's stored history: decoding, trimming, the per-session cache and token counting."""
