//! Memory: what the agent keeps from one session to the next, and how it is
//! recalled into a turn's context.
//!
//! An item is a short text with a scope: **user** (every session of the
//! person), **workspace** (sessions in the same repository, or the same
//! directory outside one) or **conversation** (one chat, across its `/new`
//! sessions; one session elsewhere). The store behind [`Memories`] keeps them
//! and searches them by words (BM25) and, with embeddings, by meaning. The model saves, searches and forgets items
//! with tools that pass the gate like every tool; people manage them with
//! `pincer memory`, `/memory`, `/remember`, `/forget` and HTTP routes.
//!
//! **Recall**, before each model turn: pinned items of the session's scopes
//! are stated in the system prompt (they change rarely, so the cached prefix
//! holds); the items most relevant to the latest prompt (BM25 with a recency
//! decay, above a relevance floor, within a token budget) ride in a marked
//! block before that prompt, in the request only, never in the history.

#[cfg(test)]
pub mod contract;
pub(crate) mod index;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ids::{RunId, SessionId};
use super::safety::Safety;
use super::session::Millis;

/// Whose memory an item is. (The memory tools take one: the schema the
/// model sees lists the names.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Workspace,
    User,
    Conversation,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::User, Scope::Workspace, Scope::Conversation];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Workspace => "workspace",
            Scope::Conversation => "conversation",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == value)
    }
}

/// The keys that place a session's items: its workspace's (the repository
/// root, or the workspace directory) and its conversation's (the chat, or the
/// session). The user scope has one key, the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ScopeKeys {
    pub workspace: String,
    pub conversation: String,
}

impl ScopeKeys {
    pub fn key(&self, scope: Scope) -> &str {
        match scope {
            Scope::User => "",
            Scope::Workspace => &self.workspace,
            Scope::Conversation => &self.conversation,
        }
    }

    /// Every (scope, key) a session sees.
    pub fn visible(&self) -> Vec<(Scope, String)> {
        Scope::ALL
            .into_iter()
            .map(|scope| (scope, self.key(scope).to_owned()))
            .collect()
    }
}

/// Where an item came from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemorySource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
    /// The tool call that saved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// `model` (a tool call), `person` (a command or route) or `import`.
    pub by: String,
}

/// One remembered item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryItem {
    /// `mem_…`.
    pub id: String,
    pub text: String,
    pub scope: Scope,
    /// The scope's key: a workspace path, a conversation, or empty for user.
    pub scope_key: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub source: MemorySource,
    pub created_at: Millis,
    pub updated_at: Millis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Millis>,
    #[serde(default)]
    pub pinned: bool,
}

/// A new id for an item.
pub fn new_id() -> String {
    format!("mem_{}", uuid::Uuid::now_v7().simple())
}

/// Longest item text, in characters: a memory is a fact, not a document.
pub const MAX_TEXT_CHARS: usize = 4096;
/// Most tags on one item, and the longest tag.
pub const MAX_TAGS: usize = 16;
pub const MAX_TAG_CHARS: usize = 64;

/// Why an item cannot be stored as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidItem {
    #[error("the text is empty")]
    Empty,
    #[error("the text is {0} characters; at most {MAX_TEXT_CHARS} are kept")]
    TooLong(usize),
    #[error("at most {MAX_TAGS} tags are allowed")]
    TooManyTags,
    #[error("a tag must be 1 to {MAX_TAG_CHARS} letters, digits, `-`, `_`, `.` or `/`: {0}")]
    BadTag(String),
    #[error("the text holds what looks like a secret ({0}); it was not stored")]
    Secret(String),
}

/// A text without the blanks around it (spaces, tabs, line breaks; the
/// characters the HTTP API's pattern names).
pub fn trim(text: &str) -> &str {
    text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C'))
}

/// Checks an item's text and tags; returns the tags normalized (lower case,
/// sorted, without duplicates).
pub fn check_item(text: &str, tags: &[String]) -> Result<Vec<String>, InvalidItem> {
    if trim(text).is_empty() {
        return Err(InvalidItem::Empty);
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(InvalidItem::TooLong(chars));
    }
    if tags.len() > MAX_TAGS {
        return Err(InvalidItem::TooManyTags);
    }
    let mut normalized = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim().to_lowercase();
        let ok = !tag.is_empty()
            && tag.chars().count() <= MAX_TAG_CHARS
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        if !ok {
            return Err(InvalidItem::BadTag(super::quote::quote(&tag).to_string()));
        }
        normalized.push(tag);
    }
    normalized.sort();
    normalized.dedup();
    Ok(normalized)
}

