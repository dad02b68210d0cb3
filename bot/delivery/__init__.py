"""Durable delivery: every message stored once and answered once, across crashes.

The path of an update:

1. Intake (`inbox.py`, the `UpdateInbox`): the update's raw JSON is committed to the
   `inbox_updates` table before Telegram is told we have it. Webhook: the 200 follows the commit (a
   failed commit answers 503, and Telegram retries); polling (`polling.py`): the next getUpdates
   offset follows the commit. Repeats of an update_id are ignored by the table's unique key.
2. Dispatch (`dispatcher.py`): the head of each chat's queue is leased (SKIP LOCKED on
   PostgreSQL) and run through the ordinary python-telegram-bot handlers as a `WorkedUpdate`
   (`worked_update.py`), the update carrying its row to the handlers' context; one row per chat at
   a time, oldest first, bounded across chats. Leases expire, so a dead instance's rows move on.
   The lease is what keeps a chat's turns apart: the turn itself takes no lock.
3. Answer (`worked_row.py`, a `WorkedRow`): the handler gives the row the answer its turn stored
   and returned; the dispatcher sends it chunk by chunk, recording it on the row with the first
   chunk Telegram accepted and counting the others, and marks the row done. A resumed row that
   recorded nothing runs its handler again, whose turn answers a message that was stored but not
   answered (never storing it twice) or gives back the answer stored the first time (no model
   call); a resumed row with a recorded reply sends what is left of it.
4. Stop (`running` in bot/app.py, `signals.py`): SIGTERM/SIGINT stop the intake, give turns in
   flight the grace period, and leave the rest in the inbox for the next start.

`runner.py` builds these parts for one application and starts and stops them.

What is not covered: the moment between Telegram accepting a sendMessage and our commit of that
fact. A crash exactly there sends that chunk again on resume (at least once; `resumed_sends`
counts the resumptions that may have hit it). Replies that handlers send themselves (commands,
rate-limit notes) are likewise sent at least once.
"""
