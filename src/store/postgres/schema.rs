//! The PostgreSQL schema, migrated in order by version (`pincer_schema`),
//! under an advisory lock so instances starting together migrate once.
//!
//! The tables mirror the SQLite store's (`store::schema`), in PostgreSQL's
//! terms. What SQLite gets from one writer at a time, PostgreSQL gets from
//! row locks held to the end of a transaction:
//! - the tape and receipts are append-only by triggers (a deleted
//!   session's tape is the one thing removed, whole);
//! - the receipt chain's head is one row (`receipt_head`), taken `FOR
//!   UPDATE` by each append, so two instances never fork the chain;
//! - positions readers catch up from (a session's runs, memory changes and
//!   vectors) are handed out under a row lock held until commit, so they
//!   become visible in the order they were handed out: a reader that saw
//!   position N never later finds a smaller one committed.
//!
//! Never edit a migration that has shipped; add a new one.

/// Each entry moves the schema from version `index` to `index + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: everything the SQLite store holds at its version 20, and what
    // several instances need: the instances themselves and the writers'
    // commit markers.
    r#"
CREATE FUNCTION pincer_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP;
END $$;

CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    workspace      TEXT NOT NULL,
    origin         TEXT NOT NULL,
    provider       TEXT NOT NULL,
    model          TEXT NOT NULL,
    mode           TEXT NOT NULL,
    title          TEXT,
    mcp_servers    TEXT NOT NULL DEFAULT '[]',
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    closed         BOOLEAN NOT NULL DEFAULT FALSE,
    conversation   TEXT,
    system_prompt  TEXT,
    instructions   TEXT,
    parent_session TEXT,
    parent_run     TEXT,
    parent_call    TEXT,
    deleted_at     BIGINT,
    thought_level  TEXT,
    -- How many runs the session has had: a new run's position.
    runs_made      BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_listed ON sessions (updated_at DESC, id DESC)
    WHERE parent_session IS NULL AND deleted_at IS NULL;
CREATE INDEX sessions_listed_in_workspace ON sessions (workspace, updated_at DESC, id DESC)
    WHERE parent_session IS NULL AND deleted_at IS NULL;
CREATE INDEX sessions_children ON sessions (parent_session) WHERE parent_session IS NOT NULL;

