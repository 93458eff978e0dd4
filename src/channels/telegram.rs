//! Telegram Bot API: long polling with `getUpdates`, `sendMessage`,
//! `editMessageText`, inline keyboards and callback queries, and live
//! drafts in private chats as `sendMessageDraft` previews.
//!
//! The polling offset is the acknowledgement: it is stored with each recorded
//! update (same transaction) and sent back to Telegram only after that, so an
//! update that failed to record is fetched again after a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Adapter, Capabilities, DeliveryError, FetchError, Hub, Idempotence, Inbound, LengthUnit,
    Received, download, render,
};
use crate::core::channel::{
    Actor, Attachment, ChannelMessage, FailureKind, MessageOrigin, OutFile, Relation, Target,
    TargetKind, Unit,
};

/// Telegram's longest message text.
pub const MAX_LEN: usize = 4096;
const CURSOR: &str = "offset";
/// Least time between two polls that brought nothing new. A server (or a
/// proxy) that ignores `timeout` answers an empty `getUpdates` at once; without
/// this floor the loop would ask again at once, thousands of times a second.
const MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);

pub struct Telegram {
    name: String,
    account: String,
    token: String,
    base: String,
    client: reqwest::Client,
    poll_timeout: Duration,
    /// Set once the server answered `sendMessageDraft` as a method it does
    /// not have (a self-hosted Bot API server older than 9.3): live drafts
    /// are then messages edited in place, for the process's life.
    drafts_refused: AtomicBool,
}

