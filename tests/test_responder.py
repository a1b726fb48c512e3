"""Prompt messages and the built-in DemoResponder: history as heard, sentence streaming."""

from __future__ import annotations

import pytest

from server.responders.demo import DemoResponder
from server.responders.demo_topics import HELP, TOPICS, UNKNOWN, Topic
from server.responders.prompt import ConversationTurn, Prompt, Responder
from server.speech.segmenter import SpeechSegmenter

F31_REPLY = "10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff!"
F31_HEARD = "10, 9, 8, 7, 6,"


def user(text: str) -> ConversationTurn:
    return ConversationTurn("user", text)


def assistant(heard: str, full: str, *, interrupted: bool) -> ConversationTurn:
    return ConversationTurn("assistant", heard, full, interrupted)


async def deltas(*turns: ConversationTurn) -> list[str]:
    responder: Responder = DemoResponder()
    return [delta async for delta in responder.respond(Prompt("Be brief.", turns))]


async def reply(*turns: ConversationTurn) -> str:
    return "".join(await deltas(*turns))


def sentence_count(text: str) -> int:
    segmenter = SpeechSegmenter(first_clause=False, split_long=False)
    return len(segmenter.feed(text) + segmenter.flush())


def test_messages_hold_history_as_heard_with_a_note_after_each_cut_turn() -> None:
    prompt = Prompt(
        "Be brief.",
        (
            user("Count down."),
            assistant(F31_HEARD, F31_REPLY, interrupted=True),
            user("Hi."),
            assistant("Hello!", "Hello!", interrupted=False),
            user("Sure, let me check."),
            assistant("", "Sure, let me check that for you.", interrupted=True),
            user("Where did you stop?"),
        ),
    )
    assert prompt.as_messages() == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count down."},
        {"role": "assistant", "content": F31_HEARD},
        {"role": "system", "content": 'Note: the user interrupted you; they heard only: '
                                      f'"{F31_HEARD}"'},
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Sure, let me check."},
        {"role": "assistant", "content": ""},
        {"role": "system", "content": "Note: the user interrupted you; they heard nothing of it."},
        {"role": "user", "content": "Where did you stop?"},
    ]


def test_notes_are_configurable_and_braces_other_than_heard_stay_literal() -> None:
    prompt = Prompt(
        "",
        (user("Go"), assistant("One two", "One two three", interrupted=True),
         assistant("", "Four", interrupted=True)),
        interruption_note="[cut {after}: {heard}]",
        unheard_note="[unheard]",
    )
    assert prompt.as_messages() == [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "One two"},
        {"role": "system", "content": "[cut {after}: One two]"},
        {"role": "assistant", "content": ""},
        {"role": "system", "content": "[unheard]"},
    ]


@pytest.mark.parametrize(
    ("request_text", "topic"),
    [
        ("Tell me about the history of radio", TOPICS[0]),
        ("How do tides work?", TOPICS[1]),
        ("How do I bake bread?", TOPICS[2]),
        ("Tell me about the planets", TOPICS[3]),
        ("Who ran the first marathon?", TOPICS[4]),
        ("What do bees do in a hive?", TOPICS[5]),
        ("Hello!", HELP),
        ("What can you help me with?", HELP),
    ],
)
async def test_topics_are_matched_by_keywords(request_text: str, topic: Topic) -> None:
    assert await reply(user(request_text)) == topic.text


@pytest.mark.parametrize("text", [*(topic.text for topic in TOPICS), HELP.text, UNKNOWN])
def test_every_answer_is_long_enough_to_interrupt(text: str) -> None:
    assert 6 <= sentence_count(text) <= 10


async def test_unknown_prompt_lists_what_it_can_talk_about() -> None:
    answer = await reply(user("What is the airspeed velocity of a swallow?"))
    assert answer == UNKNOWN
    assert all(topic.title in answer for topic in TOPICS)


async def test_reply_streams_one_sentence_at_a_time_and_joins_exactly() -> None:
    parts = await deltas(user("How do tides work?"))
    assert "".join(parts) == TOPICS[1].text
    assert len(parts) == sentence_count(TOPICS[1].text)
    assert all(part.endswith(" ") for part in parts[:-1])
    assert parts[0] == "Tides are the slow rise and fall of the sea, and they are mostly the " \
                       "work of the Moon. "


