"""Settings of conversation recall: the embedder, hybrid search, chunking and the recall tools."""

from __future__ import annotations

from pydantic import Field, SecretStr

from agent.core.settings.base import SettingsGroup


class SearchSettings(SettingsGroup):
    """EMBEDDER*, SEARCH_* and MEMORY_*."""

    # The per-user vector cache, bounded by bytes, and the users the search index keeps at most.
    search_vector_cache_bytes: int = 64_000_000
    search_indexed_users: int = 10_000
    # Conversation recall: the embedder (minilm = the bundled int8 MiniLM, offline; multilingual-e5-small
    # = offline, ~100 languages, the `multilingual` extra; none = full text only; or a PydanticAI
    # embedding model string such as openai:text-embedding-3-small, voyageai:voyage-3.5,
    # cohere:embed-v4.0, or openai:<model> of an OpenAI-compatible server at EMBEDDER_BASE_URL; see
    # agent/search/embedders.py), hybrid weights, chunking for embeddings, limits of the recall tools.
    embedder: str = "minilm"
    embedder_threads: int = 1
    embedder_base_url: str | None = None
    embedder_api_key: SecretStr | None = None
    # Empty: the model's own width (a hosted model is asked once at start). OpenAI's text-embedding-3
    # models (and others) shorten their vectors to this width.
    embedder_dimensions: int | None = Field(default=None, gt=0)
    embedder_batch_size: int = Field(default=64, ge=1)
    embedder_retries: int = Field(default=4, ge=0)
    embedder_timeout_seconds: float = Field(default=30.0, gt=0)
    # A search waits at most this long for the embedder (catching up, then the query); past it, what
    # is not embedded ranks by full text and the catch-up goes on in the background.
    embedder_search_timeout_seconds: float = Field(default=5.0, gt=0)
    search_vector_weight: float = 0.7
    search_lexical_weight: float = 0.3
    search_covered_penalty: float = 0.85
    search_default_limit: int = 6
    search_max_limit: int = 20
    search_max_summaries: int = 2
    search_summary_min_score: float = 0.3
    search_candidates: int = 50
    search_fts_scan_limit: int = 2000
    search_snippet_chars: int = 240
    search_chunk_tokens: int = 400
    search_chunk_max_tokens: int = 800
    search_chunk_overlap_messages: int = 2
    search_section_tokens: int = 160
    search_section_overlap_messages: int = 3
    search_vector_cache_users: int = 64
    search_get_max_messages: int = 40
    # Recall quality: rescoring of conversation_search candidates and what a hit carries.
    # A message also gets this share of its previous turn's lexical score (the question it answers).
    search_previous_turn_weight: float = 0.5
    # Messages by the speaker a query does not name (when it names exactly one of the two) x this.
    search_other_speaker_factor: float = 0.6
    # Messages on a day the query names ("on 9 May", "last March", "three weeks ago") x (1 + this),
    # and that many of those days' best sections join the candidates.
    search_date_boost: float = 0.5
    search_date_candidates: int = 10
    # Facts with their source messages rank with the transcript: a fact's score, x this, reaches the
    # messages it comes from (0 = facts take no part in conversation_search).
    search_fact_weight: float = 1.0
    # Facts' links across days: the facts standing behind the best hits pull in the source turns of
    # the person's facts on other days that share their rare words, at the hit's score x this x the
    # share of the fact's word weight they hold (0 = off).
    search_link_weight: float = 0.0
    # Day summaries as keys of their day's messages: a message of a day whose summary matches the
    # query scores x (1 + this x the summary's score relative to the best summary's). 0 = off, the
    # default: on BEAM, with the demo model's summaries, it cost recall (docs/benchmarks.md).
    search_summary_key_boost: float = 0.0
    # A question across the conversations, an order or a progress ("list the order in which I
    # brought up …", "how did my project progress?", agent/search/diversity.py): a candidate scores
    # x this once for each better hit of its day, so the hits spread over the days (1 = off).
    search_overview_day_factor: float = 0.85
    # A question for a summary ("summarise how my resume developed") reads both speakers' turns:
    # its "I" or "you" lower neither side (SEARCH_OTHER_SPEAKER_FACTOR applies to a named speaker only).
    search_summary_both_speakers: bool = True
    # Characters of the turn before and after each message hit (0 = no neighbours in results).
    search_neighbour_chars: int = 160
    # After the start, between turns: this many most recently active users are caught up and their
    # vectors loaded into the cache.
    search_warm_users: int = 8
    memory_fact_max_chars: int = 300
