"""What the assistant says: the prompt a responder receives and the responders.

- `prompt`: `Prompt` (instructions and the history as heard), `ConversationTurn`, the
  `Responder` protocol and the interruption notes;
- `demo`: the built-in, model-free `DemoResponder`, with its topics in `demo_topics`;
- `llm`: `LLMResponder`, streaming from an OpenAI-compatible chat-completions server;
- `reply_limit`: `ReplyLengthLimit`, the bound on one reply's length around any responder.

May import `server.speech` (the segmenter) and `calibration`; nothing else of `server`.
"""
