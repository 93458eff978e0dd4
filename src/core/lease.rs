//! Leases: which process may run a session's prompts now.
//!
//! Several Pincer processes share one journal (an editor window and a
//! terminal on one data directory). A process makes a session's run work
//! only while it holds the session's lease, so two processes never run
//! prompts of one session at once and its history stays `user, assistant
//! (, tool…)` in order. The contract every backend keeps:
//!
//! 1. **One holder.** A claim succeeds when nobody holds the lease, the
//!    last holder released it, or its time ran out; otherwise it fails with
//!    [`LeaseError::Held`], naming the holder and when its lease lapses.
//!    Claims are decided inside the backend's own transaction, so two
//!    concurrent claims never both succeed.
//! 2. **Fencing tokens.** Every successful claim by a new holder (or after
//!    a lapse or a release) gets a token greater than every token the
//!    session's lease had before; a holder claiming again while it holds
//!    the lease keeps its token. Tokens never go back, even after a
//!    release.
//! 3. **Renewal.** Only the current holder with the current token renews,
//!    pushing the expiry on; a holder whose lease lapsed and was taken gets
//!    [`LeaseError::Lost`].
//! 4. **Release.** Only the current holder with the current token releases;
//!    after it anyone may claim at once. Releasing a lease one no longer
//!    holds changes nothing.
//! 5. **Fencing.** A journal write fenced with a lease's token
//!    ([`Fence`], `Write::Fenced`) is applied only while that token is the
//!    session's current one, decided inside the write's transaction;
//!    otherwise it is refused (`JournalError::Fenced`) and nothing of it is
//!    applied.
//!
//! Time is the caller's (`now` in milliseconds): the backend compares, it
//! does not read a clock. `contract` is the suite a backend passes.

use futures::future::BoxFuture;
use thiserror::Error;

use super::ids::SessionId;
use super::session::Millis;

/// What a lease is on: a session (its runs) or a chat channel account (its
/// inbox and outbox: one process polls and delivers for it at a time).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey(String);

impl LeaseKey {
    /// The lease of a session's runs: keyed by the session id itself.
    pub fn session(id: &SessionId) -> Self {
        Self(id.as_str().to_owned())
    }

    /// The lease of a chat channel account's delivery.
    pub fn channel(channel: &str, account: &str) -> Self {
        Self(format!("channel:{channel}:{account}"))
    }

    /// The lease a process holds while it lives and has runs waiting or
    /// intents claimed under its tag (`pid:start`): when it lapses, what the
    /// process left is another's to recover.
    pub fn process(tag: &str) -> Self {
        Self(format!("process:{tag}"))
    }

    /// A key as stored.
    pub fn from_stored(key: String) -> Self {
        Self(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&SessionId> for LeaseKey {
    fn from(id: &SessionId) -> Self {
        Self::session(id)
    }
}

impl std::fmt::Display for LeaseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A lease as its holder has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub key: LeaseKey,
    /// Who holds it: a process's tag (`pid:start` here; any unique name).
    pub holder: String,
    /// The fencing token: greater for every new holding.
    pub token: u64,
    /// When it lapses unless renewed (milliseconds since the epoch).
    pub expires_at: Millis,
}

#[derive(Debug, Error)]
pub enum LeaseError {
    /// Somebody else holds the lease until `expires_at` unless they release
    /// it first.
    #[error("the lease is held by {holder} (it lapses at {expires_at} unless renewed)")]
    Held { holder: String, expires_at: Millis },
    /// The lease lapsed and was taken, or was released: the holder must stop.
    #[error("the lease was lost")]
    Lost,
    /// The backend failed.
    #[error("leases: {0}")]
    Backend(String),
}

/// A process that opened a shared store and still holds its process lease
/// ([`LeaseKey::process`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Its tag (`pid:start`), as runs and intents name their owner.
    pub tag: String,
    pub host: String,
    pub pid: i64,
    pub started_at: Millis,
    /// When it last renewed its lease.
    pub renewed_at: Millis,
    /// When its lease lapses unless renewed (renewed well before).
    pub lease_expires_at: Millis,
    /// Its runs not ended yet.
    pub open_runs: i64,
    /// Whether it is the process asking.
    pub this: bool,
}

/// The leases of sessions, kept where the journal is.
pub trait Leases: Send + Sync {
    /// Takes the lease on `key` for `holder` until `now + ttl_ms`.
    fn claim<'a>(
        &'a self,
        key: &'a LeaseKey,
        holder: &'a str,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>>;

    /// Keeps `lease` until `now + ttl_ms`.
    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        now: Millis,
        ttl_ms: i64,
    ) -> BoxFuture<'a, Result<Lease, LeaseError>>;

    /// Gives `lease` up, so another holder may claim at once.
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), LeaseError>>;

    /// The lease on `key` as stored (maybe lapsed or released: then
    /// `expires_at` is in the past), if it ever had one.
    fn current<'a>(&'a self, key: &'a LeaseKey)
    -> BoxFuture<'a, Result<Option<Lease>, LeaseError>>;
}

