"""English number words: cardinals, ordinals, digits, years and decimals (our own converter;
American English without "and" inside numbers), as the TTS engines read them. Nothing here does
I/O.
"""

from __future__ import annotations

import unicodedata

_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((10**9, "billion"), (10**6, "million"), (10**3, "thousand"))
_ORDINAL_IRREGULAR = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}
_CARDINAL_LIMIT = 10**12


def digit_words(digits: str) -> tuple[str, ...]:
    """Each decimal digit (any script) as its word: "0123" -> ("zero", "one", "two", "three")."""
    return tuple(_ONES[unicodedata.digit(ch)] for ch in digits)


def cardinal_words(n: int) -> tuple[str, ...]:
    """Cardinal number words: 2500 -> ("two", "thousand", "five", "hundred").

    Integers with magnitude below 10**12 are read with scale words up to "billion"; larger ones
    are read digit by digit. Negative numbers start with "minus".
    """
    if n < 0:
        return ("minus", *cardinal_words(-n))
    if n >= _CARDINAL_LIMIT:
        return digit_words(str(n))
    if n < 20:
        return (_ONES[n],)
    if n < 100:
        tens, ones = divmod(n, 10)
        return (_TENS[tens], _ONES[ones]) if ones else (_TENS[tens],)
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return (_ONES[hundreds], "hundred", *(cardinal_words(rest) if rest else ()))
    for scale, name in _SCALES:
        if n >= scale:
            head, rest = divmod(n, scale)
            return (*cardinal_words(head), name, *(cardinal_words(rest) if rest else ()))
    raise AssertionError(n)


def ordinal_words(n: int) -> tuple[str, ...]:
    """Ordinal number words: 21 -> ("twenty", "first"), 100 -> ("one", "hundredth")."""
    words = cardinal_words(n)
    last = words[-1]
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return (*words[:-1], last)


def _year_words(value: int) -> tuple[str, ...]:
    if 2000 <= value <= 2009:
        return cardinal_words(value)
    century, rest = divmod(value, 100)
    if rest == 0:
        return (*cardinal_words(century), "hundred")
    if rest < 10:
        return (*cardinal_words(century), "oh", _ONES[rest])
    return (*cardinal_words(century), *cardinal_words(rest))


def integer_reading(digits: str, *, year: bool = True) -> tuple[str, ...]:
    """Spoken words of a plain run of decimal digits.

    A leading zero ("007") reads digit by digit; with `year`, four digits in 1100-2099 read as a
    year ("1999" -> nineteen ninety nine, "2005" -> two thousand five, "2010" -> twenty ten);
    otherwise the cardinal.
    """
    if len(digits) > 1 and unicodedata.digit(digits[0]) == 0:
        return digit_words(digits)
    value = int(digits)
    if year and len(digits) == 4 and 1100 <= value <= 2099:
        return _year_words(value)
    return cardinal_words(value)


def decimal_words(whole: int, frac: str) -> tuple[str, ...]:
    """A decimal number read with "point" and its fraction digit by digit: (3, "14") ->
    ("three", "point", "one", "four")."""
    return (*cardinal_words(whole), "point", *digit_words(frac))


def plural(word: str) -> str:
    """The English plural of a unit noun ("penny" -> "pennies", "box" -> "boxes")."""
    if word.endswith("y"):
        return word[:-1] + "ies"
    if word.endswith("x"):
        return word + "es"
    return word + "s"