/// A change to the stored items.
#[derive(Debug, Clone)]
pub enum MemoryWrite {
    /// A new item (its id must be new).
    Save(MemoryItem),
    /// A new item from an export: saved as is, embedded later in batches
    /// (`core::semantic`).
    Import(MemoryItem),
    /// Changes the given fields of an item; a missing item is a conflict.
    Update {
        id: String,
        text: Option<String>,
        tags: Option<Vec<String>>,
        pinned: Option<bool>,
        at: Millis,
    },
    /// Removes an item; a missing item is a conflict.
    Forget { id: String },
    /// Items a turn's context was given.
    Used { ids: Vec<String>, at: Millis },
    /// An item's embedding (`core::semantic`), for the text it was made
    /// from: kept only while the item still has that text.
    Vector {
        id: String,
        text: String,
        model: String,
        vector: Vec<f32>,
    },
}

/// Which items to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct MemoryFilter {
    /// Only these (scope, key) pairs; empty: every item.
    pub within: Vec<(Scope, String)>,
    /// Only items of this scope.
    pub scope: Option<Scope>,
    /// Only items carrying this tag.
    pub tag: Option<String>,
    pub pinned_only: bool,
    /// At most this many; 0: no limit.
    pub limit: usize,
}

/// A search: by words (full text), and by meaning too when it carries the
/// query's embedding.
#[derive(Debug, Clone, Default)]
pub struct MemorySearch {
    /// The words to look for (see [`search_words`]).
    pub text: String,
    /// Only these (scope, key) pairs; empty: every item.
    pub within: Vec<(Scope, String)>,
    pub limit: usize,
    /// The query's embedding: the search is hybrid (words and meaning, fused
    /// by reciprocal rank); without it, words alone.
    pub vector: Option<QueryVector>,
}

/// A search's embedding and what counts as near (`core::semantic`).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    /// Only items embedded by this model are compared.
    pub model: String,
    pub vector: Vec<f32>,
    /// Least cosine similarity an item needs to count as a match by meaning.
    pub min_similarity: f32,
}

/// A search result: the item and its relevance, higher is better (BM25 for
/// words alone; the fused reciprocal rank for a hybrid search).
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub item: MemoryItem,
    pub relevance: f64,
}

/// Where items are kept. Writes are durable when the reply is `Ok`.
pub trait Memories: Send + Sync {
    fn write(&self, write: MemoryWrite) -> Reply<'_, ()>;

    /// Queues a write nobody waits for (that items were used).
    fn note(&self, write: MemoryWrite);

    fn get<'a>(&'a self, id: &'a str) -> Reply<'a, Option<MemoryItem>>;

    fn list(&self, filter: MemoryFilter) -> Reply<'_, Vec<MemoryItem>>;

    /// Items matching any word of the text (or, with its embedding, near
    /// it in meaning), most relevant first.
    fn search(&self, search: MemorySearch) -> Reply<'_, Vec<MemoryHit>>;

    /// Items with no embedding by `model` (or one of another model), oldest
    /// first, for a backfill.
    fn unembedded<'a>(&'a self, model: &'a str, limit: usize) -> Reply<'a, Vec<MemoryItem>>;

    /// Why searches run on words alone right now although meaning was asked
    /// for (an embeddings endpoint that fails).
    fn degraded(&self) -> Option<String> {
        None
    }
}

/// What a run's memory tools work with.
#[derive(Clone)]
pub struct MemoryAccess {
    pub keeper: Keeper,
    /// Where the session's items go and which it sees.
    pub keys: ScopeKeys,
    pub session: SessionId,
    pub run: Option<RunId>,
}

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Invalid(#[from] InvalidItem),
    #[error("no memory item {0}")]
    NotFound(String),
    /// A write found the item not as it expected (an id already taken, an
    /// item gone); nothing was changed.
    #[error("{0}")]
    Conflict(String),
    /// The store failed, in its own words.
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

/// What the memory store's operations return.
pub type Reply<'a, T> = futures::future::BoxFuture<'a, Result<T, MemoryError>>;

/// A new item as a face or a tool asks for it.
#[derive(Debug, Clone)]
pub struct NewItem {
    pub text: String,
    pub scope: Scope,
    pub tags: Vec<String>,
    pub pinned: bool,
    pub source: MemorySource,
}

/// Changes to an item; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    pub text: Option<String>,
    pub tags: Option<Vec<String>>,
    pub pinned: Option<bool>,
}

