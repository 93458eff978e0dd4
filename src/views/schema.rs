//! Schemas written out where a derive would say less than the wire does or
//! more than the faces promise: a tape event (one object per `type`, its
//! place first; docs/headless.md has each type's fields), the approval and
//! question requests within it, the answers a person can give, and a send
//! intent (the outbox's record, whose inner fields may grow).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::exchanges::{ApprovalView, QuestionView};
use crate::core::channel::SendIntent;
use crate::core::event::{Event, EventRecord};

impl JsonSchema for EventRecord {
    fn schema_name() -> Cow<'static, str> {
        "EventRecord".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "An event in the tape's JSON form: its place, then the fields of its `type` (docs/headless.md)",
            "required": ["session_id", "run_id", "seq", "at", "type"],
            "properties": {
                "session_id": {"type": "string", "pattern": "^ses_"},
                "run_id": {"type": "string", "pattern": "^run_"},
                "seq": {"type": "integer", "minimum": 0},
                "at": {"type": "integer", "description": "Milliseconds since the Unix epoch"},
                "type": {"type": "string", "enum": Event::KINDS},
            }
        })
    }
}

impl JsonSchema for ApprovalView {
    fn schema_name() -> Cow<'static, str> {
        "ApprovalRequest".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An approval waiting for an answer: its `approval_requested` event",
            "allOf": [
                generator.subschema_for::<EventRecord>(),
                {
                    "type": "object",
                    "required": ["type", "approval_id", "call_id", "tool", "kind", "title", "reason", "arguments"],
                    "properties": {
                        "type": {"const": "approval_requested"},
                        "approval_id": {"type": "string"},
                        "call_id": {"type": "string"},
                        "tool": {"type": "string"},
                        "kind": {"type": "string"},
                        "title": {"type": "string"},
                        "reason": {"type": "string", "description": "Why the policy asks"},
                        "arguments": {},
                        "locations": {"type": "array", "items": {"type": "string"}},
                        "command": {"type": "string"},
                        "diffs": {"type": "array"},
                    }
                }
            ]
        })
    }
}

impl JsonSchema for QuestionView {
    fn schema_name() -> Cow<'static, str> {
        "QuestionRequest".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A question (`ask_user`) waiting for an answer: its `question_asked` event",
            "allOf": [
                generator.subschema_for::<EventRecord>(),
                {
                    "type": "object",
                    "required": ["type", "question_id", "call_id", "question"],
                    "properties": {
                        "type": {"const": "question_asked"},
                        "question_id": {"type": "string"},
                        "call_id": {"type": "string"},
                        "question": {"type": "string"},
                        "options": {"type": "array", "items": {"type": "string"}},
                    }
                }
            ]
        })
    }
}

/// The decisions a person gives (`ApprovalDecision::OPTIONS`).
pub struct PersonDecision;

impl JsonSchema for PersonDecision {
    fn schema_name() -> Cow<'static, str> {
        "Decision".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "enum": ["allow_once", "allow_always", "reject_once", "reject_always"],
        })
    }
}

/// How a person's reply settles a question.
pub struct PersonOutcome;

impl JsonSchema for PersonOutcome {
    fn schema_name() -> Cow<'static, str> {
        "ReplyOutcome".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "enum": ["answered", "declined"]})
    }
}

impl JsonSchema for SendIntent {
    fn schema_name() -> Cow<'static, str> {
        "SendIntent".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "A message in a channel's outbox (docs/channels.md); more fields than these may show",
            "required": ["id", "channel", "account", "target", "kind", "status", "created_at"],
            "additionalProperties": true,
            "properties": {
                "id": {"type": "string"},
                "channel": {"type": "string"},
                "account": {"type": "string"},
                "target": {
                    "type": "object",
                    "required": ["kind", "id"],
                    "properties": {
                        "kind": {"type": "string", "enum": ["direct", "group", "channel", "thread"]},
                        "id": {"type": "string"},
                        "thread": {"type": ["string", "null"]}
                    }
                },
                "kind": {"type": "string", "enum": ["reply", "approval", "notice", "message", "draft"]},
                "status": {"type": "string", "enum": ["held", "pending", "sending", "committing", "sent", "failed", "unknown_after_send", "cancelled", "expired", "withheld"]},
                "text": {"type": ["string", "null"]},
                "created_at": {"type": "integer"},
                "updated_at": {"type": "integer"}
            }
        })
    }
}
