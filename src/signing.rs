//! Pincer's signed HTTP requests: HMAC-SHA256 over `TIMESTAMP.BODY` with a
//! shared secret, sent as `X-Pincer-Signature: sha256=HEX` beside
//! `X-Pincer-Timestamp: UNIX_SECONDS`. The webhook channel signs what it
//! POSTs and checks what it receives with it (`channels::webhook`, which
//! also keeps the replay window); HTTP hooks sign their POSTs the same way,
//! so a receiver checks both alike (`docs/channels.md`, `docs/hooks.md`).
//! Signatures and other secrets are compared in constant time by
//! `ring::hmac::verify`.

use ring::hmac::{HMAC_SHA256, Key};

/// The header carrying the signature.
pub const SIGNATURE: &str = "x-pincer-signature";
/// The header carrying the timestamp the signature covers.
pub const TIMESTAMP: &str = "x-pincer-timestamp";

/// `sha256=HEX` of HMAC-SHA256(secret, "TIMESTAMP.BODY").
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let key = Key::new(HMAC_SHA256, secret);
    sign_with(&key, timestamp, body)
}

/// [`sign`] with a key made once.
pub fn sign_with(key: &Key, timestamp: i64, body: &[u8]) -> String {
    let mut context = ring::hmac::Context::with_key(key);
    context.update(timestamp.to_string().as_bytes());
    context.update(b".");
    context.update(body);
    format!("sha256={}", hex::encode(context.sign().as_ref()))
}

/// Whether `signature` is exactly what [`sign_with`] gives for `timestamp`
/// and `body` (`sha256=` and lower-case hex), checked in constant time.
pub fn verify_with(key: &Key, timestamp: i64, body: &[u8], signature: &str) -> bool {
    let Some(tag) = signature.strip_prefix("sha256=").and_then(lower_hex) else {
        return false;
    };
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    ring::hmac::verify(key, &signed, &tag).is_ok()
}

/// Lower-case hex, as [`sign_with`] writes it, decoded.
fn lower_hex(text: &str) -> Option<Vec<u8>> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    hex::decode(text).ok()
}

/// Whether `given` is the secret `expected`, in a time that does not tell
/// where they differ: `given`'s HMAC is verified against `expected`'s,
/// which also makes the two the same length.
pub fn same_secret(expected: &[u8], given: &[u8]) -> bool {
    let key = Key::new(HMAC_SHA256, b"pincer: a secret compared");
    ring::hmac::verify(&key, given, ring::hmac::sign(&key, expected).as_ref()).is_ok()
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

    #[test]
    fn only_the_exact_signature_verifies() {
        let key = Key::new(HMAC_SHA256, b"Jefe");
        let signed = sign(b"Jefe", 7, b"body");
        assert!(verify_with(&key, 7, b"body", &signed));
        assert!(!verify_with(&key, 8, b"body", &signed), "another timestamp");
        assert!(!verify_with(&key, 7, b"bodY", &signed), "another body");
        let other = Key::new(HMAC_SHA256, b"Jeff");
        assert!(!verify_with(&other, 7, b"body", &signed), "another secret");
        let hex = &signed["sha256=".len()..];
        for refused in [
            hex.to_owned(),
            format!("sha1={hex}"),
            format!("SHA256={hex}"),
            format!("sha256={}", hex.to_ascii_uppercase()),
            format!(" {signed}"),
            signed[..signed.len() - 2].to_owned(),
            format!("{signed}00"),
            String::new(),
        ] {
            assert!(!verify_with(&key, 7, b"body", &refused), "{refused:?}");
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc123", b"abc123"));
        assert!(!same_secret(b"abc123", b"abc124"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"abcd", b"abc"));
        assert!(!same_secret(b"abc", b""));
        assert!(same_secret(b"", b""));
    }
}
