//! Writes of what a person allowed: a session's remembered approval
//! answers (`allow_always`, `reject_always`) and the project directories
//! whose own hooks they trust.

use rusqlite::{Connection, params};

use crate::core::approval::Grant;
use crate::core::hooks::TrustWrite;
use crate::core::ids::SessionId;
use crate::core::session::Millis;
use crate::store::StoreError;

pub(super) fn put_grant(
    conn: &Connection,
    session_id: &SessionId,
    grant: &Grant,
    at: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO grants (session_id, tool, scope, allow, at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![session_id.as_str(), grant.tool, grant.scope, grant.allow, at])?;
    Ok(())
}

pub(super) fn trust(conn: &Connection, write: &TrustWrite) -> Result<(), StoreError> {
    let TrustWrite::Set {
        root,
        trusted,
        at,
        files,
    } = write;
    let root = root.to_string_lossy();
    if !*trusted {
        conn.prepare_cached("DELETE FROM trusted_roots WHERE root = ?1")?
            .execute(params![root])?;
        return Ok(());
    }
    let files = serde_json::to_string(files)
        .map_err(|err| StoreError::Write(format!("trusted files: {err}")))?;
    conn.prepare_cached(
        "INSERT INTO trusted_roots (root, at, files) VALUES (?1, ?2, ?3) \
         ON CONFLICT (root) DO UPDATE SET at = excluded.at, files = excluded.files",
    )?
    .execute(params![root, at, files])?;
    Ok(())
}