/// Memory as faces and tools change it: every text and tag checked and
/// passed through the safety pass (a value it would redact is refused, never
/// stored), every write durable before it returns. `keys` limits an operation
/// to the items a session or workspace sees; `None` reaches every item (the
/// person's own `pincer memory --all`).
#[derive(Clone)]
pub struct Keeper {
    pub store: Arc<dyn Memories>,
    pub safety: Arc<Safety>,
}

impl Keeper {
    pub fn new(store: Arc<dyn Memories>, safety: Arc<Safety>) -> Self {
        Self { store, safety }
    }

    /// The same keeper with a run's safety pass (its session's secrets too).
    pub fn with_safety(&self, safety: Arc<Safety>) -> Self {
        Self {
            store: self.store.clone(),
            safety,
        }
    }

    /// Refuses a text the safety pass would redact (a secret, a key).
    pub fn check_secrets(&self, text: &str) -> Result<(), InvalidItem> {
        let (_, found) = self.safety.redact(text);
        match found.first() {
            None => Ok(()),
            Some(first) => Err(InvalidItem::Secret(first.kind.clone())),
        }
    }

    /// Checks a text and its tags; returns them as stored.
    pub fn check(&self, text: &str, tags: &[String]) -> Result<(String, Vec<String>), InvalidItem> {
        let text = trim(text).to_owned();
        let tags = check_item(&text, tags)?;
        self.check_secrets(&text)?;
        for tag in &tags {
            self.check_secrets(tag)?;
        }
        Ok((text, tags))
    }

    pub async fn add(&self, keys: &ScopeKeys, new: NewItem) -> Result<MemoryItem, MemoryError> {
        let (text, tags) = self.check(&new.text, &new.tags)?;
        let now = super::session::now_millis();
        let item = MemoryItem {
            id: new_id(),
            text,
            scope: new.scope,
            scope_key: keys.key(new.scope).to_owned(),
            tags,
            source: new.source,
            created_at: now,
            updated_at: now,
            last_used_at: None,
            pinned: new.pinned,
        };
        self.store.write(MemoryWrite::Save(item.clone())).await?;
        Ok(item)
    }

    /// Stores an item as exported elsewhere (its id, scope, key and times
    /// kept); `Ok(false)` when an item with its id is already there.
    pub async fn import(&self, mut item: MemoryItem) -> Result<bool, MemoryError> {
        let (text, tags) = self.check(&item.text, &item.tags)?;
        item.text = text;
        item.tags = tags;
        if item.scope == Scope::User {
            item.scope_key.clear();
        }
        if !item.id.starts_with("mem_") || item.id.len() > 64 {
            item.id = new_id();
        }
        if self.store.get(&item.id).await?.is_some() {
            return Ok(false);
        }
        self.store.write(MemoryWrite::Import(item)).await?;
        Ok(true)
    }

    /// The item `id` names, if `keys` (when given) see it.
    pub async fn get(&self, id: &str, keys: Option<&ScopeKeys>) -> Result<MemoryItem, MemoryError> {
        match self.store.get(id).await? {
            Some(item) if keys.is_none_or(|keys| keys.key(item.scope) == item.scope_key) => {
                Ok(item)
            }
            _ => Err(MemoryError::NotFound(super::quote::quote(id).to_string())),
        }
    }

    pub async fn edit(
        &self,
        id: &str,
        keys: Option<&ScopeKeys>,
        patch: Patch,
    ) -> Result<MemoryItem, MemoryError> {
        let item = self.get(id, keys).await?;
        if patch.text.is_none() && patch.tags.is_none() && patch.pinned.is_none() {
            return Ok(item);
        }
        let (text, tags) = self.check(
            patch.text.as_deref().unwrap_or(&item.text),
            patch.tags.as_deref().unwrap_or(&item.tags),
        )?;
        self.store
            .write(MemoryWrite::Update {
                id: item.id.clone(),
                text: patch.text.is_some().then_some(text),
                tags: patch.tags.is_some().then_some(tags),
                pinned: patch.pinned,
                at: super::session::now_millis(),
            })
            .await?;
        self.get(&item.id, None).await
    }

    pub async fn forget(
        &self,
        id: &str,
        keys: Option<&ScopeKeys>,
    ) -> Result<MemoryItem, MemoryError> {
        let item = self.get(id, keys).await?;
        self.store
            .write(MemoryWrite::Forget {
                id: item.id.clone(),
            })
            .await?;
        Ok(item)
    }

