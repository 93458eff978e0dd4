//! The memory check: searched by words, or by meaning too through an
//! embeddings endpoint (asked with `--online`).

use super::Check;
use crate::config::Config;

pub(super) async fn check(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    online: bool,
) -> Check {
    let embedder = match crate::app::wiring::embedder(config, env) {
        Ok(Some(embedder)) => embedder,
        Ok(None) => {
            return Check::ok(
                "memory",
                "searched by words (set `embeddings` in [memory] to search by meaning too)",
            );
        }
        Err(message) => return Check::fail("memory", message),
    };
    if !online {
        return Check::ok(
            "memory",
            format!(
                "searched by words and meaning, embeddings from {} (not asked; --online asks)",
                embedder.label()
            ),
        );
    }
    let probe = ["pincer doctor".to_owned()];
    match embedder.embed(&probe).await {
        Ok(vectors) => Check::ok(
            "memory",
            format!(
                "searched by words and meaning; embeddings from {} answer ({} dimensions)",
                embedder.label(),
                vectors.first().map_or(0, Vec::len)
            ),
        ),
        Err(err) => Check::fail(
            "memory",
            format!(
                "embeddings from {} do not answer: {} (memory is searched by words alone until they do)",
                embedder.label(),
                err.message
            ),
        ),
    }
}
