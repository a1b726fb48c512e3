"""The built-in demo responder: deterministic, history-aware answers without any model.

`DemoResponder` answers from `server.responders.demo_topics`, reads back `say:` texts, and after
an interruption says where it stopped or continues from there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

from server.responders.demo_topics import HELP, TOPIC_LIST, TOPICS, UNKNOWN
from server.responders.prompt import ConversationTurn, Prompt
from server.speech.segmenter import SpeechSegmenter

_SAY = re.compile(r"\s*say:\s*", re.IGNORECASE)
_RECALL = re.compile(
    r"\b(?:where did you (?:stop|get cut|leave off)|where were you cut|what did you (?:just )?say"
    r"|what were you saying|last thing you said|repeat)\b"
)
_CONTINUE = re.compile(r"\b(?:continue|go on|keep going|carry on|resume)\b")
_WORD = re.compile(r"[a-z0-9']+")
QUOTED_WORDS = 6
"""How many heard words a "where did you stop?" answer quotes: enough to locate the cut."""


class DemoResponder:
    """Built-in responder: deterministic, history-aware, no model.

    Answers, by the last user turn (case-insensitive):
    - "say: <text>": exactly <text> (everything after the prefix and the spaces after it);
    - "where did you stop?", "what did you say?", "what was the last thing you said", "repeat":
      quotes the last QUOTED_WORDS heard words of the previous assistant turn and says whether
      it was cut (or that nothing of it was heard);
    - "continue", "go on", "keep going": the rest of the previous assistant turn after its heard
      text, when that turn was interrupted; otherwise says it had finished and offers a topic;
    - anything else: the topic of `server.responders.demo_topics` whose keywords the prompt
    mentions most   (first listed wins a tie), else a reply listing what it can talk about.
    """

    async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
        """Yield `reply_text(prompt)` sentence by sentence, each with its trailing whitespace."""
        reply = self.reply_text(prompt)
        segmenter = SpeechSegmenter(first_clause=False, split_long=False)
        for start, end in segmenter.feed(reply) + segmenter.flush():
            yield reply[start:end]

    def reply_text(self, prompt: Prompt) -> str:
        """Return the whole reply to the last user turn of `prompt` (never empty)."""
        user_index = _last_index(prompt.turns, "user")
        request = prompt.turns[user_index].text if user_index is not None else ""
        said = _SAY.match(request)
        if said:
            text = request[said.end() :]
            return text or 'You asked me to say something, but nothing came after "say:".'
        history = prompt.turns[:user_index]
        assistant_index = _last_index(history, "assistant")
        last = history[assistant_index] if assistant_index is not None else None
        words = request.casefold().replace("\u2019", "'")
        if _RECALL.search(words):
            return _recall(last)
        if _CONTINUE.search(words):
            return _continue(last, history)
        return _answer(words)


def _last_index(turns: Sequence[ConversationTurn], role: str) -> int | None:
    return next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == role), None)


def _recall(last: ConversationTurn | None) -> str:
    if last is None:
        return (
            "I have not said anything yet, so there is nothing to repeat. "
            f"I can talk about {TOPIC_LIST}."
        )
    if last.interrupted and not last.text:
        return (
            "You heard nothing of my last answer: I was cut off before my first word reached "
            "you. Say continue and I will start it from the beginning."
        )
    if last.interrupted:
        return (
            f'I was cut off after "{_tail(last.text)}", so that is where you stopped hearing me. '
            "Say continue and I will pick up from there."
        )
    return (
        f'I finished my last answer; it ended with "{_tail(last.text)}". '
        "Ask me about something else whenever you like."
    )


def _continue(last: ConversationTurn | None, history: Sequence[ConversationTurn]) -> str:
    if last is None:
        return (
            "There is nothing to continue yet, because I have not answered anything. "
            f"I can talk about {TOPIC_LIST}."
        )
    if last.interrupted:
        full = last.full_text or last.text
        rest = full[len(last.text) :] if full.startswith(last.text) else full
        if rest.strip():
            return rest.lstrip()
    spoken = {turn.full_text or turn.text for turn in history if turn.role == "assistant"}
    offer = next((topic for topic in TOPICS if topic.text not in spoken), TOPICS[0])
    return (
        "I had already finished my last answer, so there is nothing left to continue. "
        f"Would you like to hear about {offer.title} instead?"
    )


def _answer(words: str) -> str:
    tokens = _WORD.findall(words)
    if not tokens:
        return HELP.text
    best, score = UNKNOWN, 0
    for topic in (*TOPICS, HELP):
        hits = sum(token in topic.keywords for token in tokens)
        if hits > score:
            best, score = topic.text, hits
    return best


def _tail(text: str) -> str:
    """The last QUOTED_WORDS whitespace-separated words of `text`, with "... " when shortened."""
    starts = [match.start() for match in re.finditer(r"\S+", text)]
    if len(starts) <= QUOTED_WORDS:
        return text
    return "... " + text[starts[-QUOTED_WORDS] :]
