"""SQLAlchemy models: one schema for SQLite and PostgreSQL (JSON becomes JSONB on PostgreSQL).

One module per concern: `accounts` (users, access rules, rate limits, pending forgets),
`conversations` (conversations, transcript, context snapshots, compactions), `memory` (day
summaries, threads, thoughts, facts, search chunks), `delivery` (the Telegram update inbox), `usage`
(metering, daily counters and the turn roll-up), `signals` (stops and reactions on answers),
`prepared` (briefings, touchpoints, reminders), `imports` (histories brought from other
assistants). This package re-exports every model, and that re-export is the one allowed:
`from db.models import User` is how the rest of the code imports a model, and loading the package
registers every table on `Base.metadata` together with the DDL outside the tables.
"""

from __future__ import annotations

from db.base import Base as Base
from db.base import BigIntPK as BigIntPK
from db.base import JSONType as JSONType
from db.base import UTCDateTime as UTCDateTime
from db.ddl import attach
from db.models.accounts import AccessRule as AccessRule
from db.models.accounts import PendingForget as PendingForget
from db.models.accounts import RateLimitEvent as RateLimitEvent
from db.models.accounts import User as User
from db.models.conversations import IMPORT_WAITING as IMPORT_WAITING
from db.models.conversations import IMPORTED_KINDS as IMPORTED_KINDS
from db.models.conversations import OTHER as OTHER
from db.models.conversations import QUEUED as QUEUED
from db.models.conversations import TOUCHPOINT_KIND as TOUCHPOINT_KIND
from db.models.conversations import Conversation as Conversation
from db.models.conversations import GeneratedPrompt as GeneratedPrompt
from db.models.conversations import HistoryCompaction as HistoryCompaction
from db.models.conversations import TranscriptMessage as TranscriptMessage
from db.models.delivery import InboxUpdate as InboxUpdate
from db.models.imports import ImportRun as ImportRun
from db.models.memory import IMPORTED_DAY as IMPORTED_DAY
from db.models.memory import ConversationThread as ConversationThread
from db.models.memory import DaySegment as DaySegment
from db.models.memory import FactConsolidation as FactConsolidation
from db.models.memory import SearchChunk as SearchChunk
from db.models.memory import Thought as Thought
from db.models.memory import UserFact as UserFact
from db.models.prepared import Briefing as Briefing
from db.models.prepared import Reminder as Reminder
from db.models.prepared import Touchpoint as Touchpoint
from db.models.signals import DraftStop as DraftStop
from db.models.signals import MessageReaction as MessageReaction
from db.models.usage import DailyCount as DailyCount
from db.models.usage import ModelUsage as ModelUsage
from db.models.usage import TurnDay as TurnDay

attach(Base.metadata)
