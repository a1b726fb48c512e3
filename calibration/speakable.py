"""Speakable text: what a TTS engine should read for a written reply, with an offset map back.

Piper and espeak-ng read emoji and markdown aloud ("🎉" becomes "party popper", `**` becomes
"asterisk asterisk") and Piper glues the words around an ellipsis into one phoneme word (both
measured on this machine, DESIGN.md section 6). `make_speakable` rewrites a written segment into
the text the engine reads and keeps, for every code point of that text, the span of the original
text it came from, so that word timings computed on the speakable text land on the written text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass

from calibration.spoken_numbers import number_spans
from calibration.units import SPOKEN_ARROWS

# Emoji and pictographs (Unicode emoji blocks plus the joiners, variation selectors, keycap and tag
# characters that only decorate them). Source: Unicode emoji-data.txt block ranges.
_EMOJI = (
    "\u200d\u20e3\u231a\u231b\u2328\u23cf\u23e9-\u23f3\u23f8-\u23fa\u25a0-\u25ff"
    "\u2600-\u27bf\u2b00-\u2bff\u3030\u303d\u3297\u3299\ufe0e\ufe0f"
    "\U0001f000-\U0001faff\U000e0020-\U000e007f"
)
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]{}\"']+", re.IGNORECASE)
_URL_HOST = re.compile(r"(?:https?://)?(?:www\.)?([^/?#:]+)", re.IGNORECASE)
_EMOJI_RUN = re.compile(f"[{_EMOJI}]+")
# Control characters but tab and line ends: Piper refuses text holding NUL ("embedded null
# character", its phonemizer takes a C string) and no engine reads the others; and U+FFFD, the
# replacement character of text that was not valid Unicode (server.responders.unicode_repair).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]+")
_LINK = re.compile(r"!?\[([^\]\n]+)\]\(([^)\s]+)\)")
_LINE_MARKER = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+|>[ \t]?|[-*+\u2022][ \t]+)|^[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*$",
    re.MULTILINE,
)
_BACKTICKS = re.compile(r"`+")
# Piper reads text inside [[ ]] as raw phonemes (piper.voice._PHONEME_BLOCK_PATTERN).
_DOUBLE_BRACKETS = re.compile(r"\[\[|\]\]")
_EMPHASIS = re.compile(r"\*{1,3}|_{1,3}|~~")
_ELLIPSIS = re.compile(r"\.{3,}|\u2026|\.(?: \.){2,}")
_ELLIPSIS_AT_END = re.compile(r"[\s\"')\]]*\Z")
# Titles before a capitalised name, read out in full: Piper's sentence splitter (espeak-ng's
# clause rules) otherwise ends a sentence at "Dr." and pauses there (measured on this machine).
_TITLES = {"Dr": "Doctor", "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor",
           "St": "Saint", "Gen": "General", "Capt": "Captain", "Sgt": "Sergeant"}
_TITLE = re.compile(r"\b(" + "|".join(_TITLES) + r")\.(?=\s+[A-Z])")


# LLM-era written forms (issue 27). Spans spoken as a short phrase that says what they are, or
# as nothing: tool-call markup, JSON objects, HTML tags, LaTeX, long opaque tokens.
_CODE_BLOCK = re.compile(
    r"^[ \t]*(?P<fence>```|~~~)[ \t]*(?P<lang>[\w+#.-]*)[^\n]*(?:\n(?P<body>.*?))??"
    r"(?:^[ \t]*(?P=fence)[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_TOOL_CALL = re.compile(r"<(tool_call|function_call)>.*?(?:</\1>|\Z)", re.DOTALL)
_JSON_OBJECT = re.compile(r'\{\s*"[^"\n]*"\s*:.*\}', re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_HTML_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z]{2,8});")
_LATEX = re.compile(r"\$\$.+?\$\$|\\\(.+?\\\)|\\\[.+?\\\]|\$[^$\n]*\\[A-Za-z]+[^$\n]*\$",
                    re.DOTALL)
_OPAQUE = re.compile(r"(?<!\S)\S{16,}(?!\S)")
OPAQUE_CODE_POINTS = 24
"""Length (code points) from which a whitespace-free token that is not a word or URL is spoken
as a short phrase; from 16 a hexadecimal token with digits and letters or one that mixes at
least 4 digits and 4 letters and has no "." already is (a short hash or id:
"3f786850e387550f"; not a version or file name)."""
LONGEST_WORD = 45
"""Code points of the longest English dictionary word ("pneumonoultramicroscopicsilicovolcano-
coniosis", Oxford English Dictionary): a longer token without whitespace is no word, and is
spoken as a short phrase so that it never holds the voice (Piper's first audio grew with a
token's length: 600 code points took 14.5 s, issue 27)."""
_HEX = re.compile(r"(?:0x)?[0-9a-fA-F]+")
_UNDERLINE = re.compile(r"^[ \t]*(?:={2,}|-{2,})[ \t]*$", re.MULTILINE)
_FOOTNOTE = re.compile(r"\[\^?\d{1,3}\]")
_CHECKBOX = re.compile(r"(?<!\S)\[[ xX]\](?=\s)")
_TABLE_RULE = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-{2,}:?[ \t]*\|)+[ \t]*:?-*:?[ \t]*$",
                         re.MULTILINE)
