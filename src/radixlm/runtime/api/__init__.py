"""The API stage: Engine, HTTP and OpenAI servers, the tokenizer manager, request parsing."""
