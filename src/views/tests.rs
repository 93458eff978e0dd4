//! The views' JSON, field by field.

use std::path::PathBuf;

use super::*;
use crate::core::event::{RunState, StopReason};
use crate::core::ids::{RunId, SessionId};
use crate::core::session::{Mode, Origin, PromptSettings};

fn child_session() -> Session {
    Session {
        id: SessionId::from_string("ses_2".into()),
        workspace: PathBuf::from("/w"),
        origin: Origin::Http,
        provider: "p".into(),
        model: "m".into(),
        thought_level: Some("high".into()),
        mode: Mode::Supervised,
        title: Some("t".into()),
        mcp_servers: serde_json::json!([{"name": "fs"}]),
        created_at: 1,
        updated_at: 2,
        closed: false,
        conversation: Some("private".into()),
        prompt: PromptSettings {
            system_prompt: Some("private".into()),
            instructions: None,
        },
        parent: Some(SessionParent {
            session: SessionId::from_string("ses_1".into()),
            run: RunId::from_string("run_1".into()),
            call: "call_1".into(),
        }),
    }
}

fn ended_run() -> RunInfo {
    RunInfo {
        id: RunId::from_string("run_1".into()),
        session_id: SessionId::from_string("ses_1".into()),
        state: RunState::Completed,
        stop_reason: Some(StopReason::EndTurn),
        error: None,
        usage: Usage {
            input_tokens: 4,
            output_tokens: 1,
            cached_input_tokens: 2,
            reasoning_tokens: 3,
        },
        cost: Some(Cost {
            amount: 0.5,
            currency: "USD".into(),
        }),
        created_at: 5,
        started_at: Some(6),
        ended_at: Some(7),
    }
}

#[test]
fn a_session_shows_its_settings_and_parent_but_not_its_prompt() {
    let value = session(&child_session());
    assert_eq!(
        value,
        serde_json::json!({
            "session_id": "ses_2",
            "workspace": "/w",
            "origin": "http",
            "provider": "p",
            "model": "m",
            "mode": "supervised",
            "title": "t",
            "created_at": 1,
            "updated_at": 2,
            "closed": false,
            "mcp_servers": [{"name": "fs"}],
            "thought_level": "high",
            "parent": {"session_id": "ses_1", "run_id": "run_1", "call_id": "call_1"},
        })
    );
    let mut own = child_session();
    own.thought_level = None;
    own.parent = None;
    let value = session(&own);
    assert!(value.get("thought_level").is_none() && value.get("parent").is_none());
    assert!(value["title"] == "t" && value["mcp_servers"][0]["name"] == "fs");
}

#[test]
fn a_run_shows_its_outcome_usage_and_times() {
    let value = run(&ended_run());
    assert_eq!(
        value,
        serde_json::json!({
            "run_id": "run_1",
            "session_id": "ses_1",
            "state": "completed",
            "stop_reason": "end_turn",
            "error": null,
            "usage": {"input_tokens": 4, "output_tokens": 1, "cached_input_tokens": 2, "reasoning_tokens": 3},
            "cost": {"amount": 0.5, "currency": "USD"},
            "created_at": 5,
            "started_at": 6,
            "ended_at": 7,
        })
    );
}
