//! The safety pass over tool output: truncation, secret redaction, prompt-injection markers.
