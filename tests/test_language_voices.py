"""A Latin-script sentence in French, German, Spanish, Italian, Portuguese or Dutch is spoken by
the espeak-ng voice of its language, with exact marks; English stays with the main voice
(issue 27: "Grüß Gott" was read with English pronunciation)."""

from __future__ import annotations

import pytest

from benchmarks.calibration_corpus import load_corpus
from calibration.units import text_units
from server.speech.language_voices import latin_voice
from server.speech.script_voices import ScriptVoiceSynthesizer
from server.speech.segmenter import SpeechSegmenter
from tests.conftest import loaded_synthesizer
from tests.test_script_voices import RecordingVoice

SENTENCES = {
    "fr": ["Je pense, donc je suis.", "Nous allons au marché demain matin.",
           "Il fait très beau aujourd'hui à Paris.", "Pouvez-vous m'aider, s'il vous plaît ?",
           "Le chat dort sur le canapé depuis une heure.",
           "Merci beaucoup pour votre aide précieuse.",
           "La réunion commence à neuf heures précises.",
           "J'aimerais réserver une table pour deux personnes.",
           "Les enfants jouent dans le jardin.", "Où se trouve la gare, s'il vous plaît ?"],
    "de": ["Grüß Gott und herzlich willkommen!", "Ich habe heute keine Zeit für dich.",
           "Das Wetter ist schön, wir gehen spazieren.", "Wo ist der nächste Bahnhof?",
           "Die Kinder spielen im Garten hinter dem Haus.",
           "Vielen Dank für Ihre schnelle Antwort.", "Wir treffen uns morgen um acht Uhr.",
           "Können Sie mir bitte den Weg zeigen?", "Ich trinke meinen Kaffee ohne Zucker.",
           "Der Zug hat leider zwanzig Minuten Verspätung."],
    "es": ["Buenos días, ¿cómo estás hoy?", "Me gustaría reservar una mesa para dos.",
           "El tren sale a las ocho de la mañana.", "¿Dónde está la estación de autobuses?",
           "Los niños juegan en el parque todos los días.",
           "Muchas gracias por tu ayuda de ayer.", "Hace mucho calor en Madrid este verano.",
           "Vamos a la playa el próximo fin de semana.", "No entiendo lo que quieres decir.",
           "Mi hermana vive en Barcelona desde hace años."],
    "it": ["Ciao, come stai oggi?", "Vorrei prenotare un tavolo per due persone.",
           "Il treno parte alle otto di mattina.", "Dove si trova la stazione centrale?",
           "I bambini giocano nel parco ogni giorno.", "Grazie mille per il tuo aiuto.",
           "Fa molto caldo a Roma questa estate.", "Andiamo al mare il prossimo fine settimana.",
           "Non capisco cosa vuoi dire.", "Mia sorella abita a Milano da molti anni."],
    "pt": ["Olá, tudo bem com você?", "Eu gostaria de reservar uma mesa para dois.",
           "O comboio parte às oito horas da manhã.", "Onde fica a estação de autocarros?",
           "As crianças brincam no parque todos os dias.", "Muito obrigado pela sua ajuda.",
           "Está muito calor em Lisboa neste verão.", "Vamos à praia no próximo fim de semana.",
           "Não entendo o que você quer dizer.", "A minha irmã mora no Porto há muitos anos."],
    "nl": ["Goedemorgen, hoe gaat het met je?", "Ik wil graag een tafel voor twee reserveren.",
           "De trein vertrekt om acht uur 's ochtends.", "Waar is het dichtstbijzijnde station?",
           "De kinderen spelen elke dag in het park.", "Heel erg bedankt voor je hulp.",
           "Het is erg warm in Amsterdam deze zomer.", "We gaan volgend weekend naar het strand.",
           "Ik begrijp niet wat je bedoelt.", "Mijn zus woont al jaren in Utrecht."],
}


def test_at_least_95_percent_of_foreign_sentences_get_their_voice() -> None:
    results = [(language, sentence, latin_voice(sentence))
               for language, sentences in SENTENCES.items() for sentence in sentences]
    wrong = [(language, sentence, voice) for language, sentence, voice in results
             if voice != language]
    assert len(results) == 60
    assert len(wrong) <= 0.05 * len(results), wrong


def test_no_english_segment_of_the_calibration_corpus_leaves_the_main_voice() -> None:
    """Every segment of the corpus but the three foreign sentences of the llm category."""
    foreign = []
    for reply in load_corpus():
        segmenter = SpeechSegmenter()
        for start, end in segmenter.feed(reply.text) + segmenter.flush():
            if (voice := latin_voice(reply.text[start:end])) is not None:
                foreign.append((reply.id, voice))
    assert sorted(foreign) == [("llm-french", "fr"), ("llm-german", "de"),
                               ("llm-spanish", "es")]


@pytest.mark.parametrize("engine", ["piper", "espeak"])
def test_a_german_sentence_is_spoken_by_the_german_voice_with_exact_marks(engine: str) -> None:
    router = loaded_synthesizer(engine)
    assert isinstance(router, ScriptVoiceSynthesizer)
    main = RecordingVoice(router.main)
    tts = ScriptVoiceSynthesizer(main)
    text = "Grüß Gott und herzlich willkommen!"
    chunks = list(tts.synthesize(text))
    assert main.texts == []
    marks = [mark for chunk in chunks for mark in chunk.marks]
    assert marks and not [mark for mark in marks if mark.estimated]
    assert [text[unit.start:unit.end] for unit in text_units(text)] == [
        text[mark.char_start:mark.char_end] for mark in marks]
    assert float(abs(chunks[0].pcm).max()) > 0.1
    assert list(tts.synthesize("The French say it best.")) and main.texts == [
        "The French say it best."]
