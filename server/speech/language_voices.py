"""The espeak-ng voice of a Latin-script sentence in a language other than English.

The main voices are English (Piper `en_US`, espeak-ng `en-us`): a French, German or Spanish
sentence read by them comes out with English pronunciation ("Grüß Gott" heard as "Bruce
Scott", issue 27). `latin_voice` identifies the language of one sentence with py3langid (a
naive Bayes classifier over byte n-grams, the langid.py model of Lui and Baldwin 2012, shipped
inside the package; deterministic) restricted to English and `LATIN_VOICES`, and names the
espeak-ng voice of that language when the classifier is confident; `ScriptVoiceSynthesizer`
(`server.speech.script_voices`) then speaks the sentence with it, with espeak-ng's exact word
marks.
"""

from __future__ import annotations

import functools
import re

from py3langid.langid import MODEL_FILE, LanguageIdentifier

LATIN_VOICES = {"fr": "fr", "de": "de", "es": "es", "it": "it", "pt": "pt", "nl": "nl"}
"""Language code (ISO 639-1, py3langid's labels) -> espeak-ng voice, for the Latin-script
languages spoken in their own voice (every voice ships with the espeak-ng data `piper-tts`
bundles)."""

MIN_CONFIDENCE = 0.9
"""Least normalised probability of a language other than English for its voice to be used:
a short or ambiguous sentence ("Yes.", "Call me at 555-0123.", both under 0.5) stays English."""

MIN_WORDS = 3
"""Fewest words (letter runs) of a sentence whose language is identified: shorter ones ("Ciao!",
names) are too short to tell and stay with the main voice."""

_WORD = re.compile(r"[^\W\d_]+")


@functools.cache
def _identifier() -> LanguageIdentifier:
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(["en", *LATIN_VOICES])
    return identifier


def latin_voice(sentence: str) -> str | None:
    """The espeak-ng voice for a Latin-script `sentence` in one of `LATIN_VOICES`' languages,
    or None for the main (English) voice: English, too short (`MIN_WORDS`), or not confidently
    identified (`MIN_CONFIDENCE`). Deterministic; thread-safe (the model is read only)."""
    if len(_WORD.findall(sentence)) < MIN_WORDS:
        return None
    language, confidence = _identifier().classify(sentence)
    if language == "en" or confidence < MIN_CONFIDENCE:
        return None
    return LATIN_VOICES[language]