impl Telegram {
    /// `base` is the Bot API root (`https://api.telegram.org`, or a self-hosted
    /// Bot API server); the account is the bot's id, the token's first part.
    pub fn new(
        name: &str,
        token: &str,
        base: &str,
        poll_timeout: Duration,
    ) -> Result<Self, String> {
        let account = token
            .split_once(':')
            .map(|(id, _)| id)
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| {
                "the Telegram bot token does not look like one (expected DIGITS:SECRET from @BotFather)"
                    .to_owned()
            })?
            .to_owned();
        let client = crate::net::http_client(poll_timeout + Duration::from_secs(15))
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        Ok(Self {
            name: name.to_owned(),
            account,
            token: token.to_owned(),
            base: base.trim_end_matches('/').to_owned(),
            client,
            poll_timeout,
            drafts_refused: AtomicBool::new(false),
        })
    }

    /// Calls a Bot API method; errors are classified and never carry the token.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, DeliveryError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        self.answer(method, self.client.post(&url).json(body)).await
    }

    /// Calls a Bot API method that uploads `file` as its `field`
    /// (`multipart/form-data`; the other parameters as form fields, objects
    /// JSON-serialized as the Bot API takes them).
    async fn call_with_file(
        &self,
        method: &str,
        body: &Value,
        field: &str,
        file: &OutFile,
    ) -> Result<Value, DeliveryError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let mut form = reqwest::multipart::Form::new();
        for (name, value) in body.as_object().into_iter().flatten() {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            form = form.text(name.clone(), value);
        }
        let part = reqwest::multipart::Part::bytes(file.text.clone().into_bytes())
            .file_name(file.name.clone())
            .mime_str(&file.mime_type)
            .map_err(|err| {
                DeliveryError::new(
                    FailureKind::InvalidPayload,
                    format!("telegram {method}: the file's type: {err}"),
                )
            })?;
        form = form.part(field.to_owned(), part);
        self.answer(method, self.client.post(&url).multipart(form))
            .await
    }

    /// Sends a request of `method` and reads its answer: its `result`, or
    /// the error classified.
    async fn answer(
        &self,
        method: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, DeliveryError> {
        let (status, value) = self.exchange(method, request).await?;
        if value["ok"].as_bool() == Some(true) {
            return Ok(value["result"].clone());
        }
        Err(classify(method, status, &value))
    }

    /// Sends a request of `method`: its HTTP status and answer, whatever
    /// its `ok`; only a request without a readable answer is an error.
    async fn exchange(
        &self,
        method: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, Value), DeliveryError> {
        let what = format!("telegram {method}");
        let response = request
            .send()
            .await
            .map_err(|err| DeliveryError::unanswered(&what, err))?;
        let status = response.status().as_u16();
        let value: Value = response
            .json()
            .await
            .map_err(|err| DeliveryError::unreadable(&what, status, err))?;
        Ok((status, value))
    }

    /// A file's bytes: `getFile` for its path, then the download route
    /// (`/file/bot<token>/<path>`), at most `limit` bytes. Errors never
    /// carry the token.
    async fn download(&self, file_id: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
        let file = self
            .call("getFile", &json!({"file_id": file_id}))
            .await
            .map_err(|err| FetchError::Failed(err.message))?;
        if file["file_size"].as_u64().is_some_and(|size| size > limit) {
            return Err(FetchError::TooLarge { limit });
        }
        let path = file["file_path"]
            .as_str()
            .filter(|path| !path.is_empty() && !path.contains(".."))
            .ok_or_else(|| FetchError::Failed("getFile gave no file_path".to_owned()))?;
        let url = format!("{}/file/bot{}/{path}", self.base, self.token);
        let response = self
            .client
            .get(&url)
            .send()
            .await
            .map_err(FetchError::request)?;
        download::read_capped(response, limit, "the file route").await
    }

    fn message_body(&self, target: &Target, unit: &Unit) -> Value {
        let mut body = json!({
            "chat_id": chat_id(&target.id),
            "text": unit.markup.as_deref().unwrap_or(&unit.text),
            "link_preview_options": {"is_disabled": true},
        });
        if unit.markup.is_some() {
            body["parse_mode"] = json!("HTML");
        }
        if let Some(thread) = &target.thread
            && let Ok(thread) = thread.parse::<i64>()
        {
            body["message_thread_id"] = json!(thread);
        }
        if !unit.buttons.is_empty() {
            let row: Vec<Value> = unit
                .buttons
                .iter()
                .map(|b| json!({"text": b.label, "callback_data": b.data}))
                .collect();
            body["reply_markup"] = json!({"inline_keyboard": [row]});
        }
        body
    }

    async fn poll(&self, hub: &Arc<Hub>, cancel: &CancellationToken) {
        let mut offset: i64 = hub
            .cursor(CURSOR)
            .await
            .and_then(|value| value.parse().ok())
            .unwrap_or(0);
        let mut failures: u32 = 0;
        loop {
            let request = json!({
                "offset": offset,
                "timeout": self.poll_timeout.as_secs(),
                "allowed_updates": ["message", "callback_query"],
            });
            let asked = tokio::time::Instant::now();
            let updates = tokio::select! {
                _ = cancel.cancelled() => return,
                result = self.call("getUpdates", &request) => result,
            };
            let updates = match updates {
                Ok(Value::Array(updates)) => {
                    failures = 0;
                    hub.up();
                    updates
                }
                Ok(other) => {
                    tracing::warn!(result = %crate::core::quote::quote(&other.to_string()), "getUpdates returned no list");
                    Vec::new()
                }
                Err(err) => {
                    failures += 1;
                    let wait = err.retry_after.unwrap_or_else(|| {
                        Duration::from_secs(2u64.saturating_pow(failures.min(6)))
                    });
                    tracing::warn!(error = %err, wait_secs = wait.as_secs(), "Telegram polling failed");
                    hub.down(&err.to_string());
                    if err.kind == FailureKind::Auth {
                        tracing::error!("the Telegram bot token was refused; polling stops");
                        return;
                    }
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(wait) => continue,
                    }
                }
            };
            let mut fresh = 0usize;
            for update in updates {
                let Some(id) = update["update_id"].as_i64() else {
                    continue;
                };
                if id < offset {
                    continue;
                }
                let Some(next) = id.checked_add(1) else {
                    // No cursor can follow it; taking it would stall polling.
                    tracing::warn!(update = id, "an update id at the end of its range; skipped");
                    continue;
                };
                let cursor = Some((CURSOR.to_owned(), next.to_string()));
                let outcome = match self.normalize(&update) {
                    Some(inbound) => {
                        let button = match &inbound {
                            Inbound::Button { id, .. } => Some(id.clone()),
                            Inbound::Message(_) => None,
                        };
                        let outcome = hub.receive(inbound, cursor).await;
                        if let Some(query) = button {
                            let _ = self
                                .call("answerCallbackQuery", &json!({"callback_query_id": query}))
                                .await;
                        }
                        outcome
                    }
                    None => {
                        hub.skip(CURSOR, next.to_string());
                        Received::Accepted
                    }
                };
                if let Received::Failed(reason) = outcome {
                    tracing::warn!(update = id, %reason, "update not recorded; it will be fetched again");
                    break;
                }
                offset = next;
                fresh += 1;
            }
            if fresh == 0 {
                // Nothing new was taken in (an empty answer, only old updates,
                // or one that could not be recorded): if it came back sooner
                // than a long poll lasts, the server did not wait, so this side does.
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep_until(asked + MIN_POLL_INTERVAL) => {}
                }
            }
        }
    }

    /// A Telegram update as a channel event; `None` for kinds Pincer ignores.
    /// Public for the fuzzing entry point (`fuzz/`).
    pub fn normalize(&self, update: &Value) -> Option<Inbound> {
        if let Some(query) = update.get("callback_query") {
            let message = &query["message"];
            return Some(Inbound::Button {
                id: query["id"].as_str()?.to_owned(),
                target: target_of(message)?,
                sender: id_string(&query["from"]["id"])?,
                data: query["data"].as_str().unwrap_or_default().to_owned(),
            });
        }
        let message = update.get("message")?;
        let from = &message["from"];
        let text = message["text"]
            .as_str()
            .or_else(|| message["caption"].as_str())
            .unwrap_or_default();
        let mut attachments = Vec::new();
        for kind in ["photo", "document", "voice", "audio", "video"] {
            if let Some(item) = message.get(kind) {
                let item = match item.as_array() {
                    Some(sizes) => largest_photo(sizes),
                    None => Some(item),
                };
                let Some(item) = item else { continue };
                attachments.push(Attachment {
                    kind: kind.to_owned(),
                    name: item["file_name"].as_str().map(str::to_owned),
                    reference: item["file_id"].as_str().unwrap_or_default().to_owned(),
                    size: item["file_size"].as_u64(),
                    mime_type: item["mime_type"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| (kind == "photo").then(|| "image/jpeg".to_owned())),
                });
            }
        }
        if text.is_empty() && attachments.is_empty() {
            return None;
        }
        Some(Inbound::Message(ChannelMessage {
            id: format!(
                "{}:{}",
                id_string(&message["chat"]["id"])?,
                message["message_id"].as_i64()?
            ),
            channel: self.name.clone(),
            account: self.account.clone(),
            target: target_of(message)?,
            sender: Some(Actor {
                id: id_string(&from["id"])?,
                name: from["username"]
                    .as_str()
                    .or_else(|| from["first_name"].as_str())
                    .map(str::to_owned),
                is_bot: from["is_bot"].as_bool().unwrap_or(false),
            }),
            body: text.to_owned(),
            attachments,
            relation: message["reply_to_message"]["message_id"]
                .as_i64()
                .map(|id| Relation::Reply { to: id.to_string() }),
            origin: if from["is_bot"].as_bool() == Some(true) {
                MessageOrigin::ExternalBot
            } else {
                MessageOrigin::User
            },
            at: message["date"].as_i64().unwrap_or(0).saturating_mul(1000),
        }))
    }
}

