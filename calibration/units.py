"""Text units of a written reply: what counts as one heard word, with exact code-point spans.

Sources: REFERENCE.md section 5.1 (the Qwen3-Omni calibration units: letter/digit runs with inner
apostrophes, one unit per CJK ideograph, NFKC + casefold normalisation, protected digits and
negations), extended as REFERENCE.md section 8 items 4 and 5 suggest:

- one unit per CJK ideograph of every block (URO, Extensions A to I, compatibility ideographs),
  per kana and per Hangul syllable (a conjoining-jamo syllable is one unit too);
- a written token that is spoken as several words is ONE unit whose `spoken` lists the words a
  TTS says: numbers, currency, percent, clock times, ordinals, fractions, phone-like digit groups,
  years, abbreviations with periods, spoken symbols and all-caps acronyms (see `text_units`);
- unit ends never split a grapheme cluster (`calibration.graphemes`, UAX #29); numbers are
  read by `calibration.number_words`.

All offsets are Python code-point indices into the text given. Nothing here does I/O.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from calibration.graphemes import grapheme_boundaries, in_ranges
from calibration.number_words import (
    cardinal_words,
    decimal_words,
    digit_words,
    integer_reading,
    ordinal_words,
    plural,
)

MS_PER_SPOKEN_WORD = 400
"""Uniform test TTS and interruption cases file: every spoken word lasts 400 ms."""
MS_PER_CJK_UNIT = 250
"""Uniform test TTS and interruption cases file: every CJK / kana / Hangul unit lasts 250 ms."""


@dataclass(frozen=True, slots=True)
class TextUnit:
    """One heard-able unit of a written text.

    Attributes:
        start: inclusive code-point offset into the original text.
        end: exclusive code-point offset; always a grapheme cluster boundary.
        norm: comparison form of the written token: NFKC, casefold, curly apostrophe -> "'".
        spoken: the words a TTS says for the token, each in comparison form
            ("$9.05" -> ("nine", "dollars", "and", "five", "cents"), "Dr." -> ("doctor",)).
        protected: the unit contains a digit or is a negation; an ASR edit to it is never trusted.
        cjk: the unit is one CJK ideograph, kana or Hangul syllable (250 ms in the timing rule).
    """

    start: int
    end: int
    norm: str
    spoken: tuple[str, ...]
    protected: bool
    cjk: bool


# ---------------------------------------------------------------------------------------------
# Character classes

_CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x115F),  # Hangul choseong (a conjoining syllable starts here)
    (0x2F00, 0x2FD5),  # Kangxi radicals (NFKC maps them to ideographs)
    (0x3005, 0x3007),  # iteration mark, closing mark, ideographic zero
    (0x303B, 0x303B),  # 〻
    (0x3041, 0x3096),  # hiragana
    (0x309D, 0x309F),  # hiragana iteration marks, ゟ
    (0x30A1, 0x30FA),  # katakana
    (0x30FC, 0x30FF),  # ー ヽ ヾ ヿ
    (0x3131, 0x318E),  # Hangul compatibility jamo
    (0x31F0, 0x31FF),  # katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97C),  # Hangul jamo extended A (choseong)
    (0xAC00, 0xD7A3),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9D),  # half-width katakana
    (0x1B000, 0x1B16F),  # kana supplement, kana extended A, small kana extension
    (0x20000, 0x2FA1F),  # Extensions B-F, I and the compatibility supplement
    (0x30000, 0x323AF),  # Extensions G, H
)
_CJK_STARTS = [lo for lo, _ in _CJK_RANGES]

# Character class of the ideograph / kana / Hangul ranges above, for regex look-aheads.
_CJK_CLASS = "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES) + "]"

_APOSTROPHES = frozenset("'\u2019")
_WORD_JOINERS = _APOSTROPHES | {"\u00ad"}  # inner apostrophes and soft hyphens join a word
_APOSTROPHE_MAP = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00ad": None})


def is_cjk_char(ch: str) -> bool:
    """True for a CJK ideograph (any block), kana letter or Hangul syllable / leading jamo."""
    cp = ord(ch)
    return cp >= _CJK_STARTS[0] and in_ranges(cp, _CJK_STARTS, _CJK_RANGES)


def _is_word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LN"


def _is_space(ch: str) -> bool:
    return ch.isspace() or ch == "\u200b"


def normalize(token: str) -> str:
    """Comparison form of a written token: NFKC, casefold, curly/modifier apostrophe -> "'",
    soft hyphens removed."""
    return unicodedata.normalize("NFKC", token).casefold().translate(_APOSTROPHE_MAP)


# ---------------------------------------------------------------------------------------------
# Written tokens with a spoken form of their own

_NEGATIONS = frozenset({
    "not", "no", "never", "cannot", "nor", "don't", "can't", "won't", "isn't", "aren't",
    "wasn't", "didn't", "doesn't", "shouldn't", "wouldn't", "couldn't",
    "不", "没", "沒", "无", "無", "非", "别", "別", "勿", "未",
})

# All-caps words of 2-5 letters that are read as words, not spelled (emphasis, interjections).
_ACRONYM_EXCEPTIONS = frozenset({
    "OK", "NO", "NOT", "YES", "THE", "AND", "BUT", "FOR", "YOU", "ARE", "IS", "IT", "WAS", "DO",
    "GO", "SO", "TO", "OF", "ON", "IN", "AT", "BE", "BY", "IF", "OR", "UP", "ME", "MY", "WE",
    "HE", "SHE", "HI", "HEY", "OH", "WOW", "NEW", "NOW", "ALL", "STOP", "HELP", "FREE", "NEVER",
    "MUST", "VERY", "ONLY", "WILL", "CAN", "NOTE", "WAIT", "DONE", "GOOD", "GREAT", "THIS",
    "THAT", "WHAT", "WHY", "HOW", "WHO", "OKAY", "YEAH",
})
# Spoken forms that differ from the written word.
_ALIASES = {"ok": "okay"}

_ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "dr": ("doctor",), "mr": ("mister",), "mrs": ("missus",), "ms": ("miz",),
    "st": ("saint",), "jr": ("junior",), "sr": ("senior",), "prof": ("professor",),
    "vs": ("versus",), "etc": ("et", "cetera"), "mt": ("mount",),
    "approx": ("approximately",),
}
_DOTTED_ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "eg": ("for", "example"), "ie": ("that", "is"),
}
_CURRENCIES: dict[str, tuple[str, str, str | None, str | None]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", None, None),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}
SPOKEN_ARROWS = {"\u2192": "to", "\u21d2": "implies"}
"""Arrows written between words and the word they are spoken as ("Go left → then right"); the
speakable text (`calibration.speakable`) says that word, where Piper would say "right arrow"."""
_SYMBOLS = {
    "+": "plus", "=": "equals", "&": "and", "@": "at", "%": "percent",
    "\uff0b": "plus", "\uff1d": "equals", "\uff06": "and", "\uff20": "at", "\uff05": "percent",
    **SPOKEN_ARROWS,
}
_SYMBOL_NEIGHBOURS = frozenset(".,;:!?()[]\"'")
_TOKEN_STARTS = frozenset("$€£¥₹-\u2212") | frozenset(_SYMBOLS)

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_NO_WORD_AFTER = rf"(?!(?!{_CJK_CLASS})[^\W_])"  # not followed by a non-CJK letter or digit
_NO_WORD_BEFORE = r"(?<![^\W_])"
_SIGN = rf"(?:{_NO_WORD_BEFORE}(?P<sign>[-\u2212]))?"

_Reader = Callable[[re.Match[str]], tuple[str, ...]]


_CURRENCY_WORDS = {name: symbol for symbol, names in _CURRENCIES.items() for name in names[:2]}


def currency_symbol(word: str) -> str | None:
    """The currency symbol whose amounts are read with `word` ("dollars" -> "$", "euro" -> "€"),
    None for any other word (comparison form, see `normalize`)."""
    return _CURRENCY_WORDS.get(word)


def _letters(token: str) -> tuple[str, ...]:
    return tuple(normalize(ch) for ch in token if _is_word_char(ch))


def _read_currency(m: re.Match[str]) -> tuple[str, ...]:
    one, many, sub_one, sub_many = _CURRENCIES[m["sym"]]
    whole = int(m["int"].replace(",", ""))
    frac = m["frac"]
    main = (*cardinal_words(whole), one if whole == 1 else many)
    if frac is None:
        return main
    if len(frac) > 2 or sub_one is None or sub_many is None:
        return (*decimal_words(whole, frac), many)
    cents = int(frac.ljust(2, "0"))
    if cents == 0:
        return main
    sub = (*cardinal_words(cents), sub_one if cents == 1 else sub_many)
    return sub if whole == 0 else (*main, "and", *sub)


def _read_phone(m: re.Match[str]) -> tuple[str, ...]:
    return digit_words("".join(ch for ch in m[0] if ch.isdigit()))


def _minute_words(minute: int) -> tuple[str, ...]:
    return ("oh", *cardinal_words(minute)) if 0 < minute < 10 else cardinal_words(minute)


def _read_time(m: re.Match[str]) -> tuple[str, ...]:
    hour = cardinal_words(int(m["h"]))
    minute = int(m["m"])
    if m["ap"]:
        return (*hour, *(_minute_words(minute) if minute else ()), *_letters(m["ap"]))
    return (*hour, *(_minute_words(minute) if minute else ("o'clock",)))


def _read_hour(m: re.Match[str]) -> tuple[str, ...]:
    return (*cardinal_words(int(m["h"])), *_letters(m["ap"]))


def _read_percent(m: re.Match[str]) -> tuple[str, ...]:
    return (*_read_number(m), "percent")


def _read_ordinal(m: re.Match[str]) -> tuple[str, ...]:
    return ordinal_words(int(m["int"].replace(",", "")))


def _read_fraction(m: re.Match[str]) -> tuple[str, ...]:
    numerator, denominator = int(m["a"]), int(m["b"])
    head = cardinal_words(numerator)
    if denominator in (0, 1):
        return (*head, "over", *cardinal_words(denominator))
    if denominator == 2:
        return (*head, "half" if numerator == 1 else "halves")
    if denominator == 4:
        return (*head, "quarter" if numerator == 1 else "quarters")
    name = ordinal_words(denominator)
    last = name[-1] if numerator == 1 else name[-1] + "s"
    return (*head, *name[:-1], last)


def _read_version(m: re.Match[str]) -> tuple[str, ...]:
    words: list[str] = []
    for i, group in enumerate(m[0].split(".")):
        if i:
            words.append("point")
        words.extend(integer_reading(group, year=False))
    return tuple(words)


def _read_number(m: re.Match[str]) -> tuple[str, ...]:
    digits = m["int"]
    frac = m["frac"]
    if frac is not None:
        words = decimal_words(int(digits.replace(",", "")), frac)
    elif "," in digits:
        words = cardinal_words(int(digits.replace(",", "")))
    else:
        words = integer_reading(digits, year=m["sign"] is None)
    if m["sign"]:
        words = ("minus", *words)
    if m.groupdict().get("plural"):
        words = (*words[:-1], plural(words[-1]))
    return words


def _read_abbreviation(m: re.Match[str]) -> tuple[str, ...]:
    return _ABBREVIATIONS[m["abbr"].lower()]


def _read_dotted(m: re.Match[str]) -> tuple[str, ...]:
    letters = _letters(m[0])
    return _DOTTED_ABBREVIATIONS.get("".join(letters), letters)


_MATCHERS: tuple[tuple[re.Pattern[str], _Reader], ...] = (
    (re.compile(rf"(?P<sym>[$€£¥₹])(?P<int>{_NUM})(?:\.(?P<frac>\d+))?{_NO_WORD_AFTER}"),
     _read_currency),
    (re.compile(rf"(?<!\d)(?:\d{{1,3}}-)?(?:\d{{3}}-)?\d{{3}}-\d{{4}}(?![\d-]){_NO_WORD_AFTER}"),
     _read_phone),
    (re.compile(
        rf"(?<![\d:])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?!\d|:\d)"
        rf"(?P<ap>[ap]\.?m\b\.?)?{_NO_WORD_AFTER}", re.IGNORECASE),
     _read_time),
    (re.compile(rf"(?<!\d)(?P<h>1[0-2]|0?\d)(?P<ap>[ap]\.?m\b\.?){_NO_WORD_AFTER}",
                re.IGNORECASE),
     _read_hour),
    (re.compile(rf"{_SIGN}(?P<int>{_NUM})(?:\.(?P<frac>\d+))?[%\uff05]"), _read_percent),
    (re.compile(rf"(?P<int>{_NUM})(?:st|nd|rd|th){_NO_WORD_AFTER}", re.IGNORECASE),
     _read_ordinal),
    (re.compile(rf"(?<![\d/])(?P<a>\d+)/(?P<b>\d+)(?![\d/]){_NO_WORD_AFTER}"), _read_fraction),
    (re.compile(rf"(?<![\d.])\d+(?:\.\d+){{2,}}(?!\.\d){_NO_WORD_AFTER}"), _read_version),
    (re.compile(rf"{_SIGN}(?P<int>{_NUM})(?:\.(?P<frac>\d+))?(?P<plural>s)?{_NO_WORD_AFTER}"),
     _read_number),
    (re.compile(rf"{_NO_WORD_BEFORE}(?P<abbr>{'|'.join(_ABBREVIATIONS)})\.", re.IGNORECASE),
     _read_abbreviation),
    (re.compile(rf"{_NO_WORD_BEFORE}(?:[^\W\d_]\.)+[^\W\d_](?![^\W_])\.?"), _read_dotted),
)


def _match_token(text: str, pos: int) -> tuple[int, tuple[str, ...]] | None:
    """(end, spoken) of a written token with its own spoken form starting at `pos`, if any."""
    ch = text[pos]
    if ch in _SYMBOLS:
        before = text[pos - 1] if pos else " "
        after = text[pos + 1] if pos + 1 < len(text) else " "
        if all(c.isspace() or c.isalnum() or c in _SYMBOL_NEIGHBOURS for c in (before, after)):
            return pos + 1, (_SYMBOLS[ch],)
        return None
    for pattern, reader in _MATCHERS:
        m = pattern.match(text, pos)
        if m and not any(is_cjk_char(c) for c in m[0]):
            return m.end(), reader(m)
    return None


def _is_acronym(piece: str) -> bool:
    return (
        piece.isalpha() and piece.isupper() and 2 <= len(piece) <= 5
        and piece not in _ACRONYM_EXCEPTIONS
    )


@lru_cache(maxsize=4096)
def _word_spoken(token: str) -> tuple[str, ...]:
    """Spoken words of a letter/digit run: digit runs as numbers, acronyms letter by letter.

    Cached per token: a reply's words repeat, and the units of every new reply text are
    computed on the event loop when it is calibrated."""
    text = unicodedata.normalize("NFKC", token)
    pieces: list[str] = []
    for ch in text:
        digit = ch.isdigit()
        if pieces and pieces[-1][-1].isdigit() == digit:
            pieces[-1] += ch
        else:
            pieces.append(ch)
    words: list[str] = []
    for raw in pieces:
        piece = raw.replace("\u00ad", "").strip("'\u2019")
        if not piece:
            continue
        if piece[0].isdigit():
            words.extend(integer_reading(piece))
        elif _is_acronym(piece):
            words.extend(_letters(piece))
        elif piece.endswith("s") and _is_acronym(piece[:-1]):
            words.extend((*_letters(piece[:-1]), "s"))
        else:
            word = normalize(piece)
            words.append(_ALIASES.get(word, word))
    return tuple(words)


def is_protected(norm: str) -> bool:
    """True for a comparison-form token (see `normalize`) that contains a digit or is a negation
    ("not", "never", "don't", "不", ...; REFERENCE.md 5.1)."""
    return (
        any(ch.isdigit() for ch in norm)
        or norm in _NEGATIONS
        or (len(norm) > 3 and norm.endswith("n't"))
    )


def _word_end(text: str, pos: int, boundary: bytearray) -> int:
    """End of the letter/digit run starting at `pos` (inner apostrophes join; CJK splits)."""
    n = len(text)
    end = _next_boundary(boundary, pos)
    while end < n:
        ch = text[end]
        if _is_word_char(ch) and not is_cjk_char(ch):
            end = _next_boundary(boundary, end)
        elif (
            ch in _WORD_JOINERS
            and end + 1 < n
            and boundary[end + 1]
            and _is_word_char(text[end + 1])
            and not is_cjk_char(text[end + 1])
        ):
            end = _next_boundary(boundary, end + 1)
        else:
            break
    return end


def _next_boundary(boundary: bytearray, pos: int) -> int:
    pos += 1
    while not boundary[pos]:
        pos += 1
    return pos


def _make_unit(text: str, start: int, end: int, spoken: tuple[str, ...] | None,
               cjk: bool) -> TextUnit:
    norm = normalize(text[start:end])
    if spoken is None:
        spoken = (norm,) if cjk else _word_spoken(text[start:end])
    return TextUnit(start, end, norm, spoken, is_protected(norm), cjk)


@lru_cache(maxsize=256)
def _units(text: str) -> tuple[TextUnit, ...]:
    n = len(text)
    boundary = bytearray(n + 1)
    for b in grapheme_boundaries(text):
        boundary[b] = 1
    units: list[TextUnit] = []
    pos = 0
    while pos < n:
        ch = text[pos]
        if is_cjk_char(ch):
            end = _next_boundary(boundary, pos)
            units.append(_make_unit(text, pos, end, None, cjk=True))
            pos = end
            continue
        word = _is_word_char(ch)
        token = _match_token(text, pos) if word or ch in _TOKEN_STARTS else None
        if token is not None:
            end = token[0]
            while not boundary[end]:
                end += 1
            units.append(_make_unit(text, pos, end, token[1], cjk=False))
            pos = end
        elif word:
            end = _word_end(text, pos, boundary)
            units.append(_make_unit(text, pos, end, None, cjk=False))
            pos = end
        else:
            pos = _next_boundary(boundary, pos)
    return tuple(units)


# ---------------------------------------------------------------------------------------------
# Public API


def text_units(text: str) -> list[TextUnit]:
    """Split `text` into units, in order, with non-overlapping original code-point spans.

    Units: a letter/digit run with inner apostrophes ("don't"); one CJK ideograph / kana /
    Hangul syllable each (a run mixing Latin and CJK is split); and written tokens read as one
    spoken phrase, each ONE unit with a multi-word `spoken`:
    currency "$9.05" (nine dollars and five cents), "€5", "£3"; numbers "25", "2,500", "1.5",
    "-3" (minus three), "1990s"; percent "100%"; clock times "10:30" (ten thirty), "10:05" (ten
    oh five), "10:00" (ten o'clock), "10:30am", "5pm"; ordinals "3rd", "21st"; fractions "3/4"
    (three quarters; 1/2 one half; otherwise ordinal denominators: "2/3" two thirds); phone-like
    groups "555-0123" (digit by digit); standalone years 1100-2099 ("1999" nineteen ninety nine,
    "2005" two thousand five); dotted versions "1.2.3"; abbreviations "Dr." doctor, "Mr.", "Mrs.",
    "Ms.", "St." (saint), "Jr.", "Sr.", "Prof.", "vs.", "etc.", "e.g." (for example), "i.e." (that
    is), dotted letters "U.S.A." / "a.m." (letter by letter); symbols + = & @ % when standalone
    or between letters/digits; all-caps 2-5 letter words spelled ("SQL" -> s q l) unless in a
    small exception list of common words ("OK" -> okay, "NO", "NOT", "THE", ...).
    Punctuation, whitespace, emoji and markdown markup are not units. Results are cached per
    text (a fresh list each call).
    """
    return list(_units(text))


def spoken_words(text: str) -> list[tuple[str, int]]:
    """Spoken-form words of `text`, each with the index of the unit (of `text_units`) it is in."""
    return [(word, i) for i, unit in enumerate(_units(text)) for word in unit.spoken]


def unit_duration_ms(unit: TextUnit) -> int:
    """Duration of a unit under the uniform timing rule of contracts.md and the cases file.

    400 ms per spoken word (MS_PER_SPOKEN_WORD), 250 ms per CJK / kana / Hangul unit
    (MS_PER_CJK_UNIT).
    """
    return MS_PER_CJK_UNIT if unit.cjk else MS_PER_SPOKEN_WORD * len(unit.spoken)


_VOWEL_GROUP = re.compile(r"[aeiouy]+")


def syllables(word: str) -> int:
    """Vowel-group syllable count of an English word (a final silent "e" dropped), at least 1."""
    letters = re.sub(r"[^a-z]", "", word.lower())
    count = len(_VOWEL_GROUP.findall(letters))
    if letters.endswith("e") and not letters.endswith(("le", "ee", "ye")) and count > 1:
        count -= 1
    return max(count, 1)


def unit_syllables(unit: TextUnit) -> int:
    """Syllables a TTS says for `unit`: `syllables` over its spoken words; 1 for a CJK unit."""
    return 1 if unit.cjk else sum(syllables(word) for word in unit.spoken)


def cut_after_units(text: str, units: Sequence[TextUnit], count: int) -> int:
    """Exclusive end (code points) of the heard prefix when the first `count` units were heard.

    The end of unit count-1 extended over attached punctuation / markup / emoji (no whitespace in
    between, up to the next unit), never inside a grapheme cluster; 0 when count == 0.
    `units` must be `text_units(text)`. Raises ValueError unless 0 <= count <= len(units).
    """
    if not 0 <= count <= len(units):
        raise ValueError(f"count {count} outside 0..{len(units)}")
    if count == 0:
        return 0
    unit = units[count - 1]
    limit = units[count].start if count < len(units) else len(text)
    end = unit.end
    while end < limit and not _is_space(text[end]):
        end += 1
    bounds = grapheme_boundaries(text, unit.start, min(len(text), end + 1))
    return bounds[bisect_right(bounds, end) - 1]


def snap_down(text: str, char_end: int) -> int:
    """Largest cut_after_units(...) whose units all end <= char_end (code points); 0 if none."""
    units = _units(text)
    count = bisect_right([u.end for u in units], char_end)
    return cut_after_units(text, units, count)


def token_cut(text: str, char_end: int) -> int:
    """The cut `char_end` moved to a written-token boundary: a token is kept whole or not at all.

    A written token is a whitespace-delimited run of characters; each CJK ideograph, kana or
    Hangul syllable is a token of its own (`is_cjk_char`). A cut inside a token whose rest
    still holds a letter or digit ("example.|com", "4|-6", "CVE-|2024") moves back to the
    token's start: its spoken pieces started but did not all finish, so it counts as started,
    not heard. A cut followed only by punctuation up to the next space ("lights|.") stands.

    Args:
        text: the written reply.
        char_end: exclusive code-point offset, 0 <= char_end <= len(text).

    Returns:
        The largest token boundary <= `char_end` under that rule (code points).
    """
    if char_end <= 0 or char_end >= len(text):
        return char_end
    before, after = text[char_end - 1], text[char_end]
    if _is_space(before) or _is_space(after) or is_cjk_char(before) or is_cjk_char(after):
        return char_end
    rest = char_end
    while rest < len(text) and not _is_space(text[rest]) and not is_cjk_char(text[rest]):
        if _is_word_char(text[rest]):
            break
        rest += 1
    else:
        return char_end
    start = char_end
    while start > 0 and not _is_space(text[start - 1]) and not is_cjk_char(text[start - 1]):
        start -= 1
    return start


def heard_prefix(text: str, char_end: int) -> str:
    """text[:char_end] with trailing whitespace stripped. Raises ValueError if out of range."""
    if not 0 <= char_end <= len(text):
        raise ValueError(f"char_end {char_end} outside 0..{len(text)}")
    return text[:char_end].rstrip()
