"""The six Segment message types: the one list that the message model (:mod:`eventlake.spec`) and
the table naming rules (:mod:`eventlake.schema`) share, so it sits below both."""

from __future__ import annotations

MESSAGE_TYPES = ("track", "identify", "page", "screen", "group", "alias")
