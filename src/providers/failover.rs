//! Retries and failover across an ordered list of provider/model pairs, and
//! the same retries for one provider on its own ([`Retrying`]).
//!
//! A turn that fails before its first event with a retryable error (connection,
//! timeout, 429, 5xx) is retried with exponential backoff and jitter, honouring
//! `Retry-After`; when a member's attempts are spent the next member is tried.
//! A member that failed is cooled down (1 s, doubling on each consecutive
//! failure, at most 5 minutes) and skipped while cooling, unless every member
//! is. Success resets its cooldown. Once any event has been passed on, errors
//! pass through untouched: a turn is never replayed after visible output.
//! Authentication, unknown-model and context-length errors are not retried.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::core::provider::{
    ModelRequest, Provider, ProviderError, ProviderErrorKind, ProviderEvent, ProviderStream, Retry,
};

/// How hard to retry one member before moving on.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts per member, the first included.
    pub attempts: u32,
    /// The first backoff; each later one doubles.
    pub base_delay: Duration,
    /// No backoff (nor `Retry-After`) waits longer than this.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// The first cooldown of a failed member, and its cap.
const COOLDOWN_BASE: Duration = Duration::from_secs(1);
const COOLDOWN_MAX: Duration = Duration::from_secs(300);

/// One provider/model pair of the list.
#[derive(Clone)]
pub struct Member {
    pub provider: Arc<dyn Provider>,
    /// The model to ask this member for; `None` keeps the request's model.
    pub model: Option<String>,
    /// The member's own retries (its `attempts`, `backoff_ms`); `None`: the
    /// failover's.
    pub policy: Option<RetryPolicy>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Health {
    /// Consecutive failed turns.
    failures: u32,
    cooling_until: Option<Instant>,
}

pub struct Failover {
    name: String,
    members: Vec<Member>,
    health: Arc<Mutex<Vec<Health>>>,
    policy: RetryPolicy,
}

impl Failover {
    pub fn new(name: impl Into<String>, members: Vec<Member>, policy: RetryPolicy) -> Self {
        let health = vec![Health::default(); members.len()];
        Self {
            name: name.into(),
            members,
            health: Arc::new(Mutex::new(health)),
            policy,
        }
    }

