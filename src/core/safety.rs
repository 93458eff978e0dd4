//! The safety pass over tool output: truncation, secret redaction, prompt-injection markers.

/// Whether an environment variable's name says it holds a secret (`OPENAI_API_KEY`,
/// `GITHUB_TOKEN`, `DB_PASSWORD`, ...). Such variables never reach a tool process,
/// and their values are redacted from tool output.
pub fn is_secret_name(name: &str) -> bool {
    const MARKERS: &[&str] = &[
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "AUTHORIZATION",
        "COOKIE",
        "PRIVATE",
    ];
    let upper = name.to_ascii_uppercase();
    if upper == "PWD" || upper == "OLDPWD" {
        return false;
    }
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|part| MARKERS.iter().any(|marker| part.contains(marker)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "TELEGRAM_BOT_TOKEN",
            "apikey",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "PATH", "HOME", "LANG", "TERM", "PWD", "OLDPWD", "USER", "SHELL", "TZ",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}

// --- temporary minimal pass, replaced by the full one ---

/// Settings of the pass.
#[derive(Debug, Clone)]
pub struct SafetyConfig {
    pub max_output_bytes: usize,
    pub secrets: Vec<String>,
}

impl Default for SafetyConfig {
    fn default() -> Self {
        Self {
            max_output_bytes: 30_000,
            secrets: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Redaction {
    pub kind: String,
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checked {
    pub text: String,
    pub redactions: Vec<Redaction>,
    pub truncated_bytes: usize,
    pub injections: Vec<String>,
}

pub struct Safety {
    config: SafetyConfig,
}

impl Safety {
    pub fn new(config: SafetyConfig, _env: impl IntoIterator<Item = (String, String)>) -> Self {
        Self { config }
    }

    pub fn check(&self, output: &str) -> Checked {
        let (text, redactions) = self.redact(output);
        Checked {
            text,
            redactions,
            truncated_bytes: 0,
            injections: Vec::new(),
        }
    }

    pub fn redact(&self, text: &str) -> (String, Vec<Redaction>) {
        let mut out = text.to_owned();
        for secret in &self.config.secrets {
            out = out.replace(secret.as_str(), "[REDACTED:configured]");
        }
        (out, Vec::new())
    }
}
