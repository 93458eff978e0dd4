//! Pincer's signed HTTP requests: HMAC-SHA256 over `TIMESTAMP.BODY` with a
//! shared secret, sent as `X-Pincer-Signature: sha256=HEX` beside
//! `X-Pincer-Timestamp: UNIX_SECONDS`. The webhook channel signs what it
//! POSTs and checks what it receives with it (`channels::webhook`, which
//! also keeps the replay window); HTTP hooks sign their POSTs the same way,
//! so a receiver checks both alike (`docs/channels.md`, `docs/hooks.md`).

/// The header carrying the signature.
pub const SIGNATURE: &str = "x-pincer-signature";
/// The header carrying the timestamp the signature covers.
pub const TIMESTAMP: &str = "x-pincer-timestamp";

/// `sha256=HEX` of HMAC-SHA256(secret, "TIMESTAMP.BODY").
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    sign_with(&key, timestamp, body)
}

/// [`sign`] with a key made once.
pub fn sign_with(key: &ring::hmac::Key, timestamp: i64, body: &[u8]) -> String {
    let mut context = ring::hmac::Context::with_key(key);
    context.update(timestamp.to_string().as_bytes());
    context.update(b".");
    context.update(body);
    format!("sha256={}", hex::encode(context.sign().as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_and_the_body() {
        // What is signed is "1.body"; another secret or timestamp differs.
        let signed = sign(b"Jefe", 1, b"body");
        assert!(signed.starts_with("sha256="));
        assert_eq!(signed.len(), "sha256=".len() + 64);
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"Jefe");
        assert_eq!(sign_with(&key, 1, b"body"), signed);
        let tag = ring::hmac::sign(&key, b"1.body");
        assert_eq!(signed, format!("sha256={}", hex::encode(tag.as_ref())));
        assert_ne!(sign(b"Jeff", 1, b"body"), signed);
        assert_ne!(sign(b"Jefe", 2, b"body"), signed);
    }
}