    /// Members in the order to try them now: those not cooling first (in list
    /// order), then the cooling ones, soonest available first.
    fn order(&self) -> Vec<usize> {
        let health = self.health.lock();
        let now = Instant::now();
        let (mut ready, mut cooling): (Vec<usize>, Vec<usize>) = (0..self.members.len())
            .partition(|&i| health[i].cooling_until.is_none_or(|until| until <= now));
        cooling.sort_by_key(|&i| health[i].cooling_until);
        ready.append(&mut cooling);
        ready
    }
}

/// The wait before attempt `attempt` (from 1): exponential with ±25 % jitter,
/// or what the provider asked for, capped.
fn backoff(policy: &RetryPolicy, attempt: u32, error: &ProviderError) -> Duration {
    let wait = match error.retry_after {
        Some(asked) => asked,
        None => {
            let exponential = policy
                .base_delay
                .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
            exponential.mul_f64(0.75 + fastrand::f64() * 0.5)
        }
    };
    wait.min(policy.max_delay)
}

/// A turn on `provider` with the retries `policy` allows, as one stream: a
/// `Retrying` event before each wait, then the turn from its first event on,
/// or the error that ended the tries (a start that failed with no retry left,
/// or with an error retrying cannot fix). Once the turn's first event has
/// passed, everything passes through untouched.
fn with_retries(
    provider: Arc<dyn Provider>,
    request: ModelRequest,
    policy: RetryPolicy,
) -> ProviderStream {
    struct Tries {
        provider: Arc<dyn Provider>,
        request: ModelRequest,
        policy: RetryPolicy,
        /// The attempt to make next, from 1.
        attempt: u32,
        wait: Option<Duration>,
        /// The turn, once it started.
        turn: Option<ProviderStream>,
        over: bool,
    }
    let tries = Tries {
        provider,
        request,
        policy,
        attempt: 1,
        wait: None,
        turn: None,
        over: false,
    };
    futures::stream::unfold(tries, |mut tries| async move {
        if let Some(turn) = tries.turn.as_mut() {
            let item = turn.next().await?;
            return Some((item, tries));
        }
        if tries.over {
            return None;
        }
        if let Some(wait) = tries.wait.take() {
            tokio::time::sleep(wait).await;
        }
        let attempts = tries.policy.attempts.max(1);
        let attempt = tries.attempt;
        let mut stream = tries.provider.stream(tries.request.clone());
        let error = match stream.next().await {
            Some(Ok(first)) => {
                tries.turn = Some(stream);
                return Some((Ok(first), tries));
            }
            Some(Err(error)) if error.is_retryable() => error,
            Some(Err(error)) => {
                tries.over = true;
                return Some((Err(error), tries));
            }
            None => ProviderError::new(
                ProviderErrorKind::Transport,
                format!(
                    "provider {} ended the turn without a word",
                    tries.provider.name()
                ),
            ),
        };
        // The whole story in the log; a person is told in one line, by the
        // face that shows the `Retrying` event.
        tracing::info!(provider = tries.provider.name(), attempt, attempts, error = %error, "model turn failed before any output");
        if attempt >= attempts {
            tries.over = true;
            return Some((Err(error), tries));
        }
        let wait = backoff(&tries.policy, attempt, &error);
        tries.attempt += 1;
        tries.wait = Some(wait);
        let retry = Retry {
            attempt: tries.attempt,
            attempts,
            wait,
            reason: error.reason(),
        };
        Some((Ok(ProviderEvent::Retrying(retry)), tries))
    })
    .boxed()
}

/// One provider retried as its policy says: what every HTTP provider is
/// wrapped in when used on its own (a failover member is retried by the
/// failover instead, so attempts do not multiply).
pub struct Retrying {
    inner: Arc<dyn Provider>,
    policy: RetryPolicy,
}

impl Retrying {
    pub fn new(inner: Arc<dyn Provider>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

impl Provider for Retrying {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        let attempts = self.policy.attempts;
        let mut started = false;
        with_retries(self.inner.clone(), request, self.policy.clone())
            .map(move |item| match item {
                Ok(ProviderEvent::Retrying(retry)) => Ok(ProviderEvent::Retrying(retry)),
                Ok(event) => {
                    started = true;
                    Ok(event)
                }
                // The error that ended the tries, not one after output.
                Err(mut error) if !started && error.is_retryable() && attempts > 1 => {
                    error.message =
                        format!("{} (gave up after {attempts} attempts)", error.message);
                    Err(error)
                }
                Err(error) => Err(error),
            })
            .boxed()
    }
}

impl Provider for Failover {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ModelRequest) -> ProviderStream {
        // Each member with its retries settled: its own, else the failover's.
        let members: VecDeque<(usize, Member)> = self
            .order()
            .into_iter()
            .map(|i| {
                let mut member = self.members[i].clone();
                member.policy = Some(member.policy.unwrap_or_else(|| self.policy.clone()));
                (i, member)
            })
            .collect();
        /// The member being tried: its place in the list, who it is, its tries.
        struct Trying {
            index: usize,
            provider: String,
            model: String,
            stream: ProviderStream,
            started: bool,
        }
        struct Walk {
            members: VecDeque<(usize, Member)>,
            trying: Option<Trying>,
            request: ModelRequest,
            health: Arc<Mutex<Vec<Health>>>,
            name: String,
            last: Option<ProviderError>,
            /// Items owed before the next one is pulled (a turn's first event
            /// after its `Served` note).
            owed: VecDeque<Result<ProviderEvent, ProviderError>>,
            over: bool,
        }
        let walk = Walk {
            members,
            trying: None,
            request,
            health: self.health.clone(),
            name: self.name.clone(),
            last: None,
            owed: VecDeque::new(),
            over: false,
        };
        futures::stream::unfold(walk, |mut walk| async move {
            loop {
                if let Some(item) = walk.owed.pop_front() {
                    return Some((item, walk));
                }
                if walk.over {
                    return None;
                }
                let Some(trying) = walk.trying.as_mut() else {
                    let Some((index, member)) = walk.members.pop_front() else {
                        walk.over = true;
                        let error = match walk.last.take() {
                            Some(mut error) => {
                                error.message = format!(
                                    "{}: every provider failed; last: {}",
                                    walk.name, error.message
                                );
                                error
                            }
                            None => ProviderError::new(
                                ProviderErrorKind::Config,
                                format!("{}: no providers to try", walk.name),
                            ),
                        };
                        return Some((Err(error), walk));
                    };
                    let mut request = walk.request.clone();
                    if let Some(model) = member.model {
                        request.model = model;
                    }
                    walk.trying = Some(Trying {
                        index,
                        provider: member.provider.name().to_owned(),
                        model: request.model.clone(),
                        stream: with_retries(
                            member.provider,
                            request,
                            member.policy.unwrap_or_default(),
                        ),
                        started: false,
                    });
                    continue;
                };
                match trying.stream.next().await {
                    Some(Ok(ProviderEvent::Retrying(retry))) if !trying.started => {
                        return Some((Ok(ProviderEvent::Retrying(retry)), walk));
                    }
                    Some(Ok(event)) if !trying.started => {
                        trying.started = true;
                        walk.health.lock()[trying.index] = Health::default();
                        let served = ProviderEvent::Served {
                            provider: trying.provider.clone(),
                            model: trying.model.clone(),
                        };
                        walk.owed.push_back(Ok(event));
                        return Some((Ok(served), walk));
                    }
                    Some(item) if trying.started => return Some((item, walk)),
                    None if trying.started => return None,
                    Some(Err(error)) if error.is_retryable() => {
                        let index = trying.index;
                        walk.trying = None;
                        walk.last = Some(error);
                        let mut health = walk.health.lock();
                        let entry = &mut health[index];
                        entry.failures += 1;
                        let cooldown = COOLDOWN_BASE
                            .saturating_mul(2u32.saturating_pow(entry.failures - 1))
                            .min(COOLDOWN_MAX);
                        entry.cooling_until = Some(Instant::now() + cooldown);
                    }
                    Some(Err(error)) => {
                        walk.over = true;
                        return Some((Err(error), walk));
                    }
                    // A member's tries always end in an event or an error.
                    Some(Ok(_)) | None => walk.trying = None,
                }
            }
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::core::provider::ModelStop;

    /// Plays one scripted outcome per turn: `Ok(text)` streams text then ends,
    /// `Err(kind)` fails before any output.
    struct Flaky {
        name: &'static str,
        outcomes: Mutex<VecDeque<Result<&'static str, ProviderErrorKind>>>,
        models: Mutex<Vec<String>>,
    }

    impl Flaky {
        fn new(
            name: &'static str,
            outcomes: Vec<Result<&'static str, ProviderErrorKind>>,
        ) -> Arc<Self> {
            Arc::new(Self {
                name,
                outcomes: Mutex::new(outcomes.into()),
                models: Mutex::new(Vec::new()),
            })
        }

        fn calls(&self) -> usize {
            self.models.lock().len()
        }
    }

    impl Provider for Flaky {
        fn name(&self) -> &str {
            self.name
        }

        fn stream(&self, request: ModelRequest) -> ProviderStream {
            self.models.lock().push(request.model);
            let outcome = self
                .outcomes
                .lock()
                .pop_front()
                .unwrap_or(Err(ProviderErrorKind::Server));
            match outcome {
                Ok(text) => futures::stream::iter([
                    Ok(ProviderEvent::Text(text.to_owned())),
                    Ok(ProviderEvent::Done(ModelStop::EndTurn)),
                ])
                .boxed(),
                Err(kind) => {
                    let mut error =
                        ProviderError::new(kind, format!("{} says {kind:?}", self.name));
                    if kind == ProviderErrorKind::RateLimited {
                        error.retry_after = Some(Duration::from_millis(30));
                    }
                    futures::stream::once(async move { Err(error) }).boxed()
                }
            }
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            model: "asked".into(),
            system: None,
            messages: Vec::new(),
            tools: Vec::new().into(),
            reasoning_effort: None,
        }
    }

    fn quick() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(100),
        }
    }

