//! Questions to the person (`ask_user`) in ACP: `elicitation/create` with a
//! one-field form when the client advertises form elicitation; otherwise a
//! `session/request_permission` whose options are the answers when the
//! question offers some; otherwise the question as agent text, answered by
//! the person's next prompt. Whatever the way, a prompt sent while a
//! question waits answers it (`Runtime::answer_with_reply`).

use super::*;
use crate::core::question::{Question, QuestionAnswer, QuestionOutcome};

/// The option id of the "decline" choice in a permission request.
const DECLINE: &str = "decline";

impl Connection {
    /// Asks the client a waiting question and passes the answer to the
    /// runtime. Runs beside the forwarder, like approvals.
    pub(super) fn ask_question(self: &Arc<Self>, session: &SessionId, run: &RunId, event: &Event) {
        let (Event::QuestionAsked { call_id, .. }, Some((question_id, question))) =
            (event, event.question())
        else {
            return;
        };
        let form = *self.elicitation_form.lock();
        let way = if form {
            Way::Form(elicitation_request(session, call_id, &question))
        } else if !question.options.is_empty() {
            Way::Choice(Box::new(permission_request(session, call_id, &question)))
        } else {
            Way::Text
        };
        let token = CancellationToken::new();
        let (over, pending_over) = tokio::sync::oneshot::channel();
        self.permissions.lock().insert(
            question_id.to_owned(),
            PendingPermission {
                cancel: token.clone(),
                over: pending_over,
            },
        );
        let conn = self.clone();
        let run = run.clone();
        let session = session.clone();
        let question_id = question_id.to_owned();
        self.tasks.spawn(async move {
            let answer = match way {
                Way::Form(request) => {
                    let answer = conn
                        .peer
                        .request("elicitation/create", &request, &token)
                        .await;
                    match answer {
                        Ok(value) => Some(form_answer(&question, &value)),
                        Err(_) if token.is_cancelled() => None,
                        Err(err) => {
                            tracing::warn!(question = %question_id, error = %rpc_error_text(&err), "elicitation/create failed; the question waits for a prompt");
                            conn.show_question(&session, &question).await;
                            None
                        }
                    }
                }
                Way::Choice(request) => {
                    let answer = conn
                        .peer
                        .request("session/request_permission", &request, &token)
                        .await;
                    match answer {
                        Ok(value) => Some(choice_answer(&question, &value)),
                        Err(_) if token.is_cancelled() => None,
                        Err(err) => {
                            tracing::warn!(question = %question_id, error = %rpc_error_text(&err), "session/request_permission failed; the question waits for a prompt");
                            conn.show_question(&session, &question).await;
                            None
                        }
                    }
                }
                Way::Text => {
                    conn.show_question(&session, &question).await;
                    None
                }
            };
            drop(over);
            conn.permissions.lock().remove(&question_id);
            if let Some(answer) = answer {
                match conn
                    .runtime
                    .answer_question_of(&session, &run, &question_id, answer)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::debug!(question = %question_id, "question was already settled");
                    }
                    Err(err) => {
                        tracing::warn!(question = %question_id, error = %err, "cannot pass the answer on");
                    }
                }
            }
        });
    }

    /// The question as agent text: the person answers with their next prompt.
    async fn show_question(&self, session: &SessionId, question: &Question) {
        let mut text = format!("**Question:** {}\n", question.text);
        for (index, option) in question.options.iter().enumerate() {
            text.push_str(&format!("{}. {option}\n", index + 1));
        }
        text.push_str(if question.options.is_empty() {
            "\n_Reply to answer._\n\n"
        } else {
            "\n_Reply with a number or your own answer._\n\n"
        });
        self.notify_update(
            session,
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(acp::ContentBlock::Text(
                acp::TextContent::new(text),
            ))),
        )
        .await;
    }
}

enum Way {
    Form(Value),
    Choice(Box<acp::RequestPermissionRequest>),
    Text,
}

/// `elicitation/create` params: a form with one `answer` field, a choice
/// among the options when there are some.
fn elicitation_request(session: &SessionId, call_id: &str, question: &Question) -> Value {
    let mut answer = json!({"type": "string", "title": "Answer"});
    if !question.options.is_empty() {
        answer["oneOf"] = question
            .options
            .iter()
            .map(|o| json!({"const": o, "title": o}))
            .collect();
    }
    json!({
        "sessionId": session.as_str(),
        "toolCallId": call_id,
        "mode": "form",
        "message": question.text,
        "requestedSchema": {
            "type": "object",
            "properties": {"answer": answer},
            "required": ["answer"]
        }
    })
}