/// What a claim decides, given the stored lease: the one pure rule every
/// backend applies inside its transaction.
pub fn decide_claim(
    stored: Option<&Lease>,
    key: &LeaseKey,
    holder: &str,
    now: Millis,
    ttl_ms: i64,
) -> Result<Lease, LeaseError> {
    let expires_at = now.saturating_add(ttl_ms);
    match stored {
        Some(lease) if lease.expires_at > now && lease.holder != holder => Err(LeaseError::Held {
            holder: lease.holder.clone(),
            expires_at: lease.expires_at,
        }),
        Some(lease) if lease.expires_at > now => Ok(Lease {
            expires_at,
            ..lease.clone()
        }),
        stored => Ok(Lease {
            key: key.clone(),
            holder: holder.to_owned(),
            token: stored.map_or(1, |lease| lease.token + 1),
            expires_at,
        }),
    }
}

/// What a run's writes carry: the session and the token of the lease they
/// were made under. A backend applies a fenced write only while that token
/// is the session's current one, inside the write's own transaction; a
/// process that lost its lease (stopped past its expiry, then resumed) has
/// its late writes refused, never applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub key: LeaseKey,
    pub token: u64,
}

impl Lease {
    /// The fence for writes made under this lease.
    pub fn fence(&self) -> Fence {
        Fence {
            key: self.key.clone(),
            token: self.token,
        }
    }
}

/// Whether a write fenced by `fence` may be applied, given the session's
/// stored lease: its token must be the current one. (Not its expiry: a
/// lapsed lease nobody took is still the newest holding, and its holder's
/// writes conflict with nobody's.)
pub fn admits(stored: Option<&Lease>, fence: &Fence) -> bool {
    stored.is_some_and(|s| s.token == fence.token)
}

/// Whether `lease` is still the stored one, live at `now`.
pub fn holds(stored: Option<&Lease>, lease: &Lease, now: Millis) -> bool {
    stored.is_some_and(|s| s.holder == lease.holder && s.token == lease.token && s.expires_at > now)
}

/// The leases of an in-memory backend: the same rules on a map, for
/// the in-memory journal (`core::journal::memory`, built for tests).
pub fn claim_in(
    leases: &mut std::collections::HashMap<LeaseKey, Lease>,
    key: &LeaseKey,
    holder: &str,
    now: Millis,
    ttl_ms: i64,
) -> Result<Lease, LeaseError> {
    let lease = decide_claim(leases.get(key), key, holder, now, ttl_ms)?;
    leases.insert(key.clone(), lease.clone());
    Ok(lease)
}

/// [`Leases::renew`] on a map.
pub fn renew_in(
    leases: &mut std::collections::HashMap<LeaseKey, Lease>,
    lease: &Lease,
    now: Millis,
    ttl_ms: i64,
) -> Result<Lease, LeaseError> {
    if !holds(leases.get(&lease.key), lease, now) {
        return Err(LeaseError::Lost);
    }
    let renewed = Lease {
        expires_at: now.saturating_add(ttl_ms),
        ..lease.clone()
    };
    leases.insert(lease.key.clone(), renewed.clone());
    Ok(renewed)
}

/// [`Leases::release`] on a map.
pub fn release_in(leases: &mut std::collections::HashMap<LeaseKey, Lease>, lease: &Lease) {
    if let Some(stored) = leases.get_mut(&lease.key)
        && stored.holder == lease.holder
        && stored.token == lease.token
    {
        stored.expires_at = 0;
    }
}

/// The suite every [`Leases`] backend passes.
#[cfg(test)]
pub mod contract {
    use super::*;

    fn session(name: &str) -> LeaseKey {
        LeaseKey::session(&SessionId::from_string(format!("ses_{name}")))
    }

    /// One holder at a time; a lapse or a release lets another in with a
    /// greater token; the holder claiming again keeps its token.
    pub async fn one_holder_and_growing_tokens(leases: &dyn Leases) {
        let s = session("lease_one");
        let a = leases.claim(&s, "a", 1_000, 100).await.unwrap();
        assert_eq!((a.holder.as_str(), a.expires_at), ("a", 1_100));
        match leases.claim(&s, "b", 1_050, 100).await {
            Err(LeaseError::Held { holder, expires_at }) => {
                assert_eq!((holder.as_str(), expires_at), ("a", 1_100));
            }
            other => panic!("b claimed a held lease: {other:?}"),
        }
        let again = leases.claim(&s, "a", 1_060, 100).await.unwrap();
        assert_eq!((again.token, again.expires_at), (a.token, 1_160));
        // Lapsed: b takes it with a greater token.
        let b = leases.claim(&s, "b", 1_200, 100).await.unwrap();
        assert!(b.token > a.token);
        assert!(matches!(
            leases.renew(&again, 1_210, 100).await,
            Err(LeaseError::Lost)
        ));
        // a's release of a lease it lost changes nothing.
        leases.release(&again).await.unwrap();
        assert_eq!(leases.current(&s).await.unwrap(), Some(b.clone()));
        let renewed = leases.renew(&b, 1_250, 100).await.unwrap();
        assert_eq!(renewed.expires_at, 1_350);
        leases.release(&renewed).await.unwrap();
        let c = leases.claim(&s, "c", 1_260, 100).await.unwrap();
        assert!(c.token > b.token, "tokens never go back after a release");
        assert!(matches!(
            leases.renew(&renewed, 1_270, 100).await,
            Err(LeaseError::Lost)
        ));
        // Another session's lease is its own.
        let other = leases
            .claim(&session("lease_two"), "a", 1_260, 100)
            .await
            .unwrap();
        assert_eq!(other.token, 1);
    }

    #[tokio::test]
    async fn the_memory_journals_leases_keep_the_contract() {
        one_holder_and_growing_tokens(&crate::core::journal::memory::MemoryJournal::new()).await;
    }
}