    /// The first event of a turn after the `Served` note.
    async fn first(failover: &Failover) -> Result<ProviderEvent, ProviderError> {
        routed(failover).await.1
    }

    /// Who served a turn, and its first event.
    async fn routed(
        failover: &Failover,
    ) -> (
        Option<(String, String)>,
        Result<ProviderEvent, ProviderError>,
    ) {
        let mut stream = failover.stream(request());
        let (_, next) = past_retries(&mut stream).await;
        match next {
            Ok(ProviderEvent::Served { provider, model }) => {
                (Some((provider, model)), stream.next().await.unwrap())
            }
            other => (None, other),
        }
    }

    /// The `Retrying` events at the head of a turn, and what came after them.
    async fn past_retries(
        stream: &mut ProviderStream,
    ) -> (Vec<Retry>, Result<ProviderEvent, ProviderError>) {
        let mut retries = Vec::new();
        loop {
            match stream.next().await.unwrap() {
                Ok(ProviderEvent::Retrying(retry)) => retries.push(retry),
                other => return (retries, other),
            }
        }
    }

    #[tokio::test]
    async fn a_500_then_success_is_retried_on_the_same_member() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::Server), Ok("hi")]);
        let failover = Failover::new(
            "f",
            vec![Member {
                provider: a.clone(),
                model: None,
                policy: None,
            }],
            quick(),
        );
        assert_eq!(
            first(&failover).await.unwrap(),
            ProviderEvent::Text("hi".into())
        );
        assert_eq!(a.calls(), 2);
    }

    #[tokio::test]
    async fn retry_after_is_honoured() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::RateLimited), Ok("hi")]);
        let failover = Failover::new(
            "f",
            vec![Member {
                provider: a.clone(),
                model: None,
                policy: None,
            }],
            quick(),
        );
        let started = Instant::now();
        assert!(first(&failover).await.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    #[tokio::test]
    async fn spent_attempts_fail_over_to_the_next_member_with_its_model() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::Transport); 3]);
        let b = Flaky::new("b", vec![Ok("from b")]);
        let failover = Failover::new(
            "f",
            vec![
                Member {
                    provider: a.clone(),
                    model: None,
                    policy: None,
                },
                Member {
                    provider: b.clone(),
                    model: Some("b-model".into()),
                    policy: None,
                },
            ],
            quick(),
        );
        let (served, event) = routed(&failover).await;
        assert_eq!(event.unwrap(), ProviderEvent::Text("from b".into()));
        assert_eq!(served, Some(("b".to_owned(), "b-model".to_owned())));
        assert_eq!(a.calls(), 3);
        assert_eq!(b.models.lock().as_slice(), ["b-model"]);
        // `a` is cooling down now: the next turn goes to `b` first.
        b.outcomes.lock().push_back(Ok("again"));
        assert_eq!(
            first(&failover).await.unwrap(),
            ProviderEvent::Text("again".into())
        );
        assert_eq!(a.calls(), 3);
    }

    #[tokio::test]
    async fn cooldowns_double_on_consecutive_failures_and_reset_on_success() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::Server); 6]);
        let failover = Failover::new(
            "f",
            vec![Member {
                provider: a.clone(),
                model: None,
                policy: None,
            }],
            quick(),
        );
        assert!(first(&failover).await.is_err());
        let one = failover.health.lock()[0];
        assert_eq!(one.failures, 1);
        assert!(first(&failover).await.is_err());
        let two = failover.health.lock()[0];
        assert_eq!(two.failures, 2);
        let left = two.cooling_until.unwrap() - Instant::now();
        assert!(
            left > Duration::from_millis(1500) && left <= Duration::from_secs(2),
            "{left:?}"
        );
        a.outcomes.lock().push_back(Ok("back"));
        assert!(first(&failover).await.is_ok());
        let health = failover.health.lock()[0];
        assert_eq!((health.failures, health.cooling_until), (0, None));
    }

    #[tokio::test]
    async fn auth_errors_are_reported_at_once_without_retry_or_failover() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::Auth)]);
        let b = Flaky::new("b", vec![Ok("never")]);
        let failover = Failover::new(
            "f",
            vec![
                Member {
                    provider: a.clone(),
                    model: None,
                    policy: None,
                },
                Member {
                    provider: b.clone(),
                    model: None,
                    policy: None,
                },
            ],
            quick(),
        );
        let err = first(&failover).await.unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Auth);
        assert_eq!((a.calls(), b.calls()), (1, 0));
    }

    #[tokio::test]
    async fn when_every_member_fails_the_last_error_is_reported() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::Timeout); 3]);
        let failover = Failover::new(
            "f",
            vec![Member {
                provider: a,
                model: None,
                policy: None,
            }],
            quick(),
        );
        let err = first(&failover).await.unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Timeout);
        assert!(
            err.message
                .starts_with("f: every provider failed; last: a says Timeout"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn a_provider_on_its_own_retries_then_gives_up_with_its_message() {
        let a = Flaky::new("a", vec![Err(ProviderErrorKind::RateLimited), Ok("hi")]);
        let retrying = Retrying::new(a.clone(), quick());
        let mut stream = retrying.stream(request());
        // Told before the wait; no `Served` note: nothing was chosen.
        let (retries, next) = past_retries(&mut stream).await;
        assert_eq!(
            retries,
            vec![Retry {
                attempt: 2,
                attempts: 3,
                wait: Duration::from_millis(30),
                reason: "rate limited".into(),
            }]
        );
        assert_eq!(next.unwrap(), ProviderEvent::Text("hi".into()));
        assert_eq!(a.calls(), 2);

        let b = Flaky::new("b", vec![Err(ProviderErrorKind::Server); 3]);
        let retrying = Retrying::new(b.clone(), quick());
        let mut stream = retrying.stream(request());
        let (retries, next) = past_retries(&mut stream).await;
        assert_eq!(
            retries.iter().map(|r| r.attempt).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert!(stream.next().await.is_none(), "the error ends the turn");
        let err = next.unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Server);
        assert_eq!(err.message, "b says Server (gave up after 3 attempts)");
        assert_eq!(b.calls(), 3);

        // Not retryable: reported at once, as it came.
        let c = Flaky::new("c", vec![Err(ProviderErrorKind::Auth)]);
        let retrying = Retrying::new(c.clone(), quick());
        let mut stream = retrying.stream(request());
        let (retries, next) = past_retries(&mut stream).await;
        assert!(retries.is_empty());
        assert_eq!(next.unwrap_err().message, "c says Auth");
        assert_eq!(c.calls(), 1);
    }
}