    /// The items `keys` see (every item with `None`): those matching `query`
    /// best first, or without one the newest first.
    pub async fn find(
        &self,
        keys: Option<&ScopeKeys>,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Vec<MemoryItem>, MemoryError> {
        let within = keys.map(ScopeKeys::visible).unwrap_or_default();
        Ok(match query.map(str::trim).filter(|q| !q.is_empty()) {
            Some(text) => self
                .store
                .search(MemorySearch {
                    text: text.to_owned(),
                    within,
                    limit: limit.max(1),
                    vector: None,
                })
                .await?
                .into_iter()
                .map(|hit| hit.item)
                .collect(),
            None => {
                self.store
                    .list(MemoryFilter {
                        within,
                        limit,
                        ..MemoryFilter::default()
                    })
                    .await?
            }
        })
    }
}

/// How `/memory` is used.
pub const COMMAND_USAGE: &str = "`/memory` lists what this session remembers; \
`/memory search WORDS`; `/memory add [user|workspace|conversation] TEXT`; \
`/memory forget ID`; `/memory pin ID`; `/memory unpin ID`.";

/// `/memory ARGUMENT` typed by the person in a session (an editor, the
/// terminal, a chat), answered in Markdown; `default_scope` is where `add`
/// saves without a scope (a chat's `/remember`: its conversation).
pub async fn command(
    keeper: &Keeper,
    keys: &ScopeKeys,
    session: &SessionId,
    argument: Option<&str>,
    default_scope: Scope,
) -> String {
    let argument = argument.map(str::trim).unwrap_or_default();
    let (verb, rest) = match argument.split_once(char::is_whitespace) {
        Some((verb, rest)) => (verb, rest.trim()),
        None => (argument, ""),
    };
    let answer = match verb {
        "" | "list" => keeper
            .find(Some(keys), None, 20)
            .await
            .map(|items| listing(&items, "Nothing is remembered here yet.")),
        "search" if !rest.is_empty() => keeper
            .find(Some(keys), Some(rest), 10)
            .await
            .map(|items| listing(&items, "Nothing remembered matches.")),
        "add" if !rest.is_empty() => {
            let (scope, text) = match rest.split_once(char::is_whitespace) {
                Some((first, text)) if Scope::parse(first).is_some() => {
                    (Scope::parse(first).unwrap_or(default_scope), text)
                }
                _ => (default_scope, rest),
            };
            keeper
                .add(
                    keys,
                    NewItem {
                        text: text.to_owned(),
                        scope,
                        tags: Vec::new(),
                        pinned: false,
                        source: MemorySource {
                            session: Some(session.clone()),
                            by: "person".to_owned(),
                            ..MemorySource::default()
                        },
                    },
                )
                .await
                .map(|item| format!("Remembered `{}` ({}).", item.id, item.scope.as_str()))
        }
        "forget" | "rm" if !rest.is_empty() => keeper
            .forget(rest, Some(keys))
            .await
            .map(|item| format!("Forgot `{}`.", item.id)),
        "pin" | "unpin" if !rest.is_empty() => keeper
            .edit(
                rest,
                Some(keys),
                Patch {
                    pinned: Some(verb == "pin"),
                    ..Patch::default()
                },
            )
            .await
            .map(|item| {
                format!(
                    "`{}` is {}.",
                    item.id,
                    if item.pinned {
                        "pinned"
                    } else {
                        "no longer pinned"
                    }
                )
            }),
        _ => return COMMAND_USAGE.to_owned(),
    };
    match answer {
        Ok(text) => text,
        Err(err) => format!("Cannot do that: {err}."),
    }
}

/// Items as a Markdown list.
fn listing(items: &[MemoryItem], empty: &str) -> String {
    if items.is_empty() {
        return empty.to_owned();
    }
    let mut text = String::new();
    for item in items {
        text.push_str(&format!(
            "- `{}` ({}{}) {}\n",
            item.id,
            item.scope.as_str(),
            if item.pinned { ", pinned" } else { "" },
            item.text.trim().replace('\n', " ")
        ));
    }
    text
}

/// Words too common to find anything by.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "do", "does",
    "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me",
    "my", "no", "not", "of", "on", "or", "our", "please", "so", "that", "the", "their", "them",
    "then", "there", "these", "this", "to", "us", "was", "we", "what", "when", "where", "which",
    "who", "why", "will", "with", "would", "you", "your",
];

/// Most words a query looks for.
const MAX_TERMS: usize = 24;

