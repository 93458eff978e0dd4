//! Migrations, applied in order by `user_version`.
//!
//! Each entry moves the schema from version `index` to `index + 1`. Never edit a
//! migration that has shipped; add a new one.

pub const MIGRATIONS: &[&str] = &[
    // 1: sessions, history, runs and the append-only tape.
    r#"
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    workspace   TEXT NOT NULL,
    origin      TEXT NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    mode        TEXT NOT NULL,
    title       TEXT,
    mcp_servers TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    closed      INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);

CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq        INTEGER NOT NULL,
    run_id     TEXT,
    role       TEXT NOT NULL,
    body       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions (id),
    state         TEXT NOT NULL,
    stop_reason   TEXT,
    error         TEXT,
    owner         TEXT,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER
) STRICT;
CREATE INDEX runs_by_session ON runs (session_id, created_at, id);

CREATE TABLE tape (
    id         INTEGER PRIMARY KEY,
    run_id     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    UNIQUE (run_id, seq)
) STRICT;

CREATE TRIGGER tape_rejects_update BEFORE UPDATE ON tape
BEGIN SELECT RAISE(ABORT, 'the tape is append-only: UPDATE is not allowed'); END;
CREATE TRIGGER tape_rejects_delete BEFORE DELETE ON tape
BEGIN SELECT RAISE(ABORT, 'the tape is append-only: DELETE is not allowed'); END;
"#,
    // 2: receipts (a hash chain, append-only) and remembered approvals.
    r#"
CREATE TABLE receipts (
    seq         INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    input_hash  TEXT NOT NULL,
    output_hash TEXT NOT NULL,
    verdict     TEXT NOT NULL,
    is_error    INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE
) STRICT;
CREATE INDEX receipts_by_run ON receipts (run_id, seq);

CREATE TRIGGER receipts_reject_update BEFORE UPDATE ON receipts
BEGIN SELECT RAISE(ABORT, 'receipts are append-only: UPDATE is not allowed'); END;
CREATE TRIGGER receipts_reject_delete BEFORE DELETE ON receipts
BEGIN SELECT RAISE(ABORT, 'receipts are append-only: DELETE is not allowed'); END;

CREATE TABLE grants (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    tool       TEXT NOT NULL,
    scope      TEXT NOT NULL,
    allow      INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool, scope)
) STRICT, WITHOUT ROWID;
"#,
    // 3: the rest of a run's usage, and its cost.
    r#"
ALTER TABLE runs ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost REAL;
ALTER TABLE runs ADD COLUMN currency TEXT;
"#,
    // 4: chat channels: inbox (dedupe), outbox (durable send intents), polling
    // cursors, conversation → session, paired senders, live drafts.
    r#"