/// The answer in an `elicitation/create` response.
fn form_answer(question: &Question, response: &Value) -> QuestionAnswer {
    match response.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let answer = response.get("content").and_then(|c| c.get("answer"));
            match answer {
                Some(Value::String(text)) => QuestionAnswer::from_reply(question, text),
                Some(Value::Array(items)) => {
                    let texts: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                    QuestionAnswer::answered(&texts.join(", "))
                }
                Some(Value::Number(n)) => QuestionAnswer::from_reply(question, &n.to_string()),
                Some(Value::Bool(b)) => QuestionAnswer::answered(&b.to_string()),
                _ => QuestionAnswer::without(QuestionOutcome::Declined),
            }
        }
        // `decline`, `cancel` (dismissed), or an action Pincer does not know.
        _ => QuestionAnswer::without(QuestionOutcome::Declined),
    }
}

/// `session/request_permission` params whose options are the answers, and
/// one to decline.
fn permission_request(
    session: &SessionId,
    call_id: &str,
    question: &Question,
) -> acp::RequestPermissionRequest {
    let mut options: Vec<acp::PermissionOption> = question
        .options
        .iter()
        .enumerate()
        .map(|(index, option)| {
            acp::PermissionOption::new(
                format!("answer_{}", index + 1),
                option.clone(),
                acp::PermissionOptionKind::AllowOnce,
            )
        })
        .collect();
    options.push(acp::PermissionOption::new(
        DECLINE,
        "Decline to answer",
        acp::PermissionOptionKind::RejectOnce,
    ));
    let fields = acp::ToolCallUpdateFields::new()
        .kind(acp::ToolKind::Think)
        .status(acp::ToolCallStatus::Pending)
        .title(question.text.clone());
    acp::RequestPermissionRequest::new(
        session.as_str().to_owned(),
        acp::ToolCallUpdate::new(call_id.to_owned(), fields),
        options,
    )
}

/// The answer in a `session/request_permission` response.
fn choice_answer(question: &Question, response: &Value) -> QuestionAnswer {
    let chosen = serde_json::from_value::<acp::RequestPermissionResponse>(response.clone())
        .ok()
        .and_then(|r| {
            let acp::RequestPermissionOutcome::Selected(selected) = r.outcome else {
                return None;
            };
            Some(selected.option_id.0)
        });
    let option = chosen
        .as_deref()
        .and_then(|id| id.strip_prefix("answer_"))
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| question.options.get(i));
    match option {
        Some(option) => QuestionAnswer::answered(option),
        None => QuestionAnswer::without(QuestionOutcome::Declined),
    }
}

/// The text of a prompt, when it is text only (what can answer a question).
pub(super) fn reply_text(content: &[crate::core::session::ContentPart]) -> Option<String> {
    let mut text = String::new();
    for part in content {
        let crate::core::session::ContentPart::Text { text: t } = part else {
            return None;
        };
        text.push_str(t);
    }
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(options: &[&str]) -> Question {
        Question {
            text: "Which one?".into(),
            options: options.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn form_answers_are_read() {
        let q = question(&["Red", "Blue"]);
        let accept =
            |v: Value| form_answer(&q, &json!({"action": "accept", "content": {"answer": v}}));
        assert_eq!(accept(json!("Blue")).answer.as_deref(), Some("Blue"));
        assert_eq!(accept(json!("2")).answer.as_deref(), Some("Blue"));
        assert_eq!(accept(json!("Green")).answer.as_deref(), Some("Green"));
        assert_eq!(
            form_answer(&q, &json!({"action": "decline"})).outcome,
            QuestionOutcome::Declined
        );
        assert_eq!(
            form_answer(&q, &json!({"action": "accept", "content": {}})).outcome,
            QuestionOutcome::Declined
        );
    }

    #[test]
    fn choices_map_back_to_the_options() {
        let q = question(&["Red", "Blue"]);
        let pick = |id: &str| {
            choice_answer(
                &q,
                &json!({"outcome": {"outcome": "selected", "optionId": id}}),
            )
        };
        assert_eq!(pick("answer_2").answer.as_deref(), Some("Blue"));
        assert_eq!(pick(DECLINE).outcome, QuestionOutcome::Declined);
        assert_eq!(pick("answer_9").outcome, QuestionOutcome::Declined);
        let request = permission_request(&SessionId::from_string("s".into()), "c1", &q);
        let ids: Vec<String> = request
            .options
            .iter()
            .map(|o| o.option_id.0.to_string())
            .collect();
        assert_eq!(ids, vec!["answer_1", "answer_2", "decline"]);
    }
}
