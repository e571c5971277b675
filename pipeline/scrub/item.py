"""Scrubbing a memory item's free text before it is stored (docs/spec/safety.md §8).

Only prose is rewritten. Identifiers (paths, repo, commit, thread and agent ids, roles, tool names, tags,
the namespace) are left alone because filters match on them: rewriting one would make the item impossible
to find. `meta.url` is the exception, because query strings carry tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engines.contract import Conversation, Document, DocumentBody, Learning, MemoryMeta, StoreItem, Turn
from pipeline.scrub.precheck import nothing_to_scrub
from pipeline.scrub.report import DEFAULT_POLICY, Policy, SanitizationReport, Sanitized
from pipeline.scrub.text_stages import sanitize_fully, sanitize_text


class _ItemScrubber:
    """Scrubs the texts of one item under one policy and sums their reports.

    A part whose text comes out unchanged is reused rather than copied, as a shallow `model_copy` would.
    """

    def __init__(self, policy: Policy, sanitize: Callable[[str, Policy], Sanitized[str]] = sanitize_text) -> None:
        self.policy = policy
        self.sanitize = sanitize
        self.report = SanitizationReport()

    def text(self, text: str) -> str:
        scrubbed = self.sanitize(text, self.policy)
        if scrubbed.report.changed():
            self.report = self.report.merge(scrubbed.report)
        return scrubbed.value

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self.text(text)

    def meta(self, meta: MemoryMeta) -> MemoryMeta:
        url = self.optional(meta.url)
        return meta if url == meta.url else meta.model_copy(update={"url": url})

    def turn(self, turn: Turn) -> Turn:
        text = self.text(turn.text)
        return turn if text == turn.text else turn.model_copy(update={"text": text})

    def body(self, body: DocumentBody) -> DocumentBody:
        # A URI body is left for the source reader to resolve; the text it resolves to is scrubbed then.
        if body.text is None:
            return body
        text = self.text(body.text)
        return body if text == body.text else DocumentBody.of_text(text)

    def updates(self, item: StoreItem) -> dict[str, Any]:
        """The scrubbed fields of `item`, by name."""
        if isinstance(item, Document):
            return {"title": self.optional(item.title), "body": self.body(item.body)}
        if isinstance(item, Conversation):
            return {"turns": [self.turn(turn) for turn in item.turns]}
        return {"text": self.text(item.text), "evidence": self.optional(item.evidence)}


class _TextLister(_ItemScrubber):
    """Walks an item as `_ItemScrubber` does but changes nothing: it lists the texts that walk would scrub,
    and its updates are the ones that walk makes when every text comes out as it went in."""

    def __init__(self) -> None:  # the scrubber's own state is not used
        self.texts: list[str] = []

    def text(self, text: str) -> str:
        self.texts.append(text)
        return text


def scrub_item(item: StoreItem, policy: Policy = DEFAULT_POLICY) -> Sanitized[StoreItem]:
    """A scrubbed copy of `item` and the summed report; the input is not modified. Never raises.

    Scrubbing changes the item, so its fingerprint must be computed afterwards: scrub, then store.
    """
    if not policy.is_spec:
        lister = _TextLister()
        unchanged = _fields(lister, item)
        if nothing_to_scrub(lister.texts, policy):
            # Most items: the copy that scrubbing every text would have made, each text coming out as it is.
            return Sanitized(item.model_copy(update=unchanged), SanitizationReport())
        if len(lister.texts) == 1:  # that one text failed the test just now: it would fail it again
            return scrub_item_fully(item, policy)
    return _scrubbed(item, _ItemScrubber(policy))


def scrub_item_fully(item: StoreItem, policy: Policy) -> Sanitized[StoreItem]:
    """`scrub_item` without the shortcuts of `precheck`: every text through every stage (what they must equal)."""
    return _scrubbed(item, _ItemScrubber(policy, sanitize_fully))


def _scrubbed(item: StoreItem, scrubber: _ItemScrubber) -> Sanitized[StoreItem]:
    scrubbed: Document | Conversation | Learning = item.model_copy(update=_fields(scrubber, item))
    return Sanitized(scrubbed, scrubber.report)


def _fields(scrubber: _ItemScrubber, item: StoreItem) -> dict[str, Any]:
    """The item's fields as `scrubber` rewrites them, by name."""
    updates = scrubber.updates(item)
    updates["meta"] = scrubber.meta(item.meta)
    return updates