async def test_replies_are_deterministic() -> None:
    turns = (user("Tell me about bees"), assistant("Honey", TOPICS[5].text, interrupted=True),
             user("what did you say?"))
    assert await deltas(*turns) == await deltas(*turns)


@pytest.mark.parametrize(
    ("request_text", "spoken"),
    [
        (f"say: {F31_REPLY}", F31_REPLY),
        ("SAY:Hello!  How can I help you today?", "Hello!  How can I help you today?"),
        ("Say:   \U0001f389\U0001f389 **Great job!** Well done.",
         "\U0001f389\U0001f389 **Great job!** Well done."),
        ("say: Dr. Lee paid $9.05.\nThen he left. ", "Dr. Lee paid $9.05.\nThen he left. "),
    ],
)
async def test_say_speaks_the_text_verbatim(request_text: str, spoken: str) -> None:
    assert await reply(user(request_text)) == spoken


async def test_say_with_nothing_after_it_explains() -> None:
    assert "nothing came after" in await reply(user("say:"))


async def test_f31_where_did_you_stop_answers_with_the_last_heard_item() -> None:
    answer = await reply(
        user(f"say: {F31_REPLY}"),
        assistant(F31_HEARD, F31_REPLY, interrupted=True),
        user("Where did you stop?"),
    )
    assert f'"{F31_HEARD}"' in answer
    assert "cut off" in answer
    assert "5" not in answer


@pytest.mark.parametrize(
    "question", ["What did you say?", "what was the last thing you said", "Where did you stop?"]
)
async def test_recall_quotes_only_the_last_heard_words(question: str) -> None:
    heard = "Tides are the slow rise and fall of the sea, and they"
    answer = await reply(
        user("How do tides work?"),
        assistant(heard, TOPICS[1].text, interrupted=True),
        user(question),
    )
    assert 'I was cut off after "... fall of the sea, and they"' in answer
    assert "mostly" not in answer


async def test_recall_after_an_unheard_reply_says_nothing_was_heard() -> None:
    answer = await reply(
        user("Before we continue?"),
        assistant("", "Before we continue, could you tell me your date of birth?",
                  interrupted=True),
        user("Sorry, can you repeat your question?"),
    )
    assert "You heard nothing of my last answer" in answer
    assert "birth" not in answer


async def test_recall_after_a_complete_reply_says_it_finished() -> None:
    answer = await reply(
        user("say: It is sunny today."),
        assistant("It is sunny today.", "It is sunny today.", interrupted=False),
        user("What did you say?"),
    )
    assert answer.startswith('I finished my last answer; it ended with "It is sunny today."')


async def test_recall_before_any_reply() -> None:
    assert "I have not said anything yet" in await reply(user("What did you say?"))


@pytest.mark.parametrize("command", ["continue", "Please go on.", "Keep going!"])
async def test_continue_resumes_exactly_where_the_listener_stopped_hearing(command: str) -> None:
    full = TOPICS[1].text
    heard = "Tides are the slow rise and fall of the sea,"
    answer = await reply(
        user("How do tides work?"),
        assistant(heard, full, interrupted=True),
        user(command),
    )
    assert answer == full[len(heard):].lstrip()
    assert answer.startswith("and they are mostly the work of the Moon.")


async def test_continue_after_an_unheard_reply_starts_it_from_the_beginning() -> None:
    answer = await reply(
        user(f"say: {F31_REPLY}"),
        assistant("", F31_REPLY, interrupted=True),
        user("continue"),
    )
    assert answer == F31_REPLY


async def test_continue_uses_the_last_reply_even_after_a_continuation() -> None:
    first_rest = F31_REPLY[len(F31_HEARD):].lstrip()
    answer = await reply(
        user(f"say: {F31_REPLY}"),
        assistant(F31_HEARD, F31_REPLY, interrupted=True),
        user("continue"),
        assistant("5, 4,", first_rest, interrupted=True),
        user("keep going"),
    )
    assert answer == "3, 2, 1, liftoff!"


async def test_continue_after_a_complete_reply_offers_a_topic_not_yet_discussed() -> None:
    answer = await reply(
        user("Tell me about the history of radio"),
        assistant(TOPICS[0].text, TOPICS[0].text, interrupted=False),
        user("continue"),
    )
    assert "already finished" in answer
    assert TOPICS[1].title in answer


async def test_continue_before_any_reply() -> None:
    assert "nothing to continue yet" in await reply(user("go on"))


async def test_empty_prompt_gets_the_help_reply() -> None:
    assert await reply() == HELP.text