/// The words of a text as memory search sees them: runs of letters, marks
/// and digits, in lower case, without the accents of Latin letters
/// (`Grüße`: `gruße`).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    use unicode_normalization::char::is_combining_mark;
    text.split(|c: char| !(c.is_alphanumeric() || is_combining_mark(c)))
        .filter(|word| !word.is_empty())
        .map(|word| {
            let lower = word.to_lowercase();
            if lower.is_ascii() {
                return lower;
            }
            use unicode_normalization::UnicodeNormalization as _;
            lower
                .nfd()
                .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
                .nfc()
                .collect()
        })
}

/// Whether a word (as [`words`] gives it) is worth looking for: not a
/// common word, and longer than one letter unless it is a number.
pub fn searchable(word: &str) -> bool {
    (word.chars().count() >= 2 || word.chars().all(|c| c.is_ascii_digit()))
        && !STOPWORDS.contains(&word)
}

/// The distinct words of a text a search looks for, at most
/// `MAX_TERMS`, in order.
pub fn search_words(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in words(text) {
        if terms.len() >= MAX_TERMS {
            break;
        }
        if searchable(&word) && !terms.contains(&word) {
            terms.push(word);
        }
    }
    terms
}

/// How recall picks items.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallSettings {
    /// Off: nothing is recalled (the tools still work).
    pub enabled: bool,
    /// Most items recalled for one prompt.
    pub max_items: usize,
    /// Most tokens the recalled block may take.
    pub budget_tokens: usize,
    /// The least score (relevance relative to the best hit, times the
    /// recency factor) an item needs.
    pub floor: f64,
    /// Days after which an unused item counts half as recent.
    pub half_life_days: f64,
    /// Most tokens the pinned items may take in the system prompt.
    pub pinned_budget_tokens: usize,
}

impl Default for RecallSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_items: 8,
            budget_tokens: 600,
            floor: 0.3,
            half_life_days: 30.0,
            pinned_budget_tokens: 1000,
        }
    }
}

/// Tokens a text is estimated at (bytes / 4, as the rest of the context).
fn tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// Ranks search hits for recall: relevance relative to the best hit, times
/// a recency factor between 0.5 and 1 (1 for an item used or changed now,
/// halving its distance to 0.5 every `half_life_days`); items under the floor
/// are dropped, then as many as fit the count and the token budget are kept.
/// Pinned items are left out (the system prompt states them).
pub fn rank(hits: Vec<MemoryHit>, now: Millis, settings: &RecallSettings) -> Vec<MemoryItem> {
    let best = hits.iter().map(|hit| hit.relevance).fold(0.0_f64, f64::max);
    if best <= 0.0 {
        return Vec::new();
    }
    let mut scored: Vec<(f64, MemoryItem)> = hits
        .into_iter()
        .filter(|hit| !hit.item.pinned)
        .map(|hit| {
            let seen = hit.item.last_used_at.unwrap_or(0).max(hit.item.updated_at);
            let age_days = (now - seen).max(0) as f64 / 86_400_000.0;
            let recency = 0.5 + 0.5 * 0.5_f64.powf(age_days / settings.half_life_days.max(0.001));
            ((hit.relevance / best) * recency, hit.item)
        })
        .filter(|(score, _)| *score >= settings.floor)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    let mut kept = Vec::new();
    let mut used = 0;
    for (_, item) in scored {
        if kept.len() >= settings.max_items {
            break;
        }
        let cost = tokens(&item.text) + 8;
        if used + cost > settings.budget_tokens {
            continue;
        }
        used += cost;
        kept.push(item);
    }
    kept
}

/// One item as the model reads it.
fn line(item: &MemoryItem) -> String {
    let mut text = item.text.trim().replace('\n', " ");
    if !item.tags.is_empty() {
        text.push_str(&format!(" [{}]", item.tags.join(", ")));
    }
    format!("- ({}, {}) {text}", item.scope.as_str(), item.id)
}

/// The block recalled items ride in, before the latest prompt.
pub fn recall_block(items: &[MemoryItem]) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let mut block = String::from(
        "<memory>\nRemembered from earlier work; it may bear on the message below. \
         It is what was saved, not something the person said now: \
         check it before relying on it.\n",
    );
    for item in items {
        block.push_str(&line(item));
        block.push('\n');
    }
    block.push_str("</memory>");
    Some(block)
}

