"""Amounts of money, ordinals and regnal numbers as a listener expects to hear them.

espeak-ng (Piper's phonemizer too) reads these written forms literally (measured on this
machine): "$1,200.50" as "dollar one thousand two hundred point five zero", "£3.20" as "pound
three point two zero", "€5" as "euros five", "1.200,50 €" with the German voice as "eintausend
zweihundert Komma fünf null Euro", the French "3e" as "trois e", the German "am 2. Mai" as "am
zwei Mai", "Henry VIII" as "Henry Roman eight". `number_spans` finds them in a written segment
and gives the words to say in the segment's language; the number words and currency names come
from num2words (cardinals, ordinals and `CURRENCY_FORMS` per language), not from our own tables.
Where a written amount puts its separators follows the writer's locale: with both "." and ","
the last one is the decimal separator; with one of them followed by exactly three digits it
groups thousands in a language that writes decimals with a comma (de, fr, es, it, pt, nl) and
marks decimals in English ("1.200" is 1200 in German, 1.2 in English). Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal

from num2words import CONVERTER_CLASSES, num2words

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl")
"""Languages whose numbers are rewritten (the main English voice and `LATIN_VOICES` of
`server.speech.language_voices`); text in another language is left to its voice."""

_SYMBOLS = {"$": "USD", "\u20ac": "EUR", "\u00a3": "GBP", "\u00a5": "JPY"}
"""Currency symbol -> ISO 4217 code (the code names the unit in num2words' `CURRENCY_FORMS`)."""
_UNNAMED = {"JPY": ("yen", "yen")}
"""Currency names num2words lacks in most of `LANGUAGES` (no minor unit in use)."""
_AND = {"en": "and", "de": "und", "fr": "et", "es": "con", "it": "e", "pt": "e", "nl": "en"}
"""The word between the major and the minor unit ("five dollars and twenty cents")."""

_AMOUNT = r"\d{1,3}(?:[.,\u00a0\u202f ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d+)?"
_SYMBOL = "[" + "".join(re.escape(symbol) for symbol in _SYMBOLS) + "]"
_MONEY = re.compile(
    rf"(?<![\w.,])(?P<pre>{_SYMBOL})[ \u00a0]?(?P<a>{_AMOUNT})(?![\w\u20ac$\u00a3\u00a5])"
    rf"|(?<![\w.,])(?P<b>{_AMOUNT})[ \u00a0]?(?P<post>{_SYMBOL})(?!\w)")
_ORDINALS = {
    "en": re.compile(r"\b(?P<n>\d+)(?P<s>st|nd|rd|th)\b"),
    "fr": re.compile(r"\b(?P<n>\d+)(?P<s>e|er|re|ère|ème|eme|\u1d49)(?!\w)"),
    "nl": re.compile(r"\b(?P<n>\d+)(?P<s>e|ste|de)\b"),
    "es": re.compile(r"\b(?P<n>\d+)(?P<s>[\u00ba\u00aa])"),
    "it": re.compile(r"\b(?P<n>\d+)(?P<s>[\u00ba\u00aa])"),
    "pt": re.compile(r"\b(?P<n>\d+)(?P<s>[\u00ba\u00aa])"),
}
# German ordinals are a number and a full stop; one is an ordinal before a lower-case word, a
# month, or after an article or a preposition fused with one ("am 2. Mai", "der 3. Platz").
_GERMAN_ORDINAL = re.compile(r"(?<![\d.])\b(?P<n>\d{1,3})\.(?=[ \u00a0](?P<next>\w+))")
_GERMAN_BEFORE = re.compile(r"(?:^|\s)(?P<word>\w+)\s*$")
_GERMAN_DATIVE = {"am", "im", "vom", "zum", "zur", "beim", "dem", "den", "des", "der"}
_GERMAN_ARTICLES = {*_GERMAN_DATIVE, "die", "das", "ein", "eine", "jeden", "jedem", "ab", "bis"}
_GERMAN_MONTHS = {"januar", "februar", "märz", "april", "mai", "juni", "juli", "august",
                  "september", "oktober", "november", "dezember", "jänner"}
_ROMAN = re.compile(
    r"\b(?P<before>[A-Z][a-z]+) (?P<numeral>X{0,3}(?:IX|IV|V?I{0,3}))\b(?![\w'\u2019-])")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}
_COUNTED = {"act", "appendix", "article", "book", "chapter", "class", "episode", "grade",
            "level", "part", "phase", "psalm", "round", "scene", "section", "stage", "step",
            "title", "type", "volume", "war"}
"""Nouns whose roman numeral is read as a cardinal ("Chapter Four", "World War Two"); after
another capitalised word it is a regnal number ("Henry the Eighth")."""