_TABLE_PIPE = re.compile(r"\|")
# Numbers said as meant: a range between two numbers ("3\u20135 years": "3 to 5"), scientific
# notation ("1e-9": "1 times ten to the minus 9"), powers ("x^2": "x squared").
_RANGE = re.compile(r"(?<![\d.,/-])\d+(?:[.,]\d+)?(?P<dash>[ \t]?[\u2013\u2014][ \t]?)\d"
                    r"|(?<![\d.,/-])\d{1,3}(?P<hyphen>-)\d{1,3}(?![\d.,/-])")
_SCIENTIFIC = re.compile(r"(?<=\d)[eE](?=[-+\u2212]?\d+\b)")
_EXPONENT_SIGN = re.compile(r"(?<=\d[eE])[-\u2212]")
_POWER = re.compile(r"\^([-\u2212]?\d+)")
_POWERS = {"2": "squared", "3": "cubed"}
_ARROW = re.compile("[" + "".join(SPOKEN_ARROWS) + "]")


def url_spans(text: str) -> Iterator[tuple[int, int, int, int]]:
    """(url start, url end, host start, host end) of every bare URL of `text` (code points).

    A URL starts with "http://", "https://" or "www." and ends at whitespace or a bracket or
    quote, without trailing sentence punctuation; its host excludes the scheme and "www."
    ("https://www.a.org/x" -> "a.org"). The speakable text sent to TTS keeps only the host.
    """
    for match in _URL.finditer(text):
        end = match.end()
        while end > match.start() and text[end - 1] in ".,;:!?":
            end -= 1
        host = _URL_HOST.match(text, match.start(), end)
        host_start, host_end = (host.start(1), host.end(1)) if host else (match.start(), end)
        yield match.start(), end, host_start, host_end


