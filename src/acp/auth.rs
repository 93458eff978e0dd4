//! Authentication in ACP: the methods `initialize` offers, `authenticate`
//! and `logout`. Pincer's "account" is a usable model provider: from the
//! configuration, the environment or a stored login (`pincer login`).
//!
//! - an `agent` method, `pincer-provider`: `authenticate` reads the
//!   configuration and the stored logins again and succeeds once a provider
//!   is usable (a login made meanwhile in a terminal takes effect at once).
//!   It carries the legacy `_meta["terminal-auth"]` launch hint (`label`,
//!   `command`, `args`, `env`) Zed reads to offer a terminal login;
//! - a `terminal` method, `pincer-login`, when the client runs terminal
//!   logins (`clientCapabilities.auth.terminal`, or the Registry's
//!   `_meta["terminal-auth"]` marker): the client runs `pincer login`.
//!
//! `logout` removes the stored logins and reads the providers again.

use super::*;

/// The `agent` method's id.
pub const PROVIDER_METHOD: &str = "pincer-provider";
/// The `terminal` method's id.
pub const LOGIN_METHOD: &str = "pincer-login";

/// The error a prompt gets while no provider is usable: the client shows
/// its login, and the person reads how to log in.
pub fn login_required() -> RpcError {
    let mut error = RpcError::auth_required();
    error.message = format!(
        "Authentication required: {}",
        crate::core::provider::NO_PROVIDER
    );
    error
}

impl Connection {
    /// The methods `initialize` offers this client.
    pub(super) fn auth_methods(&self, request: &acp::InitializeRequest) -> Vec<acp::AuthMethod> {
        let capabilities = &request.client_capabilities;
        let marker = capabilities
            .meta
            .as_ref()
            .and_then(|meta| meta.get("terminal-auth"))
            .is_some_and(|v| v.as_bool() == Some(true));
        let terminal = capabilities.auth.terminal || marker;
        *self.terminal_auth.lock() = terminal;
        let command = std::env::current_exe()
            .map(|path| path.display().to_string())
            .unwrap_or_else(|_| "pincer".to_owned());
        let mut meta = serde_json::Map::new();
        meta.insert(
            "terminal-auth".into(),
            json!({
                "label": "pincer login",
                "command": command,
                "args": ["login"],
                "env": {},
            }),
        );
        let mut methods = vec![acp::AuthMethod::Agent(
            acp::AuthMethodAgent::new(PROVIDER_METHOD, "Model provider")
                .description(
                    "Uses the model provider in Pincer's configuration, the environment \
                     (OPENAI_API_KEY, …) or a stored login (`pincer login` in a terminal)"
                        .to_owned(),
                )
                .meta(meta),
        )];
        if terminal {
            methods.push(acp::AuthMethod::Terminal(
                acp::AuthMethodTerminal::new(LOGIN_METHOD, "Log in with pincer login")
                    .description(
                        "Choose a provider (OpenAI, Anthropic, OpenRouter or a local server) \
                         and give its key; kept for every session"
                            .to_owned(),
                    )
                    .args(vec!["login".to_owned()]),
            ));
        }
        methods
    }

    /// `authenticate`: succeeds once a provider is usable.
    pub(super) fn authenticate(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: acp::AuthenticateRequest = params(raw)?;
        let id = request.method_id.0.to_string();
        if id != PROVIDER_METHOD && id != LOGIN_METHOD {
            return Err(invalid_params(format!(
                "unknown authentication method {}; offered: {PROVIDER_METHOD}, {LOGIN_METHOD}",
                quoted(&id)
            )));
        }
        self.reload_providers();
        if self.runtime.providers().is_empty() {
            return Err(login_required());
        }
        to_value(acp::AuthenticateResponse::new())
    }

    /// `logout`: removes the stored logins; providers from the configuration
    /// or the environment stay.
    pub(super) fn logout(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let _: acp::LogoutRequest = params(raw)?;
        let Some(accounts) = &self.options.accounts else {
            return Err(RpcError::method_not_found());
        };
        match accounts.logout() {
            Ok(names) => tracing::info!(removed = ?names, "logged out"),
            Err(err) => {
                return Err(RpcError::internal_error().data(clip_message(&err)));
            }
        }
        self.reload_providers();
        to_value(acp::LogoutResponse::new())
    }

    /// Reads the configuration and the stored logins again and swaps in
    /// their providers (a failure keeps the ones there are).
    fn reload_providers(&self) {
        let Some(accounts) = &self.options.accounts else {
            return;
        };
        match accounts.providers() {
            Ok(providers) => self.runtime.set_providers(providers),
            Err(err) => {
                tracing::warn!(error = %clip_message(&err), "cannot read the providers again")
            }
        }
    }
}