/// The `draft_id` of the reply named `draft`: the same in every process
/// (a restarted one animates the same preview), non-zero as the Bot API
/// requires, and within 32 bits.
fn draft_id(draft: &str) -> i64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(draft.as_bytes());
    let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) & 0x7fff_ffff;
    i64::from(n.max(1))
}

/// Whether an answer to a call says the server has no such method: 404
/// (Telegram's own servers say `Not Found`, the self-hosted one `Not Found:
/// method not found`; a wrong token is 404 too, but then nothing works).
fn no_such_method(status: u16, value: &Value) -> bool {
    value["error_code"].as_u64().unwrap_or(u64::from(status)) == 404
}

fn id_string(value: &Value) -> Option<String> {
    value
        .as_i64()
        .map(|n| n.to_string())
        .or_else(|| value.as_str().map(str::to_owned))
}

/// Numeric chat ids go back as numbers, `@channel` names as strings.
fn chat_id(id: &str) -> Value {
    id.parse::<i64>().map_or_else(|_| json!(id), |n| json!(n))
}

fn target_of(message: &Value) -> Option<Target> {
    let chat = &message["chat"];
    let kind = match chat["type"].as_str().unwrap_or("private") {
        "private" => TargetKind::Direct,
        "channel" => TargetKind::Channel,
        _ => TargetKind::Group,
    };
    let thread = message["message_thread_id"]
        .as_i64()
        .filter(|_| message["is_topic_message"].as_bool() == Some(true))
        .map(|t| t.to_string());
    Some(Target {
        kind: if thread.is_some() {
            TargetKind::Thread
        } else {
            kind
        },
        id: id_string(&chat["id"])?,
        thread,
    })
}