@dataclass(frozen=True, slots=True)
class SpeakableText:
    """A written segment and the text a TTS engine should read for it.

    Attributes:
        original: the written text, as given.
        text: the speakable text (may be empty or whitespace when nothing is speakable).
        sources: one (start, end) code-point span of `original` per code point of `text`: the
            original character it was copied from, or the whole written span it replaces.
    """

    original: str
    text: str
    sources: tuple[tuple[int, int], ...]

    @property
    def is_silent(self) -> bool:
        """True when there is nothing to speak (no letter, digit or symbol left)."""
        return not self.text.strip()

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Map the code-point span [start, end) of `text` to a span of `original`.

        Raises:
            ValueError: when the span is empty or outside `text`.
        """
        if not 0 <= start < end <= len(self.text):
            raise ValueError(f"span [{start}, {end}) is not inside the speakable text")
        return self.sources[start][0], self.sources[end - 1][1]


def make_speakable(original: str, language: str = "en") -> SpeakableText:
    """Rewrite a written segment into speakable text with an offset map back to `original`.

    Removed: control characters (but tab and line ends) and U+FFFD, emoji and pictographs,
    markdown emphasis (`**`, `__`, `*`, `_`, `~~` at word edges), backticks, `[[`/`]]`
    (Piper's raw-phoneme brackets), heading / quote / bullet markers and rules at line starts,
    setext underlines (`====`), task-list checkboxes (`[x]`), footnote marks (`[1]`), table
    rules and pipes, HTML tags,
    `<tool_call>` spans and JSON objects (tool-call markup), the URL part of `[text](url)`
    links, everything of a bare URL but its host name ("example.com";
    `url_spans`, shared with the ratio estimate).
    Spoken as a short phrase that says what it is: a fenced code block ("a python code block
    of 8 lines, shown on the page."), LaTeX ("a formula"), a hash or other long opaque token
    (`OPAQUE_CODE_POINTS`, not a URL or a word: "a hash", "a long code").
    Said as meant in `language` (ISO 639-1, the voice's; `spoken_numbers.number_spans`):
    amounts of money in the writer's locale ("$1,200.50", "1.200,50 \u20ac"), ordinals ("21st",
    "3e", "am 2. Mai") and roman numerals after a name or a counted noun ("Henry VIII",
    "World War II").
    Rewritten: HTML entities decoded (`&amp;` -> "&"); a range between numbers ("3\\u20135",
    "10-12") read "3 to 5"; scientific notation ("1e-9") read "1 times ten to the minus 9";
    powers ("x^2") read "x squared"; arrows read as their word (`SPOKEN_ARROWS`); an ellipsis
    becomes a comma (a full stop at the end); a title before a name ("Dr. Lee") is read in
    full ("Doctor Lee") so the engine does not end a sentence there. Earlier rules win where
    spans overlap (code blocks first).
    A removed run between two non-space characters leaves one space so that no words are glued
    together. Offsets are code points.
    """
    edits: dict[int, tuple[int, str]] = {}
    claimed = [False] * len(original)

    def claim(start: int, end: int, replacement: str) -> None:
        if start < end and not any(claimed[start:end]):
            edits[start] = (end, replacement)
            claimed[start:end] = [True] * (end - start)

    for match in _CONTROLS.finditer(original):
        claim(match.start(), match.end(), _gap(original, match.start(), match.end()))
    for match in _CODE_BLOCK.finditer(original):
        claim(match.start(), match.end(), _code_block_phrase(match))
    for pattern, phrase in ((_TOOL_CALL, ""), (_JSON_OBJECT, ""), (_LATEX, "a formula")):
        for match in pattern.finditer(original):
            claim(match.start(), match.end(), _phrase(original, match.start(), match.end(),
                                                      phrase))
    for match in _HTML_TAG.finditer(original):
        claim(match.start(), match.end(), _gap(original, match.start(), match.end()))
    for match in _HTML_ENTITY.finditer(original):
        claim(match.start(), match.end(), html.unescape(match.group()))
    for match in _OPAQUE.finditer(original):
        if _is_opaque(match.group()):
            token = match.group()
            phrase = ("a hash" if _HEX.fullmatch(token) else "a path" if token.count("/") > 1
                      and "=" not in token else "a long code")
            claim(match.start(), match.end(), phrase)
    for pattern in (_UNDERLINE, _CHECKBOX, _FOOTNOTE, _TABLE_RULE):
        for match in pattern.finditer(original):
            claim(match.start(), match.end(), "")
    for match in _TABLE_PIPE.finditer(original):
        claim(match.start(), match.end(), _gap(original, match.start(), match.end()))
    for start, end, words in number_spans(original, language):
        before = " " if start > 0 and original[start - 1].isalnum() else ""
        after = " " if end < len(original) and original[end].isalnum() else ""
        claim(start, end, f"{before}{words}{after}")
    for match in _RANGE.finditer(original):
        group = "dash" if match.group("dash") is not None else "hyphen"
        claim(match.start(group), match.end(group), " to ")
    for match in _SCIENTIFIC.finditer(original):
        claim(match.start(), match.end(), " times ten to the ")
    for match in _EXPONENT_SIGN.finditer(original):
        claim(match.start(), match.end(), "minus ")
    for match in _POWER.finditer(original):
        exponent = match.group(1).replace("\u2212", "-")
        claim(match.start(), match.end(),
              f" {_POWERS.get(exponent) or 'to the power of ' + exponent.replace('-', 'minus ')}")
    for match in _ARROW.finditer(original):
        claim(match.start(), match.end(), _phrase(original, match.start(), match.end(),
                                                  SPOKEN_ARROWS[match.group()]))
    for match in _LINK.finditer(original):
        claim(match.start(), match.start(1), "")
        claim(match.end(1), match.end(), "")
    for start, end, host_start, host_end in url_spans(original):
        claim(start, host_start, "")
        claim(host_end, end, "")
    for match in _LINE_MARKER.finditer(original):
        claim(match.start(), match.end(), "")
    for match in _BACKTICKS.finditer(original):
        claim(match.start(), match.end(), "")
    for match in _DOUBLE_BRACKETS.finditer(original):
        claim(match.start(), match.end(), "")
    for match in _EMPHASIS.finditer(original):
        if _is_emphasis(original, match.start(), match.end()):
            claim(match.start(), match.end(), "")
    for match in _EMOJI_RUN.finditer(original):
        claim(match.start(), match.end(), _gap(original, match.start(), match.end()))
    for match in _TITLE.finditer(original):
        claim(match.start(), match.end(), _TITLES[match.group(1)])
    for match in _ELLIPSIS.finditer(original):
        at_end = _ELLIPSIS_AT_END.match(original, match.end()) is not None
        claim(match.start(), match.end(), "." if at_end else ",")

    chars: list[str] = []
    sources: list[tuple[int, int]] = []
    for piece, span in _pieces(original, edits):
        chars.append(piece)
        sources.extend([span] * len(piece))
    return SpeakableText(original=original, text="".join(chars), sources=tuple(sources))


def _pieces(
    original: str, edits: dict[int, tuple[int, str]]
) -> Iterator[tuple[str, tuple[int, int]]]:
    """Yield (speakable piece, original span) in order: kept characters one by one, replacements."""
    index = 0
    while index < len(original):
        if index in edits:
            end, replacement = edits[index]
            if replacement:
                yield replacement, (index, end)
            index = end
        else:
            yield original[index], (index, index + 1)
            index += 1


def _is_emphasis(text: str, start: int, end: int) -> bool:
    """True when a `*`/`_`/`~~` run at [start, end) opens or closes emphasis (CommonMark flanking,
    simplified): it touches a word on one side and whitespace, punctuation or a text edge on the
    other. Runs between two word characters (snake_case, 2*3) or between spaces stay."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    opens = not after.isspace() and not before.isalnum()
    closes = not before.isspace() and not after.isalnum()
    return opens or closes


def _code_block_phrase(block: re.Match[str]) -> str:
    """What the voice says for a fenced code block: "a python code block of 8 lines, shown on
    the page." (its language when the fence names one; the lines of its body, blank ones
    too)."""
    body = (block.group("body") or "").rstrip("\n")
    language = f"{block.group('lang')} " if block.group("lang").isalpha() else ""
    if not body:
        return f"an empty {language}code block."
    lines = body.count("\n") + 1
    size = "one line" if lines == 1 else f"{lines} lines"
    return f"a {language}code block of {size}, shown on the page."


def _is_opaque(token: str) -> bool:
    """Whether a long whitespace-free token (`_OPAQUE`: >= 16 code points) is no word to read:
    a hash, base64, a long id, a path (see `OPAQUE_CODE_POINTS`). A URL is not (its host is
    spoken), nor a run of words (letters joined by hyphens or apostrophes, in one case after
    its first letter, with a vowel, once the punctuation and emphasis around it are set
    aside), unless it is longer than any word (`LONGEST_WORD`)."""
    if "://" in token or token.startswith("www."):
        return False
    token = token.strip("*_~`\"'()[]{}<>.,;:!?")
    if len(token) < OPAQUE_CODE_POINTS:
        digits = sum(char.isdigit() for char in token)
        letters = sum(char.isalpha() for char in token)
        hexadecimal = _HEX.fullmatch(token) is not None and digits > 0 and letters > 0
        return hexadecimal or (digits >= 4 and letters >= 4 and "." not in token)
    if len(token) > LONGEST_WORD:
        return True
    wordlike = all(char.isalpha() or char in "-'\u2019" for char in token)
    one_case = token[1:].islower() or token.isupper()
    return not (wordlike and one_case and any(char in "aeiouyAEIOUY" for char in token))


def _phrase(text: str, start: int, end: int, phrase: str) -> str:
    """`phrase` to stand for text[start:end], with a space on each side where it would glue to
    a neighbouring non-space character ("" when `phrase` is empty: then `_gap`)."""
    if not phrase:
        return _gap(text, start, end)
    before = " " if start > 0 and not text[start - 1].isspace() else ""
    after = " " if end < len(text) and not text[end].isspace() else ""
    return f"{before}{phrase}{after}"


def _gap(text: str, start: int, end: int) -> str:
    """A space when removing [start, end) would glue two non-space characters, else ""."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return "" if before.isspace() or after.isspace() else " "