def number_spans(text: str, language: str = "en") -> Iterator[tuple[int, int, str]]:
    """(start, end, words) for each amount of money, ordinal and roman numeral of `text` (code
    points; spans do not overlap, in text order) that a voice of `language` (ISO 639-1) should
    say as `words`. Nothing for a language outside `LANGUAGES`.

    Money: a symbol of `_SYMBOLS` before or after an amount ("$1,200.50" -> "one thousand two
    hundred dollars and fifty cents", "1.200,50 €" in German -> "eintausendzweihundert Euro und
    fünfzig Cent"). Ordinals: "21st", French "3e", Dutch "2e", Spanish / Italian / Portuguese
    "2º" / "2ª", German "2." before a month or lower-case word or after an article ("am 2. Mai"
    -> "am zweiten Mai"). Roman numerals (English and French, letters I, V, X, 1-39) after a
    capitalised word: a cardinal after a counted noun ("World War II" -> "World War two"), else
    a regnal number ("Henry VIII" -> "Henry the eighth", French "Louis XIV" -> "Louis
    quatorze"); a one-letter numeral only before punctuation or the end, or after a counted
    noun ("I" is a pronoun).
    """
    if language not in LANGUAGES:
        return
    found: list[tuple[int, int, str]] = []
    for match in _MONEY.finditer(text):
        words = _money_words(match, language)
        if words:
            found.append((match.start(), match.end(), words))
    pattern = _ORDINALS.get(language)
    if pattern is not None:
        for match in pattern.finditer(text):
            found.append((match.start(), match.end(),
                          _ordinal(int(match["n"]), language, feminine=match["s"] in "\u00aare")))
    if language == "de":
        found.extend(_german_ordinals(text))
    if language in ("en", "fr"):
        found.extend(_roman_numerals(text, language))
    end = 0
    for start, stop, words in sorted(found):
        if start >= end:
            yield start, stop, words
            end = stop


def _money_words(match: re.Match[str], language: str) -> str | None:
    """The words of one amount of money, or None when its amount cannot be read."""
    code = _SYMBOLS[match["pre"] or match["post"]]
    value = _amount(match["a"] or match["b"], language)
    if value is None:
        return None
    forms = CONVERTER_CLASSES[language].CURRENCY_FORMS.get(code)
    major, minor = forms if forms else (_UNNAMED[code], None)
    whole = int(value)
    cents = int((value - whole) * 100)
    if value * 100 != int(value * 100) or (cents and minor is None):
        return f"{_cardinal(value, language)} {major[1]}"
    parts = []
    if whole or not cents:
        parts.append(f"{_cardinal(whole, language)} {major[0] if whole == 1 else major[1]}")
    if cents:
        assert minor is not None
        parts.append(f"{_cardinal(cents, language)} {minor[0] if cents == 1 else minor[1]}")
    return f" {_AND[language]} ".join(parts)


def _amount(written: str, language: str) -> Decimal | None:
    """The value of a written amount in the writer's locale (see the module docstring)."""
    digits = written.replace("\u00a0", " ").replace("\u202f", " ")
    marks = [char for char in digits if char in ".,"]
    if " " in digits:
        digits = digits.replace(" ", "")
    if "." in digits and "," in digits:
        decimal = digits[max(digits.rfind("."), digits.rfind(","))]
    elif len(set(marks)) == 1:
        tail = digits.rsplit(marks[0], 1)[1]
        comma_decimals = language != "en"
        thousands = len(tail) == 3 and (marks[0] == "." if comma_decimals else marks[0] == ",")
        decimal = "" if thousands or len(marks) > 1 else marks[0]
    else:
        decimal = ""
    whole, _, fraction = digits.partition(decimal) if decimal else (digits, "", "")
    whole = whole.replace(".", "").replace(",", "")
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return None
    return Decimal(f"{whole}.{fraction or 0}")


def _cardinal(value: int | Decimal, language: str) -> str:
    """num2words' cardinal without its commas ("one thousand, two hundred": a comma would be
    read as a pause)."""
    return num2words(value, lang=language).replace(",", "")


def _ordinal(value: int, language: str, feminine: bool = False) -> str:
    """num2words' ordinal; the feminine form in the Romance languages ("1ª" -> "primera")."""
    words = num2words(value, lang=language, to="ordinal").replace(",", "")
    if feminine and language in ("es", "it", "pt") and words.endswith("o"):
        words = words[:-1] + "a"
    if feminine and language == "fr" and words == "premier":
        words = "première"
    return words


def _german_ordinals(text: str) -> Iterator[tuple[int, int, str]]:
    """German "N." ordinals (see `number_spans`), declined "-n" after a dative or genitive
    article ("am zweiten Mai", nominative "der dritte Platz" stays as num2words says it)."""
    for match in _GERMAN_ORDINAL.finditer(text):
        before = _GERMAN_BEFORE.search(text, 0, match.start())
        previous = before["word"].lower() if before else ""
        following = match["next"]
        if not (following[0].islower() or following.lower() in _GERMAN_MONTHS
                or previous in _GERMAN_ARTICLES):
            continue
        words = _ordinal(int(match["n"]), "de")
        if previous in _GERMAN_DATIVE - {"der"} and words.endswith("e"):
            words += "n"
        yield match.start(), match.end(), words


def _roman_numerals(text: str, language: str) -> Iterator[tuple[int, int, str]]:
    """Roman numerals after a capitalised word (see `number_spans`)."""
    for match in _ROMAN.finditer(text):
        numeral = match["numeral"]
        value = _roman_value(numeral)
        if not value:
            continue
        counted = match["before"].lower() in _COUNTED
        after = text[match.end():].lstrip()
        if len(numeral) == 1 and not counted and after[:1].isalnum():
            continue
        span = match.start("numeral"), match.end("numeral")
        if counted or (language == "fr" and value > 1):
            yield *span, _cardinal(value, language)
        elif language == "fr":
            yield *span, "premier"
        else:
            yield *span, f"the {_ordinal(value, language)}"


def _roman_value(numeral: str) -> int:
    """The value of a well-formed roman numeral of I, V and X (0 for "")."""
    total = 0
    for index, letter in enumerate(numeral):
        value = _ROMAN_VALUES[letter]
        following = _ROMAN_VALUES.get(numeral[index + 1]) if index + 1 < len(numeral) else 0
        total += -value if following and following > value else value
    return total
