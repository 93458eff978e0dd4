//! The request schemas whose rules span fields (one of `prompt` and
//! `content`, `answer` or `decline`, a scope and what it needs), or that
//! no Rust type carries (the error body, the channels' own answers, a
//! Server-Sent Event), written out as JSON Schema.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::core::session::ContentPart;
use crate::http::api;

/// `{"error": {"code", "message"}}` (`http::error::ApiError`).
pub struct ErrorBody;

/// `{"error": MESSAGE}` from a channel's own endpoint.
pub struct ChannelError;

/// `{"status": …}` from a channel's own endpoint.
pub struct ChannelStatus;

/// One Server-Sent Event: `id` `RUN_ID:SEQ`, `data` a tape event.
pub struct StreamEvent;

/// The body of a prompt or a steering message.
impl JsonSchema for api::Prompt {
    fn schema_name() -> Cow<'static, str> {
        "Prompt".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": false,
            "description": "Exactly one of `prompt` and `content` (a null one counts as absent); the prompt must say something: text other than spaces, tabs and line breaks, or a part that is not text",
            "properties": {
                "prompt": {
                    "type": ["string", "null"],
                    "pattern": "[^\\t\\n\\u000b\\f\\r ]"
                },
                "content": {
                    "type": ["array", "null"],
                    "minItems": 1,
                    "items": generator.subschema_for::<ContentPart>(),
                    "contains": {
                        "anyOf": [
                            {
                                "type": "object",
                                "required": ["type"],
                                "properties": {
                                    "type": {
                                        "enum": ["resource_link", "resource", "image"]
                                    }
                                }
                            },
                            {
                                "type": "object",
                                "required": ["type", "text"],
                                "properties": {
                                    "type": {
                                        "const": "text"
                                    },
                                    "text": {
                                        "type": "string",
                                        "pattern": "[^\\t\\n\\u000b\\f\\r ]"
                                    }
                                }
                            }
                        ]
                    }
                }
            },
            "oneOf": [
                {
                    "required": ["prompt"],
                    "properties": {
                        "prompt": {
                            "type": "string"
                        }
                    }
                },
                {
                    "required": ["content"],
                    "properties": {
                        "content": {
                            "type": "array"
                        }
                    }
                }
            ]
        })
    }
}

/// One part of a prompt's content.
impl JsonSchema for ContentPart {
    fn schema_name() -> Cow<'static, str> {
        "ContentPart".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "oneOf": [
                {
                    "type": "object",
                    "required": ["type", "text"],
                    "properties": {
                        "type": {
                            "const": "text"
                        },
                        "text": {
                            "type": "string"
                        }
                    }
                },
                {
                    "type": "object",
                    "required": ["type", "uri", "name"],
                    "properties": {
                        "type": {
                            "const": "resource_link"
                        },
                        "uri": {
                            "type": "string"
                        },
                        "name": {
                            "type": "string"
                        },
                        "mime_type": {
                            "type": ["string", "null"]
                        }
                    }
                },
                {
                    "type": "object",
                    "required": ["type", "uri", "text"],
                    "properties": {
                        "type": {
                            "const": "resource"
                        },
                        "uri": {
                            "type": "string"
                        },
                        "text": {
                            "type": "string"
                        },
                        "mime_type": {
                            "type": ["string", "null"]
                        }
                    }
                },
                {
                    "type": "object",
                    "required": ["type", "mime_type", "data"],
                    "description": "An image, for a model that takes images (`images` in the configuration); at most 10 MiB decoded. The request must fit `[http] body_limit_bytes` (1 MiB by default); the data's first bytes are the signature of `mime_type`",
                    "properties": {
                        "type": {
                            "const": "image"
                        },
                        "mime_type": {
                            "enum": ["image/png", "image/jpeg", "image/gif", "image/webp"]
                        },
                        "data": {
                            "type": "string",
                            "maxLength": 13981016,
                            "description": "The image bytes, base64 (standard alphabet, padded), starting with the signature of its type (`image/png`: PNG, ...)"
                        },
                        "uri": {
                            "type": ["string", "null"]
                        }
                    },
                    "oneOf": [
                        {
                            "properties": {
                                "mime_type": {
                                    "const": "image/png"
                                },
                                "data": {
                                    "pattern": "^iVBORw0KGg(o=|[o-r][A-Za-z0-9+/]([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?)$"
                                }
                            }
                        },
                        {
                            "properties": {
                                "mime_type": {
                                    "const": "image/jpeg"
                                },
                                "data": {
                                    "pattern": "^/9j/([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
                                }
                            }
                        },
                        {
                            "properties": {
                                "mime_type": {
                                    "const": "image/gif"
                                },
                                "data": {
                                    "pattern": "^R0lGOD[dl]h([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
                                }
                            }
                        },
                        {
                            "properties": {
                                "mime_type": {
                                    "const": "image/webp"
                                },
                                "data": {
                                    "pattern": "^UklGR[g-v][A-Za-z0-9+/]{4}[BFJNRVZdhlptx159]XRUJQ([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
                                }
                            }
                        }
                    ]
                }
            ]
        })
    }
}

/// The answer to a question.
impl JsonSchema for api::Reply {
    fn schema_name() -> Cow<'static, str> {
        "Reply".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "answer": {
                    "type": "string",
                    "maxLength": 10000,
                    "description": "The answer; a number picks that option, an option's text that option"
                },
                "decline": {
                    "type": "boolean",
                    "description": "true declines to answer"
                }
            },
            "description": "The answer, or `\"decline\": true`; not both",
            "anyOf": [
                {
                    "required": ["answer"],
                    "properties": {
                        "decline": {
                            "const": false
                        }
                    }
                },
                {
                    "required": ["decline"],
                    "properties": {
                        "decline": {
                            "const": true
                        }
                    },
                    "not": {
                        "required": ["answer"]
                    }
                }
            ]
        })
    }
}

