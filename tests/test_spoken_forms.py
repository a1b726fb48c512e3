"""The written -> spoken table of LLM-era text (issue 27): what the voice reads for each kind
of written form (`make_speakable`), and, with the real Piper voice, that the heard text follows
what was spoken (a URL whose host was spoken is heard whole; an arrow spoken as a word has its
own mark)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from benchmarks.calibration_corpus import load_corpus
from calibration.speakable import make_speakable
from calibration.units import text_units
from server.speech.segmenter import SpeechSegmenter
from tests.conftest import loaded_synthesizer

SPOKEN_FORMS = [
    # numbers said as meant
    ("It takes 3\u20135 years.", "It takes 3 to 5 years."),
    ("Read pages 10-12 today.", "Read pages 10 to 12 today."),
    ("Born on 2023-10-05.", "Born on 2023-10-05."),
    ("About 1e-9 seconds.", "About 1 times ten to the minus 9 seconds."),
    ("Roughly 6.02e23 atoms.", "Roughly 6.02 times ten to the 23 atoms."),
    ("Area is x^2 and volume x^3.", "Area is x squared and volume x cubed."),
    ("Then 2^10 is 1024.", "Then 2 to the power of 10 is 1024."),
    # symbols spoken as words
    ("Go left \u2192 then right.", "Go left to then right."),
    # markup and HTML spoken as their text
    ("Salt &amp; pepper, &lt;3 &#39;ok&#39;.", "Salt & pepper, <3 'ok'."),
    ("This is <b>bold</b> and<br/>that.", "This is bold and that."),
    ("Title\n=====", "Title\n"),
    ("- [x] done\n- [ ] todo", " done\n todo"),
    ("| Name | Age |\n|------|-----|\n| Ann | 3 |", " Name  Age \n\n Ann  3 "),
    ("**Bold** and `code` here.", "Bold and code here."),
    # spoken as a short phrase, or nothing
    ("```python\nimport os\n\nprint(os.getcwd())\n```\n",
     "a python code block of 3 lines, shown on the page.\n"),
    ("```\nx = 1\n```", "a code block of one line, shown on the page."),
    ("```\n```", "an empty code block."),
    ("Commit 3f786850e387550fdab836ed7e6dc881de23001b is it.", "Commit a hash is it."),
    ("Token aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ= here.", "Token a long code here."),
    ("Your id is usr_01HZX3K9QWERTY7ABCDEF123 now.", "Your id is a long code now."),
    ("The fraction $\\frac{a}{b}$ simplifies.", "The fraction a formula simplifies."),
    ("Inline \\(x^2 + y^2\\) math.", "Inline a formula math."),
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call> Sure.',
     " Sure."),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}}', ""),
    ("Edit src/server/speech/speakable.py today.", "Edit a path today."),
    ("Then x" + "Q9z" * 200 + " ends.", "Then a long code ends."),
    ("Count 1,2,3,4,5,6,7,8,9,10,11,12 now.", "Count a long code now."),
    ("Short hash 3f786850e387550f here.", "Short hash a hash here."),
    ("At 2023-10-05T12:30:00Z sharp.", "At 2023-10-05T12:30:00Z sharp."),
    ("Use v1.2.3-beta.4+build5 now.", "Use v1.2.3-beta.4+build5 now."),
    # kept as written
    ("A never-ending-story-of-all-time indeed.", "A never-ending-story-of-all-time indeed."),
    ("It is **Pneumonoultramicroscopicsilicovolcanoconiosis**.",
     "It is Pneumonoultramicroscopicsilicovolcanoconiosis."),
    ("Pneumonoultramicroscopicsilicovolcanoconiosis is a word.",
     "Pneumonoultramicroscopicsilicovolcanoconiosis is a word."),
    # money, ordinals and regnal numbers said as meant (calibration.spoken_numbers, num2words)
    ("It costs $5 or $10.", "It costs five dollars or ten dollars."),
    ("Rent is $1,200.50 a month.",
     "Rent is one thousand two hundred dollars and fifty cents a month."),
    ("A coffee is \u20ac5 here.", "A coffee is five euro here."),
    ("Tea costs \u00a33.20, milk \u00a31.", "Tea costs three pounds sterling and twenty pence, "
     "milk one pound sterling."),
    ("Only $0.99 today.", "Only ninety-nine cents today."),
    ("The bowl was \u00a5500.", "The bowl was five hundred yen."),
    ("The 1st, 2nd, 3rd and 21st.", "The first, second, third and twenty-first."),
    ("Henry VIII had six wives.", "Henry the eighth had six wives."),
    ("Louis XIV built it.", "Louis the fourteenth built it."),
    ("After World War II it grew.", "After World War two it grew."),
    ("Read Chapter IV first.", "Read Chapter four first."),
    ("Queen Elizabeth I.", "Queen Elizabeth the first."),
    ("Then I went home, and Henry V was king.", "Then I went home, and Henry V was king."),
    ("Version 1.200 costs $5M.", "Version 1.200 costs $5M."),
    ("See https://docs.python.org/3/library for more.", "See docs.python.org for more."),
]


@pytest.mark.parametrize(("written", "spoken"), SPOKEN_FORMS)
def test_the_spoken_form_of_each_written_form(written: str, spoken: str) -> None:
    assert make_speakable(written).text == spoken


LOCALE_FORMS = [
    ("de", "Das kostet 1.200,50 \u20ac im Monat.",
     "Das kostet eintausendzweihundert Euro und fünfzig Cent im Monat."),
    ("de", "Wir treffen uns am 2. Mai, der 3. Platz geht an Anna.",
     "Wir treffen uns am zweiten Mai, der dritte Platz geht an Anna."),
    ("de", "Ich habe 2. Dann ging ich.", "Ich habe 2. Dann ging ich."),
    ("fr", "Le 3e jour, le 1er mai, Louis XIV paya 1 200,50 \u20ac.",
     "Le troisième jour, le premier mai, Louis quatorze paya mille deux cents euros et "
     "cinquante centimes."),
    ("es", "Es la 2\u00aa vez y cuesta 5 \u20ac.", "Es la segunda vez y cuesta cinco euros."),
    ("it", "Il 1\u00ba premio costa 3,50 \u20ac.",
     "Il primo premio costa tre euro e cinquanta centesimi."),
    ("nl", "Voor de 2e keer: \u20ac 12,50.",
     "Voor de tweede keer: twaalf euro en vijftig cent."),
    ("cmn", "\u4ef7\u683c\u662f $5\u3002", "\u4ef7\u683c\u662f $5\u3002"),
]
"""(voice language, written, spoken): the writer's locale decides the separators ("1.200,50"
is 1200.50 in German, French groups thousands with a space) and the words are the language's
(num2words); a language without a converter keeps the written form for its voice."""


@pytest.mark.parametrize(("language", "written", "spoken"), LOCALE_FORMS)
def test_numbers_are_said_in_the_writers_locale(language: str, written: str, spoken: str) -> None:
    assert make_speakable(written, language).text == spoken


@pytest.mark.parametrize(("text", "heard_whole"), [
    ("Docs at https://docs.python.org/3/library are good.", "https://docs.python.org/3/library"),
    ("Go left \u2192 then right.", "\u2192"),
    ("Commit 3f786850e387550fdab836ed7e6dc881de23001b is it.",
     "3f786850e387550fdab836ed7e6dc881de23001b"),
    ("```python\nimport os\nprint(os.getcwd())\n```\n",
     "```python\nimport os\nprint(os.getcwd())\n```"),
    ("Rent is $1,200.50 a month.", "$1,200.50"),
    ("Henry VIII had six wives.", "VIII"),
    ("The 21st time.", "21st"),
])
def test_a_written_token_whose_spoken_form_played_has_a_mark_to_its_end(
    text: str, heard_whole: str,
) -> None:
    """Piper: some mark ends exactly at the end of the last unit of the written token (so a
    cut after its spoken form keeps every unit of it), and one mark lies within it (its own)."""
    piper = loaded_synthesizer("piper")
    marks = [mark for chunk in piper.synthesize(text) for mark in chunk.marks]
    start = text.index(heard_whole)
    end = start + len(heard_whole)
    last_unit_end = max(unit.end for unit in text_units(text) if start <= unit.start < end)
    assert any(mark.char_end == last_unit_end for mark in marks), marks
    own = [mark for mark in marks if mark.char_start >= start and mark.char_end <= end]
    assert own, f"no mark of its own for {heard_whole!r}: {marks}"


LLM_CORPUS = [reply for reply in load_corpus() if reply.category == "llm"]
LITERAL_MARKUP = re.compile(r"[<>{}\[\]|`#*^~_\\=]|\$(?!\d)|&\w+;")
"""Characters and forms the voice must not read out: tag and JSON brackets, table pipes,
backticks, heading / emphasis marks, LaTeX, HTML entities ("$" only before a number)."""


def segments(text: str) -> list[str]:
    segmenter = SpeechSegmenter()
    return [text[start:end] for start, end in segmenter.feed(text) + segmenter.flush()]


def test_the_llm_corpus_is_large_enough() -> None:
    assert len(LLM_CORPUS) >= 40


@pytest.mark.parametrize("reply", LLM_CORPUS, ids=[reply.id for reply in LLM_CORPUS])
def test_no_markup_code_or_json_is_spoken_literally(reply: Any) -> None:
    spoken = [make_speakable(segment).text for segment in segments(reply.text)]
    literal = [match.group() for text in spoken for match in LITERAL_MARKUP.finditer(text)]
    assert literal == [], spoken


@pytest.mark.parametrize("reply", LLM_CORPUS, ids=[reply.id for reply in LLM_CORPUS])
def test_every_written_token_spoken_is_heard_whole_once_its_marks_played(reply: Any) -> None:
    """Piper, segment by segment as the server speaks: each written token (a run without
    whitespace) of which some unit has a mark has its last unit inside a mark too, so a cut
    after its spoken form keeps it whole (issue 27: URLs, arrows, code blocks were dropped)."""
    piper = loaded_synthesizer("piper")
    text = reply.text
    covered = bytearray(len(text))
    segmenter = SpeechSegmenter()
    for start, end in segmenter.feed(text) + segmenter.flush():
        for chunk in piper.synthesize(text[start:end]):
            for mark in chunk.marks:
                covered[start + mark.char_start:start + mark.char_end] = (
                    b"\x01" * (mark.char_end - mark.char_start))
    units = text_units(text)
    dropped = []
    for token in re.finditer(r"\S+", text):
        inside = [unit for unit in units if token.start() <= unit.start < token.end()]
        if any(covered[unit.start] for unit in inside) and not covered[inside[-1].end - 1]:
            dropped.append(token.group())
    assert dropped == []