/// A Bot API error (`ok: false`) as a failure class: by its `error_code`
/// as any HTTP status (`channels::status_kind`), but that Telegram answers
/// 404 to a wrong token and says in a 400's description when a message is
/// not modified or not found.
fn classify(method: &str, status: u16, value: &Value) -> DeliveryError {
    let code = value["error_code"].as_u64().unwrap_or(u64::from(status));
    let description = value["description"]
        .as_str()
        .unwrap_or("no description")
        .to_owned();
    let lower = description.to_ascii_lowercase();
    let kind = match code {
        404 => FailureKind::Auth,
        400 if lower.contains("not modified") => FailureKind::Conflict,
        400 if lower.contains("not found") => FailureKind::NotFound,
        code => super::status_kind(u16::try_from(code).unwrap_or(0)),
    };
    DeliveryError::new(kind, format!("telegram {method}: {code} {description}")).with_retry_after(
        value["parameters"]["retry_after"]
            .as_u64()
            .map(Duration::from_secs),
    )
}

impl Adapter for Telegram {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn kind(&self) -> &'static str {
        "telegram"
    }

    fn fetch<'a>(
        &'a self,
        attachment: &'a Attachment,
        limit: u64,
    ) -> BoxFuture<'a, Result<Vec<u8>, FetchError>> {
        Box::pin(self.download(&attachment.reference, limit))
    }

    /// HTML (Telegram's dialect) in messages of at most 4096 UTF-16 code
    /// units of visible text; the plain text goes with it, sent instead
    /// when Telegram refuses the markup.
    fn render(&self, markdown: &str) -> Vec<Unit> {
        let visible = |piece: &str| render::utf16(&render::plain(piece));
        render::chunk(markdown, MAX_LEN, &visible)
            .into_iter()
            .map(|piece| Unit {
                markup: Some(render::html(&piece, render::Dialect::Telegram)),
                text: render::plain(&piece),
                ..Unit::default()
            })
            .collect()
    }

    /// A chat id (negative for groups and channels), optionally `/TOPIC`.
    fn target(&self, to: &str) -> Result<Target, String> {
        let kind = if to.trim().starts_with('-') {
            TargetKind::Group
        } else {
            TargetKind::Direct
        };
        let target = super::default_target(to, kind)?;
        if target.id.parse::<i64>().is_err() {
            return Err(
                "a Telegram chat is a number (a user's id, or a group's, starting with -)"
                    .to_owned(),
            );
        }
        Ok(target)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_len: MAX_LEN,
            length_unit: LengthUnit::Utf16,
            edit: true,
            delete: true,
            buttons: true,
            reactions: false,
            // Forum topics: `message_thread_id` in and out.
            threads: true,
            files: true,
            edit_interval: Duration::from_secs(1),
            markup: Some("html"),
            working_after: None,
            // No idempotency key and no way to look a message up: a send
            // whose outcome is lost cannot be repeated. A repeated edit is
            // "not modified" (taken as done); a repeated deletion finds the
            // message gone.
            idempotent: Idempotence {
                send: false,
                edit: true,
                delete: true,
            },
        }
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        reply_to: Option<&'a str>,
        _idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>> {
        Box::pin(async move {
            let mut body = self.message_body(target, unit);
            // Inbound ids are `CHAT:MESSAGE`; reply to the message part.
            if let Some(message) = reply_to
                .and_then(|r| r.rsplit(':').next())
                .and_then(|m| m.parse::<i64>().ok())
            {
                body["reply_parameters"] =
                    json!({"message_id": message, "allow_sending_without_reply": true});
            }
            let (method, sent) = match &unit.file {
                None => ("sendMessage", self.call("sendMessage", &body).await?),
                Some(file) => {
                    // The text is the document's caption.
                    if let Some(object) = body.as_object_mut() {
                        object.remove("link_preview_options");
                        if let Some(text) = object.remove("text") {
                            object.insert("caption".to_owned(), text);
                        }
                    }
                    let sent = self
                        .call_with_file("sendDocument", &body, "document", file)
                        .await?;
                    ("sendDocument", sent)
                }
            };
            sent["message_id"]
                .as_i64()
                .map(|id| id.to_string())
                .ok_or_else(|| {
                    DeliveryError::new(
                        FailureKind::Unknown,
                        format!("telegram {method}: the answer has no message_id"),
                    )
                })
        })
    }

    fn edit<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let mut body = self.message_body(target, unit);
            body["message_id"] = json!(platform_id.parse::<i64>().unwrap_or_default());
            if body.get("reply_markup").is_none() {
                body["reply_markup"] = json!({"inline_keyboard": []});
            }
            match self.call("editMessageText", &body).await {
                // The same text again: the message already shows it.
                Err(err)
                    if err.kind == FailureKind::Conflict
                        && err.message.to_ascii_lowercase().contains("not modified") =>
                {
                    Ok(())
                }
                other => other.map(|_| ()),
            }
        })
    }

    /// `deleteMessage`. Telegram lets a bot delete its own messages for 48
    /// hours; older ones are refused (`invalid_payload`). A message already
    /// gone is "message to delete not found" (`not_found`).
    fn delete<'a>(
        &'a self,
        target: &'a Target,
        platform_id: &'a str,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let Ok(message_id) = platform_id.parse::<i64>() else {
                return Err(DeliveryError::new(
                    FailureKind::InvalidPayload,
                    format!("telegram deleteMessage: not a message id: {platform_id:.40}"),
                ));
            };
            let body = json!({"chat_id": chat_id(&target.id), "message_id": message_id});
            self.call("deleteMessage", &body).await.map(|_| ())
        })
    }

    /// Private chats only: `sendMessageDraft` is offered nowhere else.
    fn ephemeral_drafts(&self, target: &Target) -> bool {
        target.kind == TargetKind::Direct && !self.drafts_refused.load(Ordering::Relaxed)
    }

    /// `sendMessageDraft`: the preview Telegram shows until the reply
    /// arrives (or for a short while), its `draft_id` derived from the
    /// reply's name. A server without the method turns drafts off here
    /// (logged once).
    fn draft<'a>(
        &'a self,
        target: &'a Target,
        draft: &'a str,
        unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async move {
            let method = "sendMessageDraft";
            let mut body = json!({
                "chat_id": chat_id(&target.id),
                "draft_id": draft_id(draft),
                "text": unit.markup.as_deref().unwrap_or(&unit.text),
            });
            if unit.markup.is_some() {
                body["parse_mode"] = json!("HTML");
            }
            if let Some(thread) = &target.thread
                && let Ok(thread) = thread.parse::<i64>()
            {
                body["message_thread_id"] = json!(thread);
            }
            let url = format!("{}/bot{}/{method}", self.base, self.token);
            let (status, value) = self
                .exchange(method, self.client.post(&url).json(&body))
                .await?;
            if value["ok"].as_bool() == Some(true) {
                return Ok(());
            }
            if no_such_method(status, &value) && !self.drafts_refused.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(
                    channel = %self.name,
                    "the Bot API server has no sendMessageDraft; live drafts in private chats are messages edited in place until restart"
                );
            }
            Err(classify(method, status, &value))
        })
    }

    fn receive(
        self: Arc<Self>,
        hub: Arc<Hub>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.poll(&hub, &cancel).await })
    }
}

