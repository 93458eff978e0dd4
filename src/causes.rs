//! An error and its causes on one line, the way Pincer shows a failure
//! (on stderr, in a provider's or a channel's error): reqwest and `anyhow`
//! keep the reason in the sources, which `Display` leaves out.

use std::error::Error;

/// `outer: inner: innermost`, each cause once: one whose text the line
/// already holds (`cannot read X: No such file…`, with the `io::Error` as
/// its source) is not repeated. For an `anyhow::Error`, pass `&*error`.
pub fn chain(error: &dyn Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::chain;
    use anyhow::Context as _;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read /nope.toml: {0}")]
    struct Read(#[source] std::io::Error);

    #[test]
    fn every_cause_is_told_once() {
        let error = Outer(std::io::Error::other("connection refused"));
        assert_eq!(chain(&error), "outer: connection refused");
        let error = Read(std::io::Error::other("No such file"));
        assert_eq!(chain(&error), "cannot read /nope.toml: No such file");
    }

    #[test]
    fn an_anyhow_error_s_contexts_come_first() {
        let err = Err::<(), _>(anyhow::anyhow!("disk full"))
            .context("cannot save")
            .context("the session is lost")
            .unwrap_err();
        assert_eq!(chain(&*err), "the session is lost: cannot save: disk full");
        let err = anyhow::Error::from(Outer(std::io::Error::other("gone")));
        assert_eq!(chain(&*err), "outer: gone");
    }
}
