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

/// A session's lease as its holder has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub session: SessionId,
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
    #[error("the session is run by {holder} (its lease lapses at {expires_at} unless renewed)")]
    Held { holder: String, expires_at: Millis },
    /// The lease lapsed and was taken, or was released: the holder must stop.
    #[error("the session's lease was lost")]
    Lost,
    /// The backend failed.
    #[error("leases: {0}")]
    Backend(String),
}

/// The leases of sessions, kept where the journal is.
pub trait Leases: Send + Sync {
    /// Takes the lease of `session` for `holder` until `now + ttl_ms`.
    fn claim<'a>(
        &'a self,
        session: &'a SessionId,
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

    /// The session's lease as stored (maybe lapsed or released: then
    /// `expires_at` is in the past), if it ever had one.
    fn current<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> BoxFuture<'a, Result<Option<Lease>, LeaseError>>;
}

/// What a claim decides, given the stored lease: the one pure rule every
/// backend applies inside its transaction.
pub fn decide_claim(
    stored: Option<&Lease>,
    session: &SessionId,
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
            session: session.clone(),
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
    pub session: SessionId,
    pub token: u64,
}

impl Lease {
    /// The fence for writes made under this lease.
    pub fn fence(&self) -> Fence {
        Fence {
            session: self.session.clone(),
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
/// [`super::journal::memory::MemoryJournal`].
pub fn claim_in(
    leases: &mut std::collections::HashMap<SessionId, Lease>,
    session: &SessionId,
    holder: &str,
    now: Millis,
    ttl_ms: i64,
) -> Result<Lease, LeaseError> {
    let lease = decide_claim(leases.get(session), session, holder, now, ttl_ms)?;
    leases.insert(session.clone(), lease.clone());
    Ok(lease)
}

/// [`Leases::renew`] on a map.
pub fn renew_in(
    leases: &mut std::collections::HashMap<SessionId, Lease>,
    lease: &Lease,
    now: Millis,
    ttl_ms: i64,
) -> Result<Lease, LeaseError> {
    if !holds(leases.get(&lease.session), lease, now) {
        return Err(LeaseError::Lost);
    }
    let renewed = Lease {
        expires_at: now.saturating_add(ttl_ms),
        ..lease.clone()
    };
    leases.insert(lease.session.clone(), renewed.clone());
    Ok(renewed)
}

/// [`Leases::release`] on a map.
pub fn release_in(leases: &mut std::collections::HashMap<SessionId, Lease>, lease: &Lease) {
    if let Some(stored) = leases.get_mut(&lease.session)
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

    fn session(name: &str) -> SessionId {
        SessionId::from_string(format!("ses_{name}"))
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