/// Of a photo's sizes (smallest first, as Telegram lists them), the largest
/// a model may be sent; the smallest when none is small enough (it is then
/// refused by size, with the reason, rather than silently dropped).
fn largest_photo(sizes: &[Value]) -> Option<&Value> {
    let limit = crate::core::session::MAX_IMAGE_BYTES as u64;
    sizes
        .iter()
        .rev()
        .find(|size| {
            size["file_size"]
                .as_u64()
                .is_none_or(|bytes| bytes <= limit)
        })
        .or_else(|| sizes.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telegram() -> Telegram {
        Telegram::new(
            "telegram",
            "123456:secret",
            "http://127.0.0.1:9",
            Duration::from_secs(1),
        )
        .unwrap()
    }

    #[test]
    fn the_account_is_the_bots_id_and_bad_tokens_are_named() {
        assert_eq!(telegram().account(), "123456");
        let err = Telegram::new("t", "nonsense", "http://x", Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(err.contains("does not look like"), "{err}");
    }

    #[test]
    fn errors_are_classified_with_retry_after() {
        let err = classify(
            "sendMessage",
            429,
            &json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 7", "parameters": {"retry_after": 7}}),
        );
        assert_eq!(err.kind, FailureKind::RateLimit);
        assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
        let not_found = classify(
            "editMessageText",
            400,
            &json!({"ok": false, "error_code": 400, "description": "Bad Request: message to edit not found"}),
        );
        assert_eq!(not_found.kind, FailureKind::NotFound);
        let parse = classify(
            "sendMessage",
            400,
            &json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities"}),
        );
        assert_eq!(parse.kind, FailureKind::InvalidPayload);
        let blocked = classify(
            "sendMessage",
            403,
            &json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}),
        );
        assert_eq!(blocked.kind, FailureKind::Permission);
        // Telegram answers a wrong token with 404; other statuses as HTTP's.
        let token = classify(
            "getMe",
            404,
            &json!({"ok": false, "error_code": 404, "description": "Not Found"}),
        );
        assert_eq!(token.kind, FailureKind::Auth);
        let large = classify(
            "sendMessage",
            413,
            &json!({"ok": false, "error_code": 413, "description": "Request Entity Too Large"}),
        );
        assert_eq!(large.kind, FailureKind::InvalidPayload);
        let down = classify(
            "sendMessage",
            502,
            &json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
        );
        assert_eq!(down.kind, FailureKind::Transient);
    }

    /// Telegram's answers through the shared classification: a refused
    /// connection is retried, an answer that never came may have been acted
    /// on, a 5xx whose body is lost is retried.
    #[tokio::test]
    async fn calls_are_classified_without_the_token() {
        use crate::channels::tests::{Answer, serve_once};
        let at =
            |url: &str| Telegram::new("telegram", "123456:secret", url, Duration::ZERO).unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = at(&format!("http://{closed}"))
            .call("sendMessage", &json!({}))
            .await
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::Transient, "{err}");
        let body =
            r#"{"ok":false,"error_code":429,"description":"slow","parameters":{"retry_after":3}}"#;
        let limited: &'static str = Box::leak(
            format!(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_boxed_str(),
        );
        for (answer, kind) in [
            (Answer::Close, FailureKind::Unknown),
            (
                Answer::Raw("HTTP/1.1 502 Bad Gateway\r\ncontent-length: 8\r\n\r\n<html>oh"),
                FailureKind::Transient,
            ),
            (Answer::Raw(limited), FailureKind::RateLimit),
        ] {
            let (url, _) = serve_once(answer).await;
            let err = at(&url).call("sendMessage", &json!({})).await.unwrap_err();
            assert_eq!(err.kind, kind, "{err}");
            assert!(!err.message.contains("secret"), "{err}");
            if kind == FailureKind::RateLimit {
                assert_eq!(err.retry_after, Some(Duration::from_secs(3)));
            }
        }
    }

    /// What Telegram declares: topics, UTF-16 lengths, and only edits and
    /// deletions repeatable; every rendered message fits the declared length.
    #[test]
    fn telegram_declares_what_it_does() {
        let caps = telegram().capabilities();
        assert_eq!(caps.length_unit, LengthUnit::Utf16);
        assert_eq!(
            caps.idempotent,
            Idempotence {
                send: false,
                edit: true,
                delete: true
            }
        );
        assert!(caps.threads && caps.buttons && caps.delete && !caps.reactions);
        let long = "😀 **bold** ".repeat(2_000);
        let units = telegram().render(&long);
        assert!(units.len() > 1);
        assert!(
            units
                .iter()
                .all(|u| caps.length_unit.measure(&u.text) <= caps.max_len)
        );
        // A topic is a thread: `CHAT/TOPIC` names one.
        let target = telegram().target("-1001/7").unwrap();
        assert_eq!(target.thread.as_deref(), Some("7"));
        assert_eq!(
            telegram().message_body(&target, &Unit::plain("x".into()))["message_thread_id"],
            7
        );
    }

    /// One `draft_id` per reply, the same in every process, never zero;
    /// private chats only, until the server says it has no such method.
    #[test]
    fn drafts_are_named_by_the_reply_and_offered_in_private_chats_only() {
        let id = draft_id("draft:run_1");
        assert_eq!(id, draft_id("draft:run_1"));
        assert_ne!(id, draft_id("draft:run_2"));
        for n in 0..1000 {
            let id = draft_id(&format!("draft:run_{n}"));
            assert!((1..=i64::from(i32::MAX)).contains(&id), "{id}");
        }
        let t = telegram();
        assert!(t.ephemeral_drafts(&t.target("42").unwrap()));
        assert!(!t.ephemeral_drafts(&t.target("-1001").unwrap()));
        assert!(!t.ephemeral_drafts(&t.target("-1001/7").unwrap()));
        t.drafts_refused.store(true, Ordering::Relaxed);
        assert!(!t.ephemeral_drafts(&t.target("42").unwrap()));
        // What a server without the method answers: 404, by either name.
        let missing =
            json!({"ok": false, "error_code": 404, "description": "Not Found: method not found"});
        assert!(no_such_method(404, &missing));
        assert!(no_such_method(
            404,
            &json!({"ok": false, "error_code": 404, "description": "Not Found"})
        ));
        let refused =
            json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"});
        assert!(!no_such_method(400, &refused));
    }

    /// A server without `sendMessageDraft` turns drafts off once; any other
    /// refusal leaves them on.
    #[tokio::test]
    async fn a_server_without_the_method_turns_drafts_off() {
        use crate::channels::tests::{Answer, serve_once};
        let body = r#"{"ok":false,"error_code":400,"description":"Bad Request: text is empty"}"#;
        let refused: &'static str = Box::leak(
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_boxed_str(),
        );
        let body = r#"{"ok":false,"error_code":404,"description":"Not Found: method not found"}"#;
        let missing: &'static str = Box::leak(
            format!(
                "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_boxed_str(),
        );
        let chat = Target {
            kind: TargetKind::Direct,
            id: "42".into(),
            thread: None,
        };
        let unit = Unit::plain("hel".into());
        for (answer, still_on) in [(refused, true), (missing, false)] {
            let (url, _) = serve_once(Answer::Raw(answer)).await;
            let t = Telegram::new("telegram", "123456:secret", &url, Duration::ZERO).unwrap();
            let err = t.draft(&chat, "draft:run_1", &unit).await.unwrap_err();
            assert!(err.message.contains("sendMessageDraft"), "{err}");
            assert_eq!(t.ephemeral_drafts(&chat), still_on, "{err}");
        }
    }

    /// Found by fuzzing (`telegram_update`): a date past what milliseconds
    /// can hold overflowed.
    #[test]
    fn a_date_too_large_for_milliseconds_saturates() {
        let update = json!({"update_id": 10, "message": {"message_id": 13,
            "date": i64::MAX, "from": {"id": 9}, "chat": {"id": 9, "type": "group"},
            "text": "late"}});
        let Some(Inbound::Message(message)) = telegram().normalize(&update) else {
            panic!("not a message")
        };
        assert_eq!(message.at, i64::MAX);
    }

    #[test]
    fn updates_normalize_to_messages_and_buttons() {
        let t = telegram();
        let update = json!({"update_id": 5, "message": {"message_id": 9, "date": 1700000000,
            "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": 42, "type": "private"}, "text": "hello"}});
        let Some(Inbound::Message(message)) = t.normalize(&update) else {
            panic!("not a message")
        };
        assert_eq!(message.id, "42:9");
        assert_eq!(message.target.kind, TargetKind::Direct);
        assert_eq!(message.sender.unwrap().id, "42");
        assert_eq!(message.body, "hello");
        let press = json!({"update_id": 6, "callback_query": {"id": "cb1", "data": "ap:x:allow_once",
            "from": {"id": 42}, "message": {"message_id": 10, "chat": {"id": -100, "type": "supergroup"}}}});
        let Some(Inbound::Button { target, data, .. }) = t.normalize(&press) else {
            panic!("not a button")
        };
        assert_eq!(target.kind, TargetKind::Group);
        assert_eq!(target.id, "-100");
        assert_eq!(data, "ap:x:allow_once");
        // A sticker alone: ignored.
        assert!(
            t.normalize(&json!({"update_id": 7, "message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "from": {"id": 1}, "sticker": {}}}))
                .is_none()
        );
    }
}
