"""The fake Bot API's drafts: `sendMessageDraft`, `sendRichMessageDraft` (a rich message whose
`html` may hold a `<tg-thinking>` block, drafts only), the stop button they may carry (`can_stop`,
`keep_on_stop`) and the `stopped_message_generation` update a press of it sends. `DraftApi` is mixed
into the fake Bot API."""

from __future__ import annotations

from typing import Any

from bench.fakes.telegram_markup import MAX_TEXT_LENGTH, bad_request, checked_text, plain_from_html, utf16_len
from bench.fakes.telegram_records import SentDraft

Json = dict[str, Any]
# What a rich draft's HTML may use beyond a message's tags.
_RICH_DRAFT_TAGS = frozenset({"tg-thinking"})


class DraftApi:
    """sendMessageDraft and sendRichMessageDraft, recorded in `drafts`; `stop_generation` presses stop."""

    def _init_drafts(self) -> None:
        self.drafts: list[SentDraft] = []
        self.drafts_refused = False  # True: every draft fails like a server without drafts
        self.rich_drafts_refused = False  # True: sendRichMessageDraft fails like an older server
        self._stoppable: set[tuple[int, int]] = set()  # (chat_id, draft_id) shown with a stop button

    def push_update(self, update: Json) -> Json:
        """Queue one update (implemented by the server)."""
        raise NotImplementedError

    def _chat(self, chat_id: int | str) -> Json:
        """The chat object of `chat_id` (implemented by the server)."""
        raise NotImplementedError

    def _draft_target(self, p: Json, method: str) -> tuple[int, int, bool, bool]:
        if self.drafts_refused:
            raise bad_request(f"method {method} is not available")
        chat_id, draft_id = p.get("chat_id"), p.get("draft_id")
        if not isinstance(chat_id, int) or chat_id <= 0:
            raise bad_request("drafts can be sent only to private chats")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise bad_request("draft_id must be non-zero")
        can_stop, keep_on_stop = p.get("can_stop", False), p.get("keep_on_stop", False)
        if not isinstance(can_stop, bool) or not isinstance(keep_on_stop, bool):
            raise bad_request("can_stop and keep_on_stop must be Boolean")
        return chat_id, draft_id, can_stop, keep_on_stop

    def _record(self, draft: SentDraft) -> bool:
        self.drafts.append(draft)
        if draft.can_stop:
            self._stoppable.add((draft.chat_id, draft.draft_id))
        return True

    async def _api_sendMessageDraft(self, p: Json, files: Any) -> bool:
        chat_id, draft_id, can_stop, keep_on_stop = self._draft_target(p, "sendMessageDraft")
        text = checked_text(p, may_be_empty=True)  # empty text shows "Thinking..."
        entities = list(p.get("entities") or [])
        return self._record(
            SentDraft(chat_id, draft_id, text, entities, can_stop=can_stop, keep_on_stop=keep_on_stop)
        )

    async def _api_sendRichMessageDraft(self, p: Json, files: Any) -> bool:
        if self.rich_drafts_refused:
            raise bad_request("method sendRichMessageDraft is not available")
        chat_id, draft_id, can_stop, keep_on_stop = self._draft_target(p, "sendRichMessageDraft")
        rich = p.get("rich_message")
        if not isinstance(rich, dict):
            raise bad_request("rich_message must be an InputRichMessage object")
        given = [key for key in ("html", "markdown", "blocks") if key in rich]
        if len(given) != 1:
            raise bad_request("exactly one of html, markdown and blocks must be specified")
        if given != ["html"]:  # what the bot sends; the other forms are not modelled here
            raise bad_request("only html rich drafts are supported by this fake")
        text = plain_from_html(str(rich["html"]), extra_tags=_RICH_DRAFT_TAGS)
        if utf16_len(text) > MAX_TEXT_LENGTH:
            raise bad_request("message is too long")
        draft = SentDraft(
            chat_id, draft_id, text, [], can_stop=can_stop, keep_on_stop=keep_on_stop, rich=rich
        )
        return self._record(draft)

    def stop_generation(self, chat_id: int, draft_id: int) -> Json | None:
        """The user presses the stop button of a draft: a `stopped_message_generation` update, or None
        (ignored, as Telegram shows no button) for a draft never sent with `can_stop` to that chat."""
        if (chat_id, draft_id) not in self._stoppable:
            return None
        stopped = {"chat": self._chat(chat_id), "draft_id": draft_id}
        return self.push_update({"stopped_message_generation": stopped})