CREATE TABLE channel_inbox (
    channel     TEXT NOT NULL,
    account     TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    target      TEXT NOT NULL,
    state       TEXT NOT NULL,
    run_id      TEXT,
    message     TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (channel, account, message_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX channel_inbox_open ON channel_inbox (channel, account, received_at)
    WHERE state IN ('recorded', 'dispatched');

CREATE TABLE channel_outbox (
    id              TEXT PRIMARY KEY,
    channel         TEXT NOT NULL,
    account         TEXT NOT NULL,
    status          TEXT NOT NULL,
    next_attempt_at INTEGER,
    owner           TEXT,
    intent          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX channel_outbox_open ON channel_outbox (channel, account, created_at)
    WHERE status IN ('pending', 'sending', 'committing');

CREATE TABLE channel_cursors (
    channel TEXT NOT NULL,
    account TEXT NOT NULL,
    name    TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (channel, account, name)
) STRICT, WITHOUT ROWID;

CREATE TABLE channel_sessions (
    channel    TEXT NOT NULL,
    account    TEXT NOT NULL,
    target     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (channel, account, target)
) STRICT, WITHOUT ROWID;

CREATE TABLE channel_peers (
    channel   TEXT NOT NULL,
    account   TEXT NOT NULL,
    sender    TEXT NOT NULL,
    paired_at INTEGER NOT NULL,
    PRIMARY KEY (channel, account, sender)
) STRICT, WITHOUT ROWID;

CREATE TABLE channel_drafts (
    run_id      TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    account     TEXT NOT NULL,
    target      TEXT NOT NULL,
    platform_id TEXT NOT NULL,
    text        TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
"#,
    // 5: memory (items with a full-text index kept in step by triggers), and
    // what a session carries beyond its settings: the conversation it belongs
    // to (a chat, across its sessions) and its own prompt settings.
    r#"
CREATE TABLE memories (
    rowid        INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    scope        TEXT NOT NULL,
    scope_key    TEXT NOT NULL,
    text         TEXT NOT NULL,
    tags         TEXT NOT NULL DEFAULT '',
    scope_token  TEXT NOT NULL,
    source       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    pinned       INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX memories_by_scope ON memories (scope, scope_key, updated_at DESC);
CREATE INDEX memories_pinned ON memories (scope, scope_key) WHERE pinned = 1;

-- scope_token names the item's scope and key as one word, so a search
-- narrows to a session's scopes inside the index, before ranking.
CREATE VIRTUAL TABLE memories_fts USING fts5(
    text, tags, scope_token, content = 'memories', content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, tags, scope_token) VALUES (new.rowid, new.text, new.tags, new.scope_token);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags, scope_token) VALUES ('delete', old.rowid, old.text, old.tags, old.scope_token);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags, scope_token) VALUES ('delete', old.rowid, old.text, old.tags, old.scope_token);
    INSERT INTO memories_fts (rowid, text, tags, scope_token) VALUES (new.rowid, new.text, new.tags, new.scope_token);
END;

-- How many items hold each word (as `core::memory::fts_terms` splits them;
-- the empty word: how many items there are), kept by the writer: a search
-- looks for the rarest words only, which find the best matches and spare
-- ranking every item a common word holds.
CREATE TABLE memory_terms (
    term TEXT PRIMARY KEY,
    docs INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

ALTER TABLE sessions ADD COLUMN conversation TEXT;
ALTER TABLE sessions ADD COLUMN system_prompt TEXT;
ALTER TABLE sessions ADD COLUMN instructions TEXT;
"#,
    // 6: memory embeddings (`[memory] embeddings`): one vector per item, for
    // the text it was made from; an item's vector goes when the item goes or
    // its text changes. Every vector's arrival (`seq`) and departure
    // (`memory_vectors_gone`) is numbered, so a process keeping the vectors
    // in memory catches up with what other processes changed by reading
    // only what is new.
    r#"
CREATE TABLE memory_vectors (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    item   INTEGER NOT NULL UNIQUE,
    model  TEXT NOT NULL,
    vector BLOB NOT NULL
) STRICT;
CREATE TABLE memory_vectors_gone (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    item INTEGER NOT NULL
) STRICT;
CREATE TRIGGER memory_vectors_leave AFTER DELETE ON memory_vectors BEGIN
    INSERT INTO memory_vectors_gone (item) VALUES (old.item);
END;
CREATE TRIGGER memories_vector_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE item = old.rowid;
END;
CREATE TRIGGER memories_vector_stale AFTER UPDATE OF text ON memories
WHEN new.text IS NOT old.text BEGIN
    DELETE FROM memory_vectors WHERE item = old.rowid;
END;
"#,
    // 7: search by words moves into memory (`store::words`): the FTS5
    // index and the word counts go; each item's latest change of text or
    // tags (or its arrival or departure) is numbered, one row per item, so
    // a process holding the words catches up by reading the items changed
    // since it last looked.
    r#"
DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TRIGGER memories_fts_update;
DROP TABLE memories_fts;
DROP TABLE memory_terms;
CREATE TABLE memory_changes (
    item INTEGER PRIMARY KEY,
    seq  INTEGER NOT NULL UNIQUE
) STRICT;
CREATE TRIGGER memories_change_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes (item, seq)
    VALUES (new.rowid, (SELECT coalesce(max(seq), 0) + 1 FROM memory_changes))
    ON CONFLICT (item) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER memories_change_update AFTER UPDATE OF text, tags ON memories
WHEN new.text IS NOT old.text OR new.tags IS NOT old.tags BEGIN
    INSERT INTO memory_changes (item, seq)
    VALUES (new.rowid, (SELECT coalesce(max(seq), 0) + 1 FROM memory_changes))
    ON CONFLICT (item) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER memories_change_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (item, seq)
    VALUES (old.rowid, (SELECT coalesce(max(seq), 0) + 1 FROM memory_changes))
    ON CONFLICT (item) DO UPDATE SET seq = excluded.seq;
END;
"#,
    // 8: what lifecycle hooks decided about a tool call, in its receipt
    // (one `hook: decision` a line; NULL when no hook decided).
    r#"
ALTER TABLE receipts ADD COLUMN hooks TEXT;
"#,
    // 9: the project directories whose hooks a person trusted
    // (`pincer trust`, `/trust`): hooks imported from a workspace's
    // `.claude/settings.json` or `.codex/hooks.json` run only under one.
    r#"
CREATE TABLE trusted_roots (
    root TEXT PRIMARY KEY,
    at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
"#,
    // 10: outbound chat messages `held` for their `MessageSending` hooks are
    // open too.
    r#"
DROP INDEX channel_outbox_open;
CREATE INDEX channel_outbox_open ON channel_outbox (channel, account, created_at)
    WHERE status IN ('held', 'pending', 'sending', 'committing');
"#,
    // 11: a subagent's session names the run and `delegate` call it works
    // for; listings leave such sessions out.
    r#"
ALTER TABLE sessions ADD COLUMN parent_session TEXT;
ALTER TABLE sessions ADD COLUMN parent_run TEXT;
ALTER TABLE sessions ADD COLUMN parent_call TEXT;
"#,
    // 12: deleted sessions (`session/delete`, `pincer sessions rm`): a
    // tombstone row; the tape stays append-only except that a deleted
    // session's tape is removed whole.
    r#"
ALTER TABLE sessions ADD COLUMN deleted_at INTEGER;
DROP TRIGGER tape_rejects_delete;
CREATE TRIGGER tape_rejects_delete BEFORE DELETE ON tape
WHEN NOT EXISTS (SELECT 1 FROM sessions WHERE id = old.session_id AND deleted_at IS NOT NULL)
BEGIN SELECT RAISE(ABORT, 'the tape is append-only: DELETE is not allowed'); END;
"#,
    // 13: the session's thought level (its provider's reasoning effort).
    r#"
ALTER TABLE sessions ADD COLUMN thought_level TEXT;
"#,
    // 14: listings read only the sessions they list, from a page's cursor
    // on (`reader::sessions`), in every workspace or in one: a page costs
    // the same on the last page of 10,000 sessions as on the first. Each
    // open looks for runs left unfinished (`writer::recover_interrupted`)
    // among those alone, not every run ever made.
    r#"
DROP INDEX sessions_by_update;
CREATE INDEX sessions_listed ON sessions (updated_at DESC, id DESC)
    WHERE parent_session IS NULL AND deleted_at IS NULL;
CREATE INDEX sessions_listed_in_workspace ON sessions (workspace, updated_at DESC, id DESC)
    WHERE parent_session IS NULL AND deleted_at IS NULL;
CREATE INDEX runs_unfinished ON runs (state)
    WHERE state IN ('queued', 'running', 'waiting');
"#,
    // 15: trust is given to the hook files a person saw (`core::hooks::Trust`):
    // each file's path, digest and hooks as JSON. A directory trusted before
    // holds none, so its hook files wait to be trusted again.
    r#"
ALTER TABLE trusted_roots ADD COLUMN files TEXT NOT NULL DEFAULT '[]';
"#,
    // 16: session leases (`core::lease`): who may run a session's prompts
    // now, until when, with a fencing token that only grows.
    r#"
CREATE TABLE session_leases (
    session_id TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    token      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
"#,
    // 17: requests for the process running a session's runs
    // (`core::control`): left by another process's face, taken (deleted)
    // by the owner that carries them out.
    r#"
CREATE TABLE session_controls (
    id         INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    control    TEXT NOT NULL,
    at         INTEGER NOT NULL
) STRICT;
CREATE INDEX session_controls_by_session ON session_controls (session_id, id);
"#,
    // 18: leases are on sessions and on chat channel accounts
    // (`core::lease::LeaseKey`): one table keyed by the lease's key.
    r#"
ALTER TABLE session_leases RENAME TO leases;
ALTER TABLE leases RENAME COLUMN session_id TO key;
"#,
    // 19: what a run reads of its session costs the same after ten
    // thousand runs as after ten: the last compaction point is found
    // through the summaries alone (`reader::since_compaction`); a
    // follower of a session lists the runs inserted since it last looked
    // (rowid order within the session) and the unfinished ones
    // (`reader::runs_to_follow`); and each session's cost per currency is
    // kept as its runs' costs are written, by triggers
    // (`reader::session_cost`), the runs before this migration summed once.
    r#"
CREATE INDEX messages_summaries ON messages (session_id, seq) WHERE role = 'summary';
CREATE INDEX runs_in_order ON runs (session_id);
CREATE INDEX runs_unfinished_by_session ON runs (session_id)
    WHERE state IN ('queued', 'running', 'waiting');
CREATE TABLE session_costs (
    session_id TEXT NOT NULL,
    currency   TEXT NOT NULL,
    amount     REAL NOT NULL,
    first_at   INTEGER NOT NULL,
    PRIMARY KEY (session_id, currency)
) STRICT, WITHOUT ROWID;
INSERT INTO session_costs (session_id, currency, amount, first_at)
    SELECT session_id, currency, total(cost), min(created_at) FROM runs
    WHERE cost IS NOT NULL AND currency IS NOT NULL
    GROUP BY session_id, currency;
CREATE TRIGGER runs_cost_out AFTER UPDATE OF cost, currency ON runs
    WHEN OLD.cost IS NOT NULL AND OLD.currency IS NOT NULL
BEGIN
    UPDATE session_costs SET amount = amount - OLD.cost
    WHERE session_id = OLD.session_id AND currency = OLD.currency;
END;
CREATE TRIGGER runs_cost_in AFTER UPDATE OF cost, currency ON runs
    WHEN NEW.cost IS NOT NULL AND NEW.currency IS NOT NULL
BEGIN
    INSERT INTO session_costs (session_id, currency, amount, first_at)
    VALUES (NEW.session_id, NEW.currency, NEW.cost, NEW.created_at)
    ON CONFLICT (session_id, currency) DO UPDATE
    SET amount = amount + excluded.amount, first_at = min(first_at, excluded.first_at);
END;
"#,
    // 20: Agent Skills (`core::skills`): the skills active when a tool call
    // was made, in its receipt; and each skill's latest activation found
    // without reading the whole tape (`reader::skills_last_used`).
    r#"
ALTER TABLE receipts ADD COLUMN skills TEXT;
CREATE INDEX tape_skill_activations ON tape (at) WHERE kind = 'skill_activated';
"#,
    // 21: schedules (`core::schedule`): each as JSON, and each occurrence
    // fired (or skipped) once, keyed by (schedule, occurrence).
    r#"
CREATE TABLE schedules (
    id         TEXT PRIMARY KEY,
    schedule   TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE schedule_fires (
    schedule_id TEXT NOT NULL,
    occurrence  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    manual      INTEGER NOT NULL,
    fire        TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, occurrence)
) STRICT, WITHOUT ROWID;
CREATE INDEX schedule_fires_open ON schedule_fires (state) WHERE state IN ('claimed', 'running');
"#,
    // 22: the runs of a window of time, in every session (the health
    // summary, `reader::run_window`).
    r#"
CREATE INDEX runs_by_created ON runs (created_at);
"#,
    // 23: the sessions a chat has had (`SessionFilter::conversation`: its
    // `/sessions`), newest first, read through their conversation's key.
    r#"
CREATE INDEX sessions_of_conversation ON sessions (conversation, updated_at DESC, id DESC)
    WHERE parent_session IS NULL AND deleted_at IS NULL AND conversation IS NOT NULL;
"#,
];
