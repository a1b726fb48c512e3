"""What the assistant says: the prompt a responder receives and the responders.

- `prompt`: `Prompt` (instructions and the history as heard), `ConversationTurn`, the
  `Responder` protocol and the interruption notes;
- `demo`: the built-in, model-free `DemoResponder`, with its topics in `demo_topics`.

May import `server.speech` (the segmenter) and `calibration`; nothing else of `server`.
"""
