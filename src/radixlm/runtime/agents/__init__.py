"""Agent output handling, pure (no engine state): tool-call parsers per model family, the
reasoning parser, the generic tool prompt and the grammar for forced tool calls."""
