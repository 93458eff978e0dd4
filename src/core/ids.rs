//! Identifiers of the core's durable things.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh, time-ordered identifier.
            pub fn generate() -> Self {
                Self(format!(concat!($prefix, "{}"), uuid::Uuid::now_v7().simple()))
            }

            /// Wraps an identifier read from the outside (a client, the store).
            pub fn from_string(value: String) -> Self {
                Self(value)
            }

            /// `text` as an identifier if it has the shape [`Self::generate`]
            /// gives: the prefix and 32 lower-case hex digits.
            pub fn parse_generated(text: &str) -> Option<Self> {
                let hex = text.strip_prefix($prefix)?;
                let shaped = hex.len() == 32
                    && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
                shaped.then(|| Self(text.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// Names a session: a long-lived conversation bound to a workspace.
    SessionId,
    "ses_"
);
id_type!(
    /// Names a run: one prompt turn of the agent loop inside a session.
    RunId,
    "run_"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_prefixed_and_ordered() {
        let a = RunId::generate();
        let b = RunId::generate();
        assert!(a.as_str().starts_with("run_"));
        assert!(a < b, "{a} should sort before {b}");
        assert!(SessionId::generate().as_str().starts_with("ses_"));
    }

    #[test]
    fn only_the_generated_shape_parses() {
        let id = SessionId::generate();
        assert_eq!(SessionId::parse_generated(id.as_str()), Some(id.clone()));
        let hex = &id.as_str()[4..];
        for bad in [
            format!("run_{hex}"),
            format!("ses_{}", &hex[1..]),
            format!("ses_{hex}0"),
            format!("ses_{}", hex.to_uppercase()),
            "ses_".to_owned(),
            String::new(),
        ] {
            assert_eq!(SessionId::parse_generated(&bad), None, "{bad}");
        }
        assert!(RunId::parse_generated(&format!("run_{hex}")).is_some());
    }
}
