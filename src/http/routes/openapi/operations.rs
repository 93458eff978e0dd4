//! What each route takes and answers, as the OpenAPI document describes it:
//! one entry per route of `routes::table()` (a test holds them equal).

use serde_json::json;

use super::{Operation, schema, schemas};
use crate::core::channel::SendIntent;
use crate::core::memory::MemoryItem;
use crate::http::api;
use crate::http::ingress::{ResolveIntent, SendMessage};
use crate::http::schedules::AddSchedule;
use crate::views;

/// A session's id in the path.
fn session_id() -> serde_json::Value {
    path_id("session_id", "^ses_")
}

/// A run's id in the path.
fn run_id() -> serde_json::Value {
    path_id("run_id", "^run_")
}

fn path_id(name: &str, pattern: &str) -> serde_json::Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "pattern": pattern}})
}

/// Every route's description, in the order of the document.
#[allow(clippy::too_many_lines, reason = "a table, read entry by entry")]
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::new("get", "/healthz", "healthz", "Liveness: the process answers (no token needed)")
            .public()
            .answer(200, "Alive", schema::<views::Health>),
        Operation::new("get", "/readyz", "readyz", "Readiness: the store takes writes and the server is not stopping (no token needed)")
            .public()
            .answer(200, "Ready", schema::<views::Health>)
            .error(503, "Shutting down or the store is unavailable"),
        Operation::new("get", "/metrics", "metrics", "Metrics in the OpenMetrics text format (Prometheus scrapes it)")
            .raw(200, json!({
                "description": "Runs by state, live sessions, tool calls by verdict, provider latency",
                "content": {
                    "application/openmetrics-text": {
                        "schema": {
                            "type": "string"
                        }
                    }
                }
            }))
            .error(500, "Internal error"),
        Operation::new("get", "/openapi.json", "openapi", "This document")
            .raw(200, json!({
                "description": "The OpenAPI document",
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object"
                        }
                    }
                }
            })),
        Operation::new("get", "/v1/health/summary", "healthSummary", "The runs created in a recent window, in every session and by every process sharing the store (by state, failures, tokens, cost, latency, a timeline), and the instances sharing a PostgreSQL store")
            .parameters(json!([
                {
                    "name": "window",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "pattern": crate::http::health::WINDOW_PATTERN
                    },
                    "description": "How far back, in whole minutes or hours from 1m to 24h: `1h` (the default), `30m`, `1440m`"
                }
            ]))
            .answer(200, "The summary", schema::<views::HealthSummary>)
            .error(400, "Bad input; the message names the field")
            .error(503, "The store did not answer"),
        Operation::new("post", "/v1/sessions", "createSession", "Create a session (origin `http`)")
            .body(schema::<api::CreateSession>)
            .answer(201, "The new session", schema::<views::SessionView>)
            .error(400, "Bad input; the message names the field")
            .error(404, "The workspace is not a directory, or no provider has the model")
            .error(413, "Body larger than `[http] body_limit_bytes`"),
        Operation::new("get", "/v1/sessions", "listSessions", "Sessions, most recently active first")
            .parameters(json!([
                {
                    "name": "workspace",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string"
                    },
                    "description": "Only sessions of this workspace"
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 500,
                        "default": 50
                    }
                },
                {
                    "name": "cursor",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "pattern": "^[0-9]{1,18}:ses_[0-9a-f]{32}$"
                    },
                    "description": "`next_cursor` of the previous page"
                },
                {
                    "name": "origin",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "enum": ["", "editor", "headless", "http", "channel", "terminal", "subagent", "schedule"]
                    },
                    "description": "Only sessions of this origin; empty: any"
                },
                {
                    "name": "state",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "enum": ["", "open", "closed"]
                    },
                    "description": "Only open or only closed sessions; empty: either"
                },
                {
                    "name": "channel",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string"
                    },
                    "description": "Only sessions a conversation of the chat channel of this name maps; empty: any"
                },
                {
                    "name": "q",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "maxLength": 2000
                    },
                    "description": "Words each of which the title, id, model or workspace holds, ASCII letters' case aside; no wildcards"
                }
            ]))
            .answer(200, "A page of sessions", schema::<views::SessionList>)
            .error(400, "Bad input; the message names the field"),
        Operation::new("get", "/v1/sessions/{session_id}", "getSession", "One session")
            .parameters(json!([
                session_id()
            ]))
            .answer(200, "The session", schema::<views::SessionView>)
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("delete", "/v1/sessions/{session_id}", "deleteSession", "Delete a session: its conversation, remembered approvals and tapes go; its runs' summaries and receipts stay")
            .parameters(json!([
                session_id()
            ]))
            .answer(200, "The session was deleted", schema::<views::SessionDeleted>)
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("post", "/v1/sessions/{session_id}/prompt", "prompt", "Queue a prompt as a new run; with `wait=true`, answer when the run has ended")
            .parameters(json!([
                session_id(),
                {
                    "name": "wait",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "boolean",
                        "default": false
                    }
                }
            ]))
            .body(schema::<api::Prompt>)
            .answer(200, "With `wait=true`: the run as it ended", schema::<views::RunView>)
            .answer(202, "The run, queued or already running", schema::<views::RunView>)
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session, run, approval or route")
            .error(413, "Body larger than `[http] body_limit_bytes`")
            .error(422, "Well-formed content the session's model cannot take (an image for a model that takes none); code `unsupported_content`")
            .error(503, "Shutting down or the store is unavailable"),
        Operation::new("post", "/v1/sessions/{session_id}/commands", "sessionCommand", "Queue `/compact` or `/undo` as a run of its own, after the runs before it")
            .parameters(json!([
                session_id()
            ]))
            .body(schema::<api::RunCommand>)
            .answer(202, "The command's run, queued", schema::<views::RunView>)
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session, run, approval or route")
            .error(413, "Body larger than `[http] body_limit_bytes`")
            .error(503, "Shutting down or the store is unavailable"),
        Operation::new("post", "/v1/sessions/{session_id}/steer", "steerSession", "Steer the session's working prompt: the message is taken in at the run's next turn boundary")
            .parameters(json!([
                session_id()
            ]))
            .body(schema::<api::Prompt>)
            .answer(200, "`injected` with the run that takes it, or `promptRequired` when no prompt works (send it as a prompt)", schema::<views::Steered>)
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session, run, approval or route")
            .error(413, "Body larger than `[http] body_limit_bytes`")
            .error(422, "Well-formed content the session's model cannot take (an image for a model that takes none); code `unsupported_content`"),
        Operation::new("get", "/v1/sessions/{session_id}/runs", "listRuns", "A session's runs, oldest first")
            .parameters(json!([
                session_id()
            ]))
            .answer(200, "The runs", schema::<views::RunList>)
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("get", "/v1/sessions/{session_id}/context", "getContext", "What the session's next model turn would be sent: the system prompt, the tools and the conversation fitted into the window, with estimated tokens per part (docs/prompt.md)")
            .parameters(json!([
                session_id()
            ]))
            .answer(200, "The context", schema::<views::ContextView>)
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("get", "/v1/sessions/{session_id}/events", "sessionEvents", "A session's events as SSE: from now (or from its first event with `from=start`), or after `Last-Event-ID`, run by run; never ends while the session is open")
            .parameters(json!([
                session_id(),
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": false,
                    "description": "Resume after this event: `RUN_ID:SEQ`, the `id` of the last event received; empty: no cursor",
                    "schema": {
                        "type": "string",
                        "pattern": "^(run_[0-9a-f]{32}:[0-9]{1,19})?$"
                    }
                },
                {
                    "name": "after",
                    "in": "query",
                    "required": false,
                    "description": "Same as `Last-Event-ID`, for clients that cannot set headers; the header wins; empty: no cursor",
                    "schema": {
                        "type": "string",
                        "pattern": "^(run_[0-9a-f]{32}:[0-9]{1,19})?$"
                    }
                },
                {
                    "name": "from",
                    "in": "query",
                    "required": false,
                    "description": "`start`: without a cursor, begin with the session's first event (its history, then live); `now` (the default): begin now",
                    "schema": {
                        "type": "string",
                        "enum": ["start", "now"]
                    }
                }
            ]))
            .raw(200, json!({
                "description": "Server-Sent Events: each event has `id: RUN_ID:SEQ` and one `data:` line holding an event in the tape's JSON form (`EventRecord`)",
                "content": {
                    "text/event-stream": {
                        "schema": {
                            "$ref": "#/components/schemas/StreamEvent"
                        }
                    }
                }
            }))
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session or run, or the cursor names no event of it")
            .error(409, "Conflict with the current state"),
        Operation::new("get", "/v1/sessions/{session_id}/approvals", "sessionApprovals", "A session's approvals waiting for an answer")
            .parameters(json!([
                session_id()
            ]))
            .answer(200, "The waiting approvals", schema::<views::ApprovalList>)
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("get", "/v1/sessions/{session_id}/questions", "sessionQuestions", "A session's questions (ask_user) waiting for an answer")
            .parameters(json!([
                session_id()
            ]))
            .answer(200, "The waiting questions", schema::<views::QuestionList>)
            .error(404, "Unknown session, run, question or route"),
        Operation::new("get", "/v1/runs/{run_id}", "getRun", "One run")
            .parameters(json!([
                run_id()
            ]))
            .answer(200, "The run", schema::<views::RunView>)
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("post", "/v1/runs/{run_id}/cancel", "cancelRun", "Cancel a queued or running run; answers once its end is recorded")
            .parameters(json!([
                run_id()
            ]))
            .answer(200, "The run, ended", schema::<views::RunView>)
            .error(404, "Unknown session, run, approval or route")
            .error(409, "Conflict with the current state"),
        Operation::new("get", "/v1/runs/{run_id}/tape", "getTape", "A run's events from the tape")
            .parameters(json!([
                run_id(),
                {
                    "name": "from_seq",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": i64::MAX,
                        "default": 0
                    }
                }
            ]))
            .answer(200, "The events", schema::<views::TapeView>)
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session, run, approval or route"),
        Operation::new("get", "/v1/runs/{run_id}/events", "runEvents", "A run's events as SSE: from its start (or after `Last-Event-ID`) to its end")
            .parameters(json!([
                run_id(),
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": false,
                    "description": "Resume after this event: `RUN_ID:SEQ`, the `id` of the last event received; empty: no cursor",
                    "schema": {
                        "type": "string",
                        "pattern": "^(run_[0-9a-f]{32}:[0-9]{1,19})?$"
                    }
                },
                {
                    "name": "after",
                    "in": "query",
                    "required": false,
                    "description": "Same as `Last-Event-ID`, for clients that cannot set headers; the header wins; empty: no cursor",
                    "schema": {
                        "type": "string",
                        "pattern": "^(run_[0-9a-f]{32}:[0-9]{1,19})?$"
                    }
                }
            ]))
            .raw(200, json!({
                "description": "Server-Sent Events: each event has `id: RUN_ID:SEQ` and one `data:` line holding an event in the tape's JSON form (`EventRecord`)",
                "content": {
                    "text/event-stream": {
                        "schema": {
                            "$ref": "#/components/schemas/StreamEvent"
                        }
                    }
                }
            }))
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session or run, or the cursor names no event of it"),
        Operation::new("get", "/v1/memory", "listMemory", "Remembered items (docs/memory.md): those a session or a workspace sees, or every item; matching `q` best first, else the newest first")
            .parameters(json!([
                {
                    "name": "q",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "maxLength": 2000
                    },
                    "description": "Words to search for (any of them)"
                },
                {
                    "name": "session_id",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "pattern": "^ses_"
                    },
                    "description": "The items this session sees"
                },
                {
                    "name": "workspace",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "pattern": "^/"
                    },
                    "description": "The items a session in this directory would see"
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 500
                    }
                }
            ]))
            .answer(200, "The items", schema::<views::MemoryList>)
            .error(400, "Bad input; the message names the parameter")
            .error(404, "Unknown session, a workspace that is not a directory, or memory turned off"),
        Operation::new("post", "/v1/memory", "addMemory", "Remember something (a text the safety pass would redact is refused)")
            .body(schema::<api::NewMemory>)
            .answer(201, "The new item", schema::<MemoryItem>)
            .error(400, "Bad input, or a secret in the text; the message names the problem")
            .error(404, "Unknown session, a workspace that is not a directory, or memory turned off")
            .error(413, "Body larger than `[http] body_limit_bytes`"),
        Operation::new("get", "/v1/memory/{memory_id}", "getMemory", "One remembered item")
            .parameters(json!([
                {
                    "name": "memory_id",
                    "in": "path",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "pattern": "^mem_[0-9a-z]{1,60}$"
                    }
                }
            ]))
            .answer(200, "The item", schema::<MemoryItem>)
            .error(404, "No such item"),
        Operation::new("patch", "/v1/memory/{memory_id}", "editMemory", "Change an item's text, tags or pin")
            .parameters(json!([
                {
                    "name": "memory_id",
                    "in": "path",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "pattern": "^mem_[0-9a-z]{1,60}$"
                    }
                }
            ]))
            .body(schema::<api::MemoryPatch>)
            .answer(200, "The item as changed", schema::<MemoryItem>)
            .error(400, "Bad input, a secret, or nothing to change")
            .error(404, "No such item")
            .error(413, "Body larger than `[http] body_limit_bytes`"),
        Operation::new("delete", "/v1/memory/{memory_id}", "forgetMemory", "Forget an item")
            .parameters(json!([
                {
                    "name": "memory_id",
                    "in": "path",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "pattern": "^mem_[0-9a-z]{1,60}$"
                    }
                }
            ]))
            .answer(200, "The item forgotten", schema::<MemoryItem>)
            .error(404, "No such item"),
        Operation::new("get", "/v1/skills", "listSkills", "Agent Skills and custom commands a session in the workspace finds (docs/skills.md), as `pincer skills list --json`: each with its scope and location, a project's marked `offered: false` until the project is trusted; then what was skipped or warned about")
            .parameters(json!([
                {
                    "name": "workspace",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "pattern": "^/"
                    },
                    "description": "The workspace whose skills are listed, absolute and existing (default: the server's current directory)"
                }
            ]))
            .answer(200, "The skills", schema::<views::SkillList>)
            .error(400, "Bad input: a workspace that is not absolute or does not exist, or an unknown parameter"),
        Operation::new("get", "/v1/skills/{name}", "getSkill", "One skill, as `pincer skills show --json`: its entry, the other frontmatter fields and its instructions (the body of SKILL.md, read now)")
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "schema": {
                        "type": "string"
                    }
                },
                {
                    "name": "workspace",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "pattern": "^/"
                    },
                    "description": "The workspace whose skills are listed, absolute and existing (default: the server's current directory)"
                }
            ]))
            .answer(200, "The skill", schema::<views::SkillDetails>)
            .error(400, "Bad input: a workspace that is not absolute or does not exist, or an unknown parameter")
            .error(404, "No skill of that name in the workspace"),
        Operation::new("get", "/v1/verify", "verifyReceipts", "The receipt chain walked and cross-checked against the tapes (`pincer verify --json`)")
            .answer(200, "The verdict: `ok` false names the first break and the runs missing receipts", schema::<views::VerifyView>)
            .error(503, "The store did not answer"),
        Operation::new("get", "/v1/approvals", "listApprovals", "Approvals of every session waiting for an answer")
            .answer(200, "The waiting approvals", schema::<views::ApprovalList>),
        Operation::new("post", "/v1/approvals/{approval_id}", "answerApproval", "Answer a waiting approval; the first answer from any face wins")
            .parameters(json!([
                {
                    "name": "approval_id",
                    "in": "path",
                    "required": true,
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .body(schema::<api::Answer>)
            .answer(200, "The approval and the answer given", schema::<views::Answered>)
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session, run, approval or route")
            .error(409, "Conflict with the current state")
            .error(413, "Body larger than `[http] body_limit_bytes`"),
        Operation::new("get", "/v1/questions", "listQuestions", "Questions (ask_user) of every session waiting for an answer")
            .answer(200, "The waiting questions", schema::<views::QuestionList>),
        Operation::new("post", "/v1/questions/{question_id}", "answerQuestion", "Answer a waiting question; the first answer from any face wins")
            .parameters(json!([
                {
                    "name": "question_id",
                    "in": "path",
                    "required": true,
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .body(schema::<api::Reply>)
            .answer(200, "The question and the answer given", schema::<views::Replied>)
            .error(400, "Bad input; the message names the field")
            .error(404, "Unknown session, run, question or route")
            .error(409, "Conflict with the current state")
            .error(413, "Body larger than `[http] body_limit_bytes`"),
        Operation::new("get", "/v1/rpc", "rpcWebSocket", "JSON-RPC 2.0 over a WebSocket: the same operations as methods, and subscriptions to run and session events (docs/http.md)")
            .parameters(json!([
                {
                    "name": "Upgrade",
                    "in": "header",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "pattern": "^[Ww][Ee][Bb][Ss][Oo][Cc][Kk][Ee][Tt]$"
                    }
                },
                {
                    "name": "Connection",
                    "in": "header",
                    "required": true,
                    "description": "A list of tokens with `upgrade`",
                    "schema": {
                        "type": "string",
                        "pattern": "^([!#$%&'*+.^_`|~0-9A-Za-z-]+[ \\t]*,[ \\t]*)*[Uu][Pp][Gg][Rr][Aa][Dd][Ee]([ \\t]*,[ \\t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$"
                    }
                },
                {
                    "name": "Sec-WebSocket-Version",
                    "in": "header",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "enum": ["13"]
                    }
                },
                {
                    "name": "Sec-WebSocket-Key",
                    "in": "header",
                    "required": true,
                    "description": "16 random bytes, base64",
                    "schema": {
                        "type": "string",
                        "pattern": "^[A-Za-z0-9+/]{21}[AQgw]==$"
                    }
                }
            ]))
            .raw(101, json!({
                "description": "Switching to the WebSocket protocol"
            }))
            .error(400, "Not a WebSocket handshake; the message names the header"),
        Operation::new("post", "/v1/rpc", "rpcCall", "One JSON-RPC 2.0 call (or batch) in the body; subscriptions need the WebSocket")
            .raw_body(json!({
                "required": true,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": ["object", "array"]
                        }
                    }
                }
            }))
            .raw(200, json!({
                "description": "The JSON-RPC response",
                "content": {
                    "application/json": {
                        "schema": {
                            "type": ["object", "array"]
                        }
                    }
                }
            }))
            .error(400, "The body is not JSON")
            .error(413, "Body larger than `[http] body_limit_bytes`"),
        Operation::new("get", "/acp", "acpWebSocket", "The Agent Client Protocol over a WebSocket (draft transport): each text frame one JSON-RPC message; the same agent as `pincer acp` on stdio, over this process's sessions (docs/acp.md)")
            .parameters(json!([
                {
                    "name": "Upgrade",
                    "in": "header",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "pattern": "^[Ww][Ee][Bb][Ss][Oo][Cc][Kk][Ee][Tt]$"
                    }
                },
                {
                    "name": "Connection",
                    "in": "header",
                    "required": true,
                    "description": "A list of tokens with `upgrade`",
                    "schema": {
                        "type": "string",
                        "pattern": "^([!#$%&'*+.^_`|~0-9A-Za-z-]+[ \\t]*,[ \\t]*)*[Uu][Pp][Gg][Rr][Aa][Dd][Ee]([ \\t]*,[ \\t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$"
                    }
                },
                {
                    "name": "Sec-WebSocket-Version",
                    "in": "header",
                    "required": true,
                    "schema": {
                        "type": "string",
                        "enum": ["13"]
                    }
                },
                {
                    "name": "Sec-WebSocket-Key",
                    "in": "header",
                    "required": true,
                    "description": "16 random bytes, base64",
                    "schema": {
                        "type": "string",
                        "pattern": "^[A-Za-z0-9+/]{21}[AQgw]==$"
                    }
                }
            ]))
            .raw(101, json!({
                "description": "Switching to the WebSocket protocol"
            }))
            .error(400, "Not a WebSocket handshake; the message names the header"),
        Operation::new("post", "/v1/channels/{name}/messages", "sendChannelMessage", "Send a message first to a chat through a channel this process serves: recorded as a send intent and delivered by the outbox, with its guarantees, by the process serving the channel's account (docs/channels.md)")
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .body(schema::<SendMessage>)
            .answer(202, "Recorded (or recorded before under the same `id`): the send intent", schema::<SendIntent>)
            .error(400, "Bad input (an empty text, a target the platform cannot read); the message names the field")
            .error(404, "No such channel is served by this process")
            .error(413, "Body larger than `[http] body_limit_bytes`")
            .error(503, "Not recorded (the store did not answer): send it again"),
        Operation::new("get", "/v1/channels/{name}/pairs", "listChannelPairs", "Who may talk to a channel this process serves: its `allow` list, whether pairing is open (a pairing code is set; the code itself is never shown) and the paired senders (docs/channels.md)")
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .answer(200, "The channel's allow list, pairing and paired senders", schema::<views::ChannelPairs>)
            .error(404, "No such channel is served by this process")
            .error(503, "The channels are starting, or the store did not answer"),
        Operation::new("delete", "/v1/channels/{name}/pairs/{sender}", "revokeChannelPair", "Revoke a paired sender of a channel this process serves, in every account of the channel: their next message is a stranger's, told how to pair")
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                },
                {
                    "name": "sender",
                    "in": "path",
                    "required": true,
                    "description": "The sender's platform id, compared as the platform compares ids",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .answer(200, "Revoked", schema::<views::PairRevoked>)
            .error(404, "No such channel is served by this process, or the sender is not paired")
            .error(503, "Not revoked (the channels are starting, or the store did not answer)"),
        Operation::new("post", "/channels/{name}/webhook", "webhookDelivery", "A peer's delivery to a webhook channel this process serves (docs/channels.md). No bearer token: the request is signed with the channel's shared secret")
            .public()
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .raw_body(json!({
                "required": false,
                "content": {
                    "application/json": {
                        "schema": {}
                    }
                }
            }))
            .answer(200, "Recorded (`accepted`), seen before (`duplicate`), Pincer's own echo (`echo`), or a sender told how to pair (`unauthorized`)", schema::<schemas::ChannelStatus>)
            .answer(400, "No delivery id, or a body of no known shape; the message names the field", schema::<schemas::ChannelError>)
            .answer(401, "Missing or bad signature, or a timestamp outside the five-minute window", schema::<schemas::ChannelError>)
            .answer(404, "No such channel receives over HTTP in this process", schema::<schemas::ChannelError>)
            .raw(413, json!({
                "description": "A body over the limit",
                "content": {
                    "application/json": {
                        "schema": {
                            "oneOf": [
                                {
                                    "$ref": "#/components/schemas/ChannelError"
                                },
                                {
                                    "$ref": "#/components/schemas/Error"
                                }
                            ]
                        }
                    }
                }
            }))
            .answer(503, "Not recorded now (the channels are starting, another process serves the account, or the store did not answer): send it again", schema::<schemas::ChannelError>),
        Operation::new("post", "/channels/{name}/events", "slackEvents", "Slack's Events API for a Slack channel this process serves with a signing secret (docs/channels.md): events and interactions, answered once recorded. No bearer token: Slack signs the request (`X-Slack-Signature`, `X-Slack-Request-Timestamp`)")
            .public()
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .raw_body(json!({
                "required": false,
                "content": {
                    "application/json": {
                        "schema": {}
                    }
                }
            }))
            .raw(200, json!({"description": "Recorded, or a `url_verification` answered with its `challenge`", "content": {"application/json": {"schema": {"type": "object"}}}}))
            .answer(400, "Neither an event nor an interaction payload", schema::<schemas::ChannelError>)
            .answer(401, "Missing or bad signature, or a timestamp outside the five-minute window", schema::<schemas::ChannelError>)
            .answer(404, "No such channel receives over HTTP in this process", schema::<schemas::ChannelError>)
            .answer(503, "Not recorded now (the channels are starting, another process serves the account, or the store did not answer): Slack sends it again", schema::<schemas::ChannelError>),
        Operation::new("get", "/v1/channels", "listChannels", "The chat channels this process runs (pincer serve --channel): each account's health (the platform answering, since when, the last event, the last error), what its platform can do (capabilities) and its outbox by status")
            .answer(200, "The channels, by name", schema::<views::ChannelList>),
        Operation::new("get", "/v1/channels/{name}/outbox", "listChannelOutbox", "A channel's outbox: its send intents, most recently changed first, read from the store (the channel run by this process, served here or by another), each with the start of its text, where to, its status and why its last attempt failed; `unknown_after_send` ones wait for an operator's decision (docs/channels.md)")
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                },
                {
                    "name": "status",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "string",
                        "enum": ["", "held", "pending", "sending", "committing", "sent", "failed", "unknown_after_send", "cancelled", "expired", "withheld"]
                    },
                    "description": "Only intents in this status; empty: any"
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": false,
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 500,
                        "default": 50
                    }
                }
            ]))
            .answer(200, "The channel's intents", schema::<views::ChannelOutbox>)
            .error(400, "A bad `status` or `limit`; the message names the parameter")
            .error(404, "No such channel runs in this process")
            .error(503, "The channels are starting, or the store did not answer"),
        Operation::new("post", "/v1/channels/{name}/outbox/{intent_id}", "resolveChannelIntent", "An operator's decision about a message left `unknown_after_send` (the platform took the request and no answer came), after checking the chat: `arrived` records it `sent`, `resend` makes it `pending` so the process serving the account sends it again, `drop` records it `cancelled` (docs/channels.md)")
            .parameters(json!([
                {
                    "name": "name",
                    "in": "path",
                    "required": true,
                    "description": "The channel's name (`[channels.NAME]`)",
                    "schema": {
                        "type": "string"
                    }
                },
                {
                    "name": "intent_id",
                    "in": "path",
                    "required": true,
                    "description": "The send intent's id (`GET /v1/channels/{name}/outbox`)",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .body(schema::<ResolveIntent>)
            .answer(200, "Recorded: the intent as it is now", schema::<views::OutboxIntent>)
            .error(400, "A body that is not a decision (`resolve`: `arrived`, `resend` or `drop`)")
            .error(404, "No such channel runs in this process, or no such intent in it")
            .error(409, "The intent is not `unknown_after_send` (the message names its status), or a live draft to resend")
            .error(413, "Body larger than `[http] body_limit_bytes`")
            .error(503, "The channels are starting, or the store did not answer"),
        Operation::new("get", "/v1/schedules", "listSchedules", "Every schedule, oldest first, with its next occurrence and latest fire (docs/schedules.md)")
            .answer(200, "The schedules", schema::<views::ScheduleList>)
            .error(503, "The store did not answer"),
        Operation::new("post", "/v1/schedules", "addSchedule", "Add a schedule: a prompt run at cron times in a time zone, or once; fired by any `pincer serve`, each occurrence once (docs/schedules.md)")
            .body(schema::<AddSchedule>)
            .answer(201, "Added: the schedule and its next occurrence", schema::<views::ScheduleAdded>)
            .error(400, "A body that is not a schedule's JSON (a missing `prompt`, an unknown field)")
            .error(413, "Body larger than `[http] body_limit_bytes`")
            .error(422, "A definition that cannot be scheduled; the message names the field (`cron: …`, `tz: …`, `at: … is in the past`, `workspace: …`, `session: …`, `deliver: …`, `id: … already exists`)")
            .error(503, "Not recorded (the store did not answer)"),
        Operation::new("get", "/v1/schedules/{schedule_id}", "getSchedule", "A schedule with its next occurrence and its fires, newest first")
            .parameters(json!([
                {
                    "name": "schedule_id",
                    "in": "path",
                    "required": true,
                    "description": "The schedule's id",
                    "schema": {
                        "type": "string"
                    }
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": false,
                    "description": "How many fires (1 to 1000, default 20)",
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 1000
                    }
                }
            ]))
            .answer(200, "The schedule and its fires", schema::<views::ScheduleDetails>)
            .error(400, "Bad query")
            .error(404, "No such schedule")
            .error(503, "The store did not answer"),
        Operation::new("delete", "/v1/schedules/{schedule_id}", "removeSchedule", "Remove a schedule and its record of fires")
            .parameters(json!([
                {
                    "name": "schedule_id",
                    "in": "path",
                    "required": true,
                    "description": "The schedule's id",
                    "schema": {
                        "type": "string"
                    }
                }
            ]))
            .answer(200, "Removed", schema::<views::ScheduleDeleted>)
            .error(404, "No such schedule")
            .error(503, "The store did not answer")
,
    ]
}