CREATE TABLE messages (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    run_id     TEXT,
    role       TEXT NOT NULL,
    body       TEXT NOT NULL,
    at         BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX messages_summaries ON messages (session_id, seq) WHERE role = 'summary';
CREATE INDEX messages_by_run ON messages (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE runs (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL,
    -- The run's place among its session's runs (`runs_to_follow`).
    pos                 BIGINT NOT NULL,
    state               TEXT NOT NULL,
    stop_reason         TEXT,
    error               TEXT,
    owner               TEXT,
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens    BIGINT NOT NULL DEFAULT 0,
    cost                DOUBLE PRECISION,
    currency            TEXT,
    created_at          BIGINT NOT NULL,
    started_at          BIGINT,
    ended_at            BIGINT
);
CREATE INDEX runs_by_session ON runs (session_id, created_at, id);
CREATE UNIQUE INDEX runs_in_order ON runs (session_id, pos);
CREATE INDEX runs_unfinished ON runs (state) WHERE state IN ('queued', 'running', 'waiting');
CREATE INDEX runs_unfinished_by_session ON runs (session_id)
    WHERE state IN ('queued', 'running', 'waiting');
CREATE INDEX runs_by_owner ON runs (owner) WHERE state IN ('queued', 'running', 'waiting');

CREATE TABLE tape (
    id         BIGSERIAL PRIMARY KEY,
    run_id     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    at         BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    UNIQUE (run_id, seq)
);
CREATE INDEX tape_by_session ON tape (session_id);
CREATE INDEX tape_skill_activations ON tape (at) WHERE kind = 'skill_activated';
CREATE INDEX tape_tool_results ON tape (run_id) WHERE kind = 'tool_result';
CREATE TRIGGER tape_rejects_update BEFORE UPDATE ON tape
    FOR EACH ROW EXECUTE FUNCTION pincer_append_only();
CREATE TRIGGER tape_rejects_truncate BEFORE TRUNCATE ON tape
    FOR EACH STATEMENT EXECUTE FUNCTION pincer_append_only();
CREATE FUNCTION pincer_tape_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = OLD.session_id AND deleted_at IS NOT NULL) THEN
        RAISE EXCEPTION 'the tape is append-only: DELETE is not allowed';
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER tape_rejects_delete BEFORE DELETE ON tape
    FOR EACH ROW EXECUTE FUNCTION pincer_tape_delete();

CREATE TABLE receipts (
    seq         BIGINT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    input_hash  TEXT NOT NULL,
    output_hash TEXT NOT NULL,
    verdict     TEXT NOT NULL,
    is_error    BOOLEAN NOT NULL,
    at          BIGINT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    hooks       TEXT,
    skills      TEXT
);
CREATE INDEX receipts_by_run ON receipts (run_id, seq);
CREATE TRIGGER receipts_reject_change BEFORE UPDATE OR DELETE ON receipts
    FOR EACH ROW EXECUTE FUNCTION pincer_append_only();
CREATE TRIGGER receipts_reject_truncate BEFORE TRUNCATE ON receipts
    FOR EACH STATEMENT EXECUTE FUNCTION pincer_append_only();
-- The newest receipt: one row, locked by each append.
CREATE TABLE receipt_head (
    one  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq  BIGINT NOT NULL,
    hash TEXT NOT NULL
);

CREATE TABLE grants (
    session_id TEXT NOT NULL,
    tool       TEXT NOT NULL,
    scope      TEXT NOT NULL,
    allow      BOOLEAN NOT NULL,
    at         BIGINT NOT NULL,
    PRIMARY KEY (session_id, tool, scope)
);

CREATE TABLE trusted_roots (
    root  TEXT PRIMARY KEY,
    at    BIGINT NOT NULL,
    files TEXT NOT NULL DEFAULT '[]'
);

CREATE TABLE leases (
    key        TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    token      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    -- When it was last claimed or renewed (`pincer store status`).
    renewed_at BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE session_controls (
    id         BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL,
    control    TEXT NOT NULL,
    at         BIGINT NOT NULL
);
CREATE INDEX session_controls_by_session ON session_controls (session_id, id);

CREATE TABLE session_costs (
    session_id TEXT NOT NULL,
    currency   TEXT NOT NULL,
    amount     DOUBLE PRECISION NOT NULL,
    first_at   BIGINT NOT NULL,
    PRIMARY KEY (session_id, currency)
);
CREATE FUNCTION pincer_runs_cost() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.cost IS NOT NULL AND OLD.currency IS NOT NULL THEN
        UPDATE session_costs SET amount = amount - OLD.cost
        WHERE session_id = OLD.session_id AND currency = OLD.currency;
    END IF;
    IF NEW.cost IS NOT NULL AND NEW.currency IS NOT NULL THEN
        INSERT INTO session_costs (session_id, currency, amount, first_at)
        VALUES (NEW.session_id, NEW.currency, NEW.cost, NEW.created_at)
        ON CONFLICT (session_id, currency) DO UPDATE
        SET amount = session_costs.amount + excluded.amount,
            first_at = least(session_costs.first_at, excluded.first_at);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER runs_cost AFTER UPDATE OF cost, currency ON runs
    FOR EACH ROW EXECUTE FUNCTION pincer_runs_cost();

CREATE TABLE channel_inbox (
    channel     TEXT NOT NULL,
    account     TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    target      TEXT NOT NULL,
    state       TEXT NOT NULL,
    run_id      TEXT,
    message     TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (channel, account, message_id)
);
CREATE INDEX channel_inbox_open ON channel_inbox (channel, account, received_at)
    WHERE state IN ('recorded', 'dispatched');

CREATE TABLE channel_outbox (
    id              TEXT PRIMARY KEY,
    channel         TEXT NOT NULL,
    account         TEXT NOT NULL,
    status          TEXT NOT NULL,
    next_attempt_at BIGINT,
    owner           TEXT,
    intent          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX channel_outbox_open ON channel_outbox (channel, account, created_at)
    WHERE status IN ('held', 'pending', 'sending', 'committing');
CREATE INDEX channel_outbox_changed ON channel_outbox (updated_at DESC);

CREATE TABLE channel_cursors (
    channel TEXT NOT NULL,
    account TEXT NOT NULL,
    name    TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (channel, account, name)
);

CREATE TABLE channel_sessions (
    channel    TEXT NOT NULL,
    account    TEXT NOT NULL,
    target     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (channel, account, target)
);
CREATE INDEX channel_sessions_by_session ON channel_sessions (session_id);

CREATE TABLE channel_peers (
    channel   TEXT NOT NULL,
    account   TEXT NOT NULL,
    sender    TEXT NOT NULL,
    paired_at BIGINT NOT NULL,
    PRIMARY KEY (channel, account, sender)
);

CREATE TABLE channel_drafts (
    run_id      TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    account     TEXT NOT NULL,
    target      TEXT NOT NULL,
    platform_id TEXT NOT NULL,
    text        TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);

-- Positions handed out under a row lock held until commit (see above):
-- `memory_changes` and `memory_vectors` take theirs from here.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    n    BIGINT NOT NULL
);
INSERT INTO counters (name, n) VALUES ('memory_changes', 0), ('memory_vectors', 0);
CREATE FUNCTION pincer_next(counter TEXT) RETURNS BIGINT LANGUAGE sql AS $$
    UPDATE counters SET n = n + 1 WHERE name = counter RETURNING n
$$;

CREATE TABLE memories (
    rowid        BIGSERIAL PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    scope        TEXT NOT NULL,
    scope_key    TEXT NOT NULL,
    text         TEXT NOT NULL,
    tags         TEXT NOT NULL DEFAULT '',
    scope_token  TEXT NOT NULL,
    source       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    pinned       BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX memories_by_scope ON memories (scope, scope_key, updated_at DESC);
CREATE INDEX memories_pinned ON memories (scope, scope_key) WHERE pinned;

-- Each item's latest change of text or tags (or its arrival or
-- departure), numbered: a process holding the words catches up from it.
CREATE TABLE memory_changes (
    item BIGINT PRIMARY KEY,
    seq  BIGINT NOT NULL UNIQUE
);
CREATE FUNCTION pincer_memory_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed BIGINT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := OLD.rowid;
    ELSIF TG_OP = 'UPDATE' AND NEW.text IS NOT DISTINCT FROM OLD.text
          AND NEW.tags IS NOT DISTINCT FROM OLD.tags THEN
        RETURN NULL;
    ELSE
        changed := NEW.rowid;
    END IF;
    INSERT INTO memory_changes (item, seq) VALUES (changed, pincer_next('memory_changes'))
    ON CONFLICT (item) DO UPDATE SET seq = excluded.seq;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION pincer_memory_changed();

-- One vector per item, for the text it was made from; every arrival
-- (`seq`) and departure (`memory_vectors_gone`) numbered.
CREATE TABLE memory_vectors (
    seq    BIGINT PRIMARY KEY,
    item   BIGINT NOT NULL UNIQUE,
    model  TEXT NOT NULL,
    vector BYTEA NOT NULL
);
CREATE TABLE memory_vectors_gone (
    seq  BIGINT PRIMARY KEY,
    item BIGINT NOT NULL
);
CREATE FUNCTION pincer_vector_left() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_vectors_gone (seq, item) VALUES (pincer_next('memory_vectors'), OLD.item);
    RETURN NULL;
END $$;
CREATE TRIGGER memory_vectors_leave AFTER DELETE ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION pincer_vector_left();
CREATE FUNCTION pincer_memory_vector_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM memory_vectors WHERE item = OLD.rowid;
    ELSIF NEW.text IS DISTINCT FROM OLD.text THEN
        DELETE FROM memory_vectors WHERE item = OLD.rowid;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_vector_stale AFTER UPDATE OF text OR DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION pincer_memory_vector_stale();

-- The instances that opened the store (`pincer store status`); an
-- instance is live while its process lease (`process:TAG`) is.
CREATE TABLE instances (
    tag        TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        BIGINT NOT NULL,
    started_at BIGINT NOT NULL
);

-- Each writer transaction's marker: after a connection broke during a
-- commit, the writer looks its marker up to know whether the commit
-- landed, instead of writing the group twice or not at all.
CREATE TABLE writer_commits (
    id TEXT PRIMARY KEY,
    at BIGINT NOT NULL
);
"#,
    // 2: schedules (`core::schedule`), as the SQLite store's version 21:
    // each as JSON, and each occurrence fired (or skipped) once, keyed by
    // (schedule, occurrence).
    r#"
CREATE TABLE schedules (
    id         TEXT PRIMARY KEY,
    schedule   TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE schedule_fires (
    schedule_id TEXT NOT NULL,
    occurrence  BIGINT NOT NULL,
    state       TEXT NOT NULL,
    manual      BOOLEAN NOT NULL,
    fire        TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (schedule_id, occurrence)
);
CREATE INDEX schedule_fires_open ON schedule_fires (state) WHERE state IN ('claimed', 'running');
"#,
    // 3: the runs of a window of time, in every session (the health
    // summary, `reads::run_window`), as the SQLite store's version 22.
    r#"
CREATE INDEX runs_by_created ON runs (created_at);
"#,
    // 4: the sessions a chat has had (`SessionFilter::conversation`), as
    // the SQLite store's version 23.
    r#"
CREATE INDEX sessions_of_conversation ON sessions (conversation, updated_at DESC, id DESC)
    WHERE parent_session IS NULL AND deleted_at IS NULL AND conversation IS NOT NULL;
"#,
];
