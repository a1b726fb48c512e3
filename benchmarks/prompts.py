"""The conversation the server benchmarks hold: typed prompts and how fast the person types.

`SAY_PROMPTS` (the demo responder speaks the text after `say:` verbatim) and `TOPIC_PROMPTS`
(answered from `server.responders.demo_topics`) alternate in `bench_server` table 1 and in the
benchmarks that reuse its conversation (fairness, scheduling, load, metrics, first audio).
"""

from __future__ import annotations

PAUSE_S = 0.25
"""Idle time after a barge-in's `response.done` before the next barge-in prompt."""
TYPING_S = 1.0
"""Time to first audio: a typed prompt comes this long after the previous reply was stopped
(nobody types a new prompt faster); a separate run uses PAUSE_S to show what a prompt sent
right after a barge-in costs."""
WARM_UP_PROMPT = "say: Hello there. This is a warm up before the measured prompts."
SAY_PROMPTS = tuple(
    "say: " + reply
    for reply in (
        "Sure, I can help with that. The train to the coast leaves at ten past nine, and the "
        "trip takes a little under two hours.",
        "Good morning! It looks like a bright day with a light breeze from the west. You might "
        "want a jacket for the evening, though.",
        "That is a great question. Most house plants like bright, indirect light and a good "
        "drink about once a week. Let the soil dry out a little between waterings.",
        "I found three recipes that use the vegetables you have. The quickest one is a stir fry "
        "that takes about twenty minutes.",
        "Your meeting with the design team has moved to Thursday afternoon. I have updated the "
        "calendar and sent a note to everyone invited.",
        "The museum opens at ten and closes at six on weekdays. Tickets are cheaper if you book "
        "them online the day before.",
        "Honestly, I would start with the short trail along the river. It is flat and shaded, "
        "and there is a small cafe at the far end.",
        "Let me read that back to you. You want two large pizzas, one with mushrooms and one "
        "with peppers, delivered at seven.",
        "The library has the book you asked about. It is on the second floor, in the history "
        "section, near the big windows.",
        "Well, the quickest way is to take the bus to the main square and then walk for five "
        "minutes. If it rains, the tram stops right outside.",
        "I have set a timer for twelve minutes. I will let you know when the pasta is ready.",
        "Here is a quick summary of the article. Sleep helps the brain sort and store what we "
        "learned during the day, and even a short nap can help.",
        "No problem at all. I have moved your dentist appointment to next Monday at half past "
        "three.",
        "The package left the warehouse this morning. It should arrive tomorrow before noon, "
        "and someone will need to sign for it.",
        "Sounds like a plan. Bring comfortable shoes, a bottle of water and something warm, "
        "because it gets cold at the top.",
        "Your flight is on time and boarding starts at gate twelve in forty minutes. The "
        "security line is short right now.",
        "I think the red one suits the room better. It matches the cushions, and it will look "
        "warmer in the evening light.",
        "A cup of green tea has about a third of the caffeine of a cup of coffee. It is a "
        "gentler choice in the afternoon.",
        "The first step is to unplug the router and wait for thirty seconds. Then plug it back "
        "in and give it two minutes to restart.",
        "Happy birthday to your sister! A handwritten card and her favourite flowers would make "
        "a lovely surprise.",
    )
)
TOPIC_PROMPTS = (
    "tell me about tides", "how does bread rise?", "tell me about the history of radio",
    "what can you tell me about the planets?", "tell me about the first marathon",
    "how do honey bees make honey?", "why does the sea have tides?",
    "how do I bake sourdough bread?", "who invented the radio?", "tell me about the solar system",
    "what was the first olympic marathon like?", "how does a beehive work?",
    "what does the moon do to the ocean?", "how do you knead dough?",
    "tell me about broadcasting", "is Mars a planet?", "why do runners run marathons?",
    "what is pollination?", "hello, what can you talk about?",
    "tell me something about astronomy",
)
LONG_PROMPTS = TOPIC_PROMPTS[:6]
"""One prompt per main topic: replies of 920-1260 characters (about 55-85 s of audio)."""