/// A memory item to add.
impl JsonSchema for api::NewMemory {
    fn schema_name() -> Cow<'static, str> {
        "NewMemory".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": false,
            "required": ["text"],
            "properties": {
                "text": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "pattern": "[^ \\t\\n\\r\\u000b\\u000c]",
                    "description": "At most 4096 characters; a text the safety pass would redact (a key, a token) is refused with 400"
                },
                "scope": {
                    "enum": ["user", "workspace", "conversation", null],
                    "description": "Default (or null) workspace; a workspace item needs `workspace` or `session_id`, a conversation item `session_id`"
                },
                "session_id": {
                    "type": ["string", "null"],
                    "pattern": "^ses_",
                    "description": "The session whose workspace and conversation the item belongs to; one that does not exist is 404"
                },
                "workspace": {
                    "type": ["string", "null"],
                    "pattern": "^/",
                    "description": "The directory whose workspace (its repository's top directory) the item belongs to, over the session's; one that is no directory is 404"
                },
                "tags": {
                    "type": ["array", "null"],
                    "maxItems": 16,
                    "items": {
                        "type": "string",
                        "pattern": "^[A-Za-z0-9_./-]{1,64}$"
                    }
                },
                "pinned": {
                    "type": ["boolean", "null"]
                }
            },
            "allOf": [
                {
                    "if": {
                        "required": ["scope"],
                        "properties": {
                            "scope": {
                                "const": "conversation"
                            }
                        }
                    },
                    "then": {
                        "required": ["session_id"],
                        "properties": {
                            "session_id": {
                                "type": "string"
                            }
                        }
                    }
                },
                {
                    "if": {
                        "not": {
                            "required": ["scope"],
                            "properties": {
                                "scope": {
                                    "enum": ["user", "conversation"]
                                }
                            }
                        }
                    },
                    "then": {
                        "anyOf": [
                            {
                                "required": ["session_id"],
                                "properties": {
                                    "session_id": {
                                        "type": "string"
                                    }
                                }
                            },
                            {
                                "required": ["workspace"],
                                "properties": {
                                    "workspace": {
                                        "type": "string"
                                    }
                                }
                            }
                        ]
                    }
                }
            ]
        })
    }
}

/// The changes to a memory item.
impl JsonSchema for api::MemoryPatch {
    fn schema_name() -> Cow<'static, str> {
        "MemoryPatch".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": false,
            "description": "Fields left out (or null) are kept; an empty patch changes nothing",
            "properties": {
                "text": {
                    "type": ["string", "null"],
                    "minLength": 1,
                    "maxLength": 4096,
                    "pattern": "[^ \\t\\n\\r\\u000b\\u000c]",
                    "description": "At most 4096 characters; a text the safety pass would redact (a key, a token) is refused with 400"
                },
                "tags": {
                    "type": ["array", "null"],
                    "maxItems": 16,
                    "items": {
                        "type": "string",
                        "pattern": "^[A-Za-z0-9_./-]{1,64}$"
                    }
                },
                "pinned": {
                    "type": ["boolean", "null"]
                }
            }
        })
    }
}

/// Every error's body.
impl JsonSchema for ErrorBody {
    fn schema_name() -> Cow<'static, str> {
        "Error".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "required": ["error"],
            "additionalProperties": false,
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "additionalProperties": false,
                    "properties": {
                        "code": {
                            "type": "string",
                            "enum": ["bad_request", "unauthorized", "forbidden", "not_found", "method_not_allowed", "conflict", "payload_too_large", "unsupported_content", "unprocessable", "rate_limited", "internal", "unavailable"]
                        },
                        "message": {
                            "type": "string"
                        }
                    }
                }
            }
        })
    }
}

/// A channel's own endpoint refusing a platform's request.
impl JsonSchema for ChannelError {
    fn schema_name() -> Cow<'static, str> {
        "ChannelError".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "required": ["error"],
            "additionalProperties": false,
            "properties": {
                "error": {
                    "type": "string"
                }
            }
        })
    }
}

/// A channel's own endpoint taking a platform's request.
impl JsonSchema for ChannelStatus {
    fn schema_name() -> Cow<'static, str> {
        "ChannelStatus".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "required": ["status"],
            "additionalProperties": false,
            "properties": {
                "status": {
                    "type": "string",
                    "enum": ["accepted", "duplicate", "echo", "unauthorized"]
                }
            }
        })
    }
}

/// One Server-Sent Event of an event stream.
impl JsonSchema for StreamEvent {
    fn schema_name() -> Cow<'static, str> {
        "StreamEvent".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "One Server-Sent Event (OpenAPI 3.1 has `schema` of `text/event-stream` describe each event): `id` is `RUN_ID:SEQ`, `data` one event in the tape's JSON form",
            "required": ["id", "data"],
            "properties": {
                "id": {
                    "type": "string",
                    "pattern": "^run_[0-9a-f]{32}:[0-9]{1,19}$"
                },
                "event": {
                    "const": "message"
                },
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": generator.subschema_for::<crate::core::event::EventRecord>()
                },
                "retry": {
                    "type": "integer",
                    "minimum": 0
                }
            }
        })
    }
}