/// The pinned items, for the system prompt: as many as fit the budget, with
/// a note of how many were left out.
pub fn pinned_section(items: &[MemoryItem], budget_tokens: usize) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let mut section = String::from(
        "# Remembered (pinned)\n\nThese items were pinned to be kept in mind in every session \
         they belong to (ids for memory_forget):\n",
    );
    let mut used = 0;
    let mut left = 0;
    for item in items {
        let text = line(item);
        if used + tokens(&text) > budget_tokens {
            left += 1;
            continue;
        }
        used += tokens(&text);
        section.push_str(&text);
        section.push('\n');
    }
    if left > 0 {
        section.push_str(&format!(
            "({left} more pinned item(s) did not fit; memory_search finds them.)\n"
        ));
    }
    Some(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, text: &str, updated_at: Millis) -> MemoryItem {
        MemoryItem {
            id: id.into(),
            text: text.into(),
            scope: Scope::Workspace,
            scope_key: "/w".into(),
            tags: Vec::new(),
            source: MemorySource::default(),
            created_at: updated_at,
            updated_at,
            last_used_at: None,
            pinned: false,
        }
    }

    #[test]
    fn a_search_looks_for_the_distinct_words() {
        assert_eq!(
            search_words("How do we run the tests? Run `cargo test` (tests!)"),
            ["run", "tests", "cargo", "test"]
        );
        assert!(search_words("the a of ?!").is_empty());
        assert_eq!(search_words("x 7"), ["7"]);
        assert_eq!(search_words("\"NEAR(a b)\" AND col:x*"), ["near", "col"]);
        // Latin accents go; other scripts keep their marks.
        assert_eq!(search_words("Grüße über Café"), ["gruße", "uber", "cafe"]);
        assert_eq!(search_words("नमस्ते"), ["नमस्ते"]);
    }

    #[test]
    fn tags_are_normalized_and_bad_items_named() {
        assert_eq!(
            check_item("x", &["B".into(), "a".into(), "b".into()]).unwrap(),
            vec!["a", "b"]
        );
        assert_eq!(check_item("  ", &[]), Err(InvalidItem::Empty));
        assert!(matches!(
            check_item(&"x".repeat(MAX_TEXT_CHARS + 1), &[]),
            Err(InvalidItem::TooLong(_))
        ));
        assert!(matches!(
            check_item("x", &["has space".into()]),
            Err(InvalidItem::BadTag(_))
        ));
    }

    #[test]
    fn recall_keeps_the_relevant_and_recent_within_the_budget() {
        let day = 86_400_000;
        let now = 400 * day;
        let settings = RecallSettings::default();
        let hits = vec![
            MemoryHit {
                item: item("mem_a", "tests run with cargo nextest", now),
                relevance: 10.0,
            },
            // As relevant, but a year old: ranks below a fresh, less relevant one.
            MemoryHit {
                item: item("mem_b", "tests need the postgres fixture", now - 365 * day),
                relevance: 10.0,
            },
            MemoryHit {
                item: item("mem_c", "run tests in release for the bench", now),
                relevance: 7.0,
            },
            // Under the floor.
            MemoryHit {
                item: item("mem_d", "tests", now),
                relevance: 1.0,
            },
        ];
        let ids: Vec<String> = rank(hits.clone(), now, &settings)
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(ids, vec!["mem_a", "mem_c", "mem_b"]);

        let tight = RecallSettings {
            budget_tokens: 20,
            ..settings.clone()
        };
        assert_eq!(rank(hits.clone(), now, &tight).len(), 1);
        let pinned = hits
            .into_iter()
            .map(|mut h| {
                h.item.pinned = true;
                h
            })
            .collect();
        assert!(
            rank(pinned, now, &settings).is_empty(),
            "pinned items are stated elsewhere"
        );
    }

    #[test]
    fn blocks_mark_what_is_remembered() {
        let mut a = item("mem_a", "the API is at /v2\nnot /v1", 0);
        a.tags = vec!["api".into()];
        let block = recall_block(&[a.clone()]).unwrap();
        assert!(block.starts_with("<memory>\n"), "{block}");
        assert!(block.contains("- (workspace, mem_a) the API is at /v2 not /v1 [api]\n"));
        assert!(block.ends_with("</memory>"));
        assert_eq!(recall_block(&[]), None);
        let many: Vec<MemoryItem> = (0..50)
            .map(|i| item(&format!("mem_{i}"), &"word ".repeat(40), 0))
            .collect();
        let section = pinned_section(&many, 300).unwrap();
        assert!(
            section.contains("more pinned item(s) did not fit"),
            "{section}"
        );
    }
}
