"""The built-in demo responder's small library of answers, written for this project.

Each answer is 6-10 plain spoken sentences (no markdown, no emoji), long enough to interrupt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Topic:
    """One thing the demo responder can talk about.

    Attributes:
        title: short spoken name used in lists ("how tides work").
        keywords: lower-case words; a prompt containing any of them asks for this topic.
        text: the full answer.
    """

    title: str
    keywords: frozenset[str]
    text: str


def _topic(title: str, keywords: str, *sentences: str) -> Topic:
    return Topic(title, frozenset(keywords.split()), " ".join(sentences))


TOPICS: tuple[Topic, ...] = (
    _topic(
        "the history of radio",
        "radio radios broadcast broadcasting broadcasts wireless marconi hertz transmitter",
        "Radio grew out of a prediction made by James Clerk Maxwell in the 1860s, who showed that "
        "light is an electromagnetic wave and that there should be other, invisible ones.",
        "In 1887 Heinrich Hertz built a spark gap that sent such waves across his laboratory, "
        "proving Maxwell right.",
        "Guglielmo Marconi turned the experiment into a business, sending signals across the "
        "English Channel in 1899 and across the Atlantic in 1901.",
        "Those first systems could only send Morse code, a series of clicks and buzzes.",
        "On Christmas Eve 1906, Reginald Fessenden is said to have broadcast music and speech to "
        "ships at sea, although historians still argue about the details.",
        "Lee de Forest's vacuum tube made it possible to amplify weak signals, and that opened "
        "the door to real broadcasting.",
        "In 1920 the station KDKA in Pittsburgh reported the results of the American "
        "presidential election, often called the first commercial broadcast.",
        "Within a decade, families gathered around the radio in the evening the way later "
        "generations gathered around the television.",
        "Edwin Armstrong's frequency modulation arrived in the 1930s and gave much clearer sound.",
        "Today the same physics carries your phone calls, your home network and the signals from "
        "spacecraft at the edge of the solar system.",
    ),
    _topic(
        "how tides work",
        "tide tides tidal ocean oceans sea seas moon",
        "Tides are the slow rise and fall of the sea, and they are mostly the work of the Moon.",
        "The Moon's gravity pulls a little harder on the side of the Earth that faces it than on "
        "the Earth's center, and a little less on the far side.",
        "That difference stretches the oceans into two bulges, one under the Moon and one on the "
        "opposite side of the planet.",
        "As the Earth turns, most coasts pass through both bulges, so they see two high tides and "
        "two low tides about every 24 hours and 50 minutes.",
        "The extra 50 minutes comes from the Moon moving along its own orbit while the Earth "
        "spins.",
        "The Sun pulls on the oceans too, with a bit less than half the Moon's effect.",
        "When the Sun and the Moon line up, at new moon and full moon, their pulls add together "
        "and we get the large spring tides.",
        "When they pull at right angles, at the quarter moons, we get the smaller neap tides.",
        "The shape of the coast matters enormously, which is why the Bay of Fundy in Canada can "
        "see the water rise by about 16 meters while parts of the Mediterranean barely notice a "
        "tide at all.",
    ),
    _topic(
        "making bread",
        "bread breads bake baking baker loaf loaves dough yeast flour sourdough knead kneading",
        "Good bread needs only four things: flour, water, salt and yeast.",
        "When you mix flour with water, two proteins in the wheat join up to form gluten, a "
        "stretchy network that can trap gas.",
        "Kneading lines up that network and makes it stronger, which is why a well kneaded dough "
        "springs back when you poke it.",
        "Yeast feeds on the sugars in the flour and releases carbon dioxide, and the gluten holds "
        "those bubbles so the dough rises.",
        "A slow rise in a cool kitchen gives the yeast and bacteria time to build more flavour.",
        "After shaping, the loaf gets a second, shorter rise called the proof.",
        "In a hot oven the trapped gas expands quickly and gives the loaf a final burst of growth "
        "known as oven spring.",
        "The crust then browns through the Maillard reaction, the same chemistry that colours "
        "toast and roasted coffee.",
        "Let the loaf cool for at least an hour before you cut it, because the inside is still "
        "setting as the steam escapes.",
    ),
    _topic(
        "the planets",
        "planet planets solar mercury venus mars jupiter saturn uranus neptune pluto astronomy",
        "Our solar system has eight planets, and they come in two very different families.",
        "The four inner planets, Mercury, Venus, Earth and Mars, are small rocky worlds with "
        "solid surfaces.",
        "Mercury is the closest to the Sun, yet Venus is the hottest, because its thick carbon "
        "dioxide atmosphere traps heat at around 460 degrees Celsius.",
        "Mars is a cold desert with the tallest volcano we know of, Olympus Mons, about two and a "
        "half times the height of Mount Everest.",
        "Beyond the asteroid belt come the giants: Jupiter and Saturn are made mostly of hydrogen "
        "and helium, and Jupiter alone has more than twice the mass of all the other planets "
        "combined.",
        "Saturn's rings are made of countless pieces of ice, from grains of dust to chunks as big "
        "as a house.",
        "Uranus and Neptune are called ice giants, and Uranus rolls around the Sun tipped on its "
        "side.",
        "Neptune has the fastest winds measured in the solar system, at about 2000 kilometers per "
        "hour.",
        "Pluto used to be counted as the ninth planet, but in 2006 astronomers reclassified it as "
        "a dwarf planet.",
    ),
    _topic(
        "the first marathon",
        "marathon marathons run running runner runners race olympic olympics pheidippides",
        "The marathon takes its name from a legend about the Battle of Marathon in 490 BC, when "
        "the Athenians defeated a Persian army on the plain of Marathon.",
        "According to the story, a messenger named Pheidippides ran about 40 kilometers to Athens, "
        "announced the victory, and collapsed and died.",
        "The ancient historian Herodotus tells a different tale, in which Pheidippides ran roughly "
        "240 kilometers from Athens to Sparta to ask for help before the battle.",
        "When the modern Olympic Games were revived in Athens in 1896, the French scholar Michel "
        "Bréal suggested a long race to honour the legend.",
        "The first Olympic marathon ran about 40 kilometers from Marathon to the Panathenaic "
        "Stadium.",
        "A Greek water carrier named Spyridon Louis won it in just under three hours, and he "
        "became a national hero overnight.",
        "The distance was not fixed at first; the familiar 42.195 kilometers comes from the 1908 "
        "London Olympics, where the course ran from Windsor Castle to the royal box in the "
        "stadium.",
        "That distance became the official standard in 1921.",
        "Today about a million people finish a marathon every year.",
    ),
    _topic(
        "honey bees",
        "bee bees honey hive hives beehive pollen pollination waggle beekeeping",
        "Honey bees live in colonies of up to about 60,000 insects, and almost all of them are "
        "female worker bees.",
        "A single queen lays the eggs, up to around 1,500 a day in early summer, while the males, "
        "called drones, exist mainly to mate with queens from other colonies.",
        "A worker's job changes as she ages: she starts by cleaning cells and feeding larvae, "
        "later builds wax comb and guards the entrance, and spends her last weeks foraging.",
        "When a forager finds a rich patch of flowers, she returns to the hive and performs the "
        "waggle dance.",
        "The angle of the dance tells the other bees the direction of the food relative to the "
        "Sun, and the length of the waggle run tells them how far away it is.",
        "Karl von Frisch decoded this language and shared a Nobel Prize for the work in 1973.",
        "To make a single kilogram of honey, the colony has to visit millions of flowers.",
        "The nectar is mixed with enzymes and fanned by thousands of wings until most of its "
        "water has evaporated.",
        "Beyond honey, bees pollinate a large share of the crops we eat, from apples to almonds.",
    ),
)

TOPIC_LIST = ", ".join(topic.title for topic in TOPICS[:-1]) + " and " + TOPICS[-1].title

HELP = _topic(
    "what I can talk about",
    "hello hi hey help greetings topics topic menu options",
    "Hello! I am the built-in demo voice of this project, and I am here so you can try "
    "interrupting me.",
    f"I can talk about {TOPIC_LIST}.",
    "Just ask, for example, how tides work or how bread rises.",
    "While I am speaking, you can talk over me or press stop, and I will go quiet right away.",
    "Afterwards, ask me where I stopped, and I will tell you the last words you actually heard.",
    "Say continue, and I will pick up exactly where you stopped hearing me.",
    "If you start a message with the word say and a colon, I will read the rest back word for "
    "word.",
)

UNKNOWN = " ".join(
    (
        "I am sorry, that is not something I know about.",
        "I am a small built-in demo rather than a real language model, so I only know a few "
        "stories by heart.",
        f"I can tell you about {TOPIC_LIST}.",
        "Each of those answers is long enough to interrupt, which is the point of this demo.",
        "Talk over me or press stop while I am speaking, then ask me where I stopped.",
        "You can also start a message with the word say and a colon, and I will read the rest "
        "back exactly.",
    )
)
