//! `pincer login` and `pincer logout`: a provider without writing TOML.
//!
//! Asks (or takes from flags) which provider, its key or URL and a model;
//! one cheap request checks them; the result goes to the credentials file
//! (`crate::credentials`), mode 0600. On a terminal the key is read without
//! echo; from a pipe every answer is one line, so scripts and tests drive it.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use crate::app::{Failure, exit};
use crate::cli::{LoginArgs, LogoutArgs, Preset};
use crate::credentials::{Credentials, Login};
use crate::providers::ProviderKind;

impl Preset {
    const ALL: [Preset; 4] = [
        Preset::Openai,
        Preset::Anthropic,
        Preset::Openrouter,
        Preset::Local,
    ];

    fn name(self) -> &'static str {
        match self {
            Preset::Openai => "openai",
            Preset::Anthropic => "anthropic",
            Preset::Openrouter => "openrouter",
            Preset::Local => "local",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Preset::Openai => "OpenAI (API key)",
            Preset::Anthropic => "Anthropic (API key)",
            Preset::Openrouter => "OpenRouter (API key)",
            Preset::Local => "a local server: Ollama, llama.cpp, LM Studio, vLLM (URL, no key)",
        }
    }

    fn kind(self) -> ProviderKind {
        match self {
            Preset::Anthropic => ProviderKind::Anthropic,
            Preset::Openai | Preset::Openrouter | Preset::Local => ProviderKind::Openai,
        }
    }

    fn base_url(self) -> Option<&'static str> {
        match self {
            Preset::Openrouter => Some("https://openrouter.ai/api/v1"),
            Preset::Local => Some("http://127.0.0.1:11434/v1"),
            Preset::Openai | Preset::Anthropic => None,
        }
    }

    fn needs_key(self) -> bool {
        self != Preset::Local
    }

    /// A sensible first model when the person does not pick one.
    fn suggested_model(self) -> Option<&'static str> {
        match self {
            Preset::Openai => Some("gpt-4.1-mini"),
            Preset::Anthropic => Some("claude-sonnet-4-5"),
            Preset::Openrouter => Some("openai/gpt-4.1-mini"),
            Preset::Local => None,
        }
    }
}

/// Answers read from the person: hidden on a terminal for keys, one line
/// each from a pipe.
struct Asker {
    terminal: bool,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
}

impl Asker {
    fn new() -> Self {
        Self {
            terminal: std::io::stdin().is_terminal(),
            lines: std::io::stdin().lock().lines(),
        }
    }

    fn ask(&mut self, question: &str) -> Result<String, Failure> {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        match self.lines.next() {
            Some(line) => Ok(line
                .context("cannot read the answer")
                .map_err(Failure::usage)?
                .trim()
                .to_owned()),
            None => Err(Failure::usage(anyhow!(
                "no answer (end of input) to: {}",
                question.trim()
            ))),
        }
    }

    fn ask_secret(&mut self, question: &str) -> Result<String, Failure> {
        if self.terminal {
            return rpassword::prompt_password(question)
                .map(|key| key.trim().to_owned())
                .context("cannot read the key")
                .map_err(Failure::usage);
        }
        self.ask(question)
    }
}

pub async fn login(args: &LoginArgs) -> Result<u8, Failure> {
    let env = |name: &str| std::env::var(name).ok();
    let path = crate::credentials::path(&env).ok_or_else(|| {
        Failure::usage(anyhow!(
            "cannot find a home directory: set HOME or XDG_CONFIG_HOME"
        ))
    })?;
    let mut asker = Asker::new();
    let preset = match args.provider {
        Some(preset) => preset,
        None => {
            eprintln!("Which provider?");
            for (i, preset) in Preset::ALL.iter().enumerate() {
                eprintln!("  {}) {}", i + 1, preset.label());
            }
            let answer = asker.ask("Number or name [1]: ")?;
            pick_preset(&answer)?
        }
    };
    let base_url = match (&args.base_url, preset) {
        (Some(url), _) => Some(url.trim_end_matches('/').to_owned()),
        (None, Preset::Local) => {
            let default = preset.base_url().unwrap_or_default();
            let answer = asker.ask(&format!(
                "Server URL (Ollama {default}, llama.cpp http://127.0.0.1:8080/v1, \
                 LM Studio http://127.0.0.1:1234/v1, vLLM http://127.0.0.1:8000/v1) [{default}]: "
            ))?;
            Some(if answer.is_empty() {
                default.to_owned()
            } else {
                answer
            })
        }
        (None, _) => preset.base_url().map(str::to_owned),
    };
    if let Some(url) = &base_url
        && reqwest::Url::parse(url).is_err()
    {
        return Err(Failure::usage(anyhow!(
            "{}: not a URL (like http://127.0.0.1:11434/v1)",
            crate::core::quote::quote(url)
        )));
    }
    let api_key = if args.api_key_stdin {
        Some(asker.ask("")?)
    } else if preset.needs_key() {
        Some(asker.ask_secret(&format!("{} API key: ", preset.name()))?)
    } else {
        None
    }
    .filter(|key| !key.is_empty());
    if preset.needs_key() && api_key.is_none() {
        return Err(Failure::usage(anyhow!(
            "{} needs an API key; nothing was stored",
            preset.name()
        )));
    }
    let (listed, base_url) = if args.no_check {
        (Vec::new(), base_url)
    } else {
        check(&mut asker, preset, base_url, api_key.as_deref()).await?
    };
    let model = match &args.model {
        Some(model) => model.clone(),
        None => {
            let suggested = preset
                .suggested_model()
                .filter(|m| listed.is_empty() || listed.iter().any(|l| l == m))
                .map(str::to_owned)
                .or_else(|| listed.first().cloned());
            if !listed.is_empty() {
                eprintln!("Models: {}", shown_models(&listed));
            }
            let question = match &suggested {
                Some(model) => format!("Model [{model}]: "),
                None => "Model: ".to_owned(),
            };
            let answer = asker.ask(&question)?;
            match (answer.is_empty(), suggested) {
                (false, _) => answer,
                (true, Some(model)) => model,
                (true, None) => {
                    return Err(Failure::usage(anyhow!(
                        "no model given; nothing was stored"
                    )));
                }
            }
        }
    };
    if !listed.is_empty() && !listed.contains(&model) {
        eprintln!(
            "pincer: warning: {} does not list the model {}; it lists: {}",
            base_url.as_deref().unwrap_or(preset.name()),
            crate::core::quote::quote(&model),
            shown_models(&listed)
        );
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| preset.name().to_owned());
    let mut credentials = Credentials::load(&path).map_err(Failure::usage)?;
    credentials.providers.insert(
        name.clone(),
        Login {
            kind: preset.kind(),
            base_url,
            api_key,
            model: Some(model.clone()),
        },
    );
    credentials.default = Some(name.clone());
    credentials.save(&path).map_err(Failure::failed)?;
    eprintln!(
        "pincer: logged in: provider {name}, model {model}; stored in {} (mode 0600). \
         Try: pincer run \"Say hello\"",
        path.display()
    );
    Ok(exit::OK)
}

/// The first dozen of a server's models, for a line on the terminal.
fn shown_models(listed: &[String]) -> String {
    let shown: Vec<&str> = listed.iter().take(12).map(String::as_str).collect();
    format!(
        "{}{}",
        shown.join(", "),
        if listed.len() > shown.len() {
            ", ..."
        } else {
            ""
        }
    )
}

/// Checks the server with one request for its models. An OpenAI-compatible
/// URL that answers 404 is tried again with `/v1` (where such servers
/// serve), and the person is offered that URL. Returns the models listed
/// and the URL to store.
async fn check(
    asker: &mut Asker,
    preset: Preset,
    base_url: Option<String>,
    api_key: Option<&str>,
) -> Result<(Vec<String>, Option<String>), Failure> {
    let list = |url: Option<String>| async move {
        crate::providers::list_models(
            &preset.kind(),
            url.as_deref(),
            api_key,
            Duration::from_secs(15),
        )
        .await
    };
    let refused = |err: crate::providers::ProbeError| {
        Failure::usage(anyhow!(
            "{err}; nothing was stored (check the key or URL, or pass --no-check to store it anyway)"
        ))
    };
    eprintln!(
        "pincer: checking {} ...",
        base_url.as_deref().unwrap_or(preset.name())
    );
    match list(base_url.clone()).await {
        Ok(listed) => Ok((listed, base_url)),
        Err(crate::providers::ProbeError::Status(404))
            if preset.kind() == ProviderKind::Openai
                && base_url.as_deref().is_some_and(|url| !url.ends_with("/v1")) =>
        {
            let url = base_url.unwrap_or_default();
            let with_v1 = format!("{url}/v1");
            let Ok(listed) = list(Some(with_v1.clone())).await else {
                return Err(refused(crate::providers::ProbeError::Status(404)));
            };
            eprintln!(
                "pincer: {url} answered HTTP 404, but {with_v1} lists {} model(s) \
                 (OpenAI-compatible servers serve under /v1)",
                listed.len()
            );
            let answer = asker.ask(&format!("Use {with_v1}? [Y/n]: "))?;
            if answer.is_empty()
                || answer.eq_ignore_ascii_case("y")
                || answer.eq_ignore_ascii_case("yes")
            {
                Ok((listed, Some(with_v1)))
            } else {
                Err(Failure::usage(anyhow!(
                    "{url} answered HTTP 404; nothing was stored"
                )))
            }
        }
        Err(err) => Err(refused(err)),
    }
}

fn pick_preset(answer: &str) -> Result<Preset, Failure> {
    let answer = answer.trim().to_ascii_lowercase();
    if answer.is_empty() {
        return Ok(Preset::Openai);
    }
    if let Ok(n) = answer.parse::<usize>()
        && let Some(preset) = n.checked_sub(1).and_then(|i| Preset::ALL.get(i))
    {
        return Ok(*preset);
    }
    Preset::ALL
        .into_iter()
        .find(|p| p.name() == answer)
        .ok_or_else(|| {
            Failure::usage(anyhow!(
                "{}: not one of 1-4, openai, anthropic, openrouter, local",
                crate::core::quote::quote(&answer)
            ))
        })
}

pub fn logout(args: &LogoutArgs) -> Result<u8, Failure> {
    let env = |name: &str| std::env::var(name).ok();
    let path = crate::credentials::path(&env).ok_or_else(|| {
        Failure::usage(anyhow!(
            "cannot find a home directory: set HOME or XDG_CONFIG_HOME"
        ))
    })?;
    let mut credentials = Credentials::load(&path).map_err(Failure::usage)?;
    match &args.name {
        Some(name) => {
            if credentials.providers.remove(name).is_none() {
                let stored: Vec<&str> = credentials.providers.keys().map(String::as_str).collect();
                return Err(Failure::usage(anyhow!(
                    "no stored login named {}; stored: {}",
                    crate::core::quote::quote(name),
                    if stored.is_empty() {
                        "none".to_owned()
                    } else {
                        stored.join(", ")
                    }
                )));
            }
            if credentials.default.as_deref() == Some(name) {
                credentials.default = credentials.providers.keys().next().cloned();
            }
            if credentials.providers.is_empty() {
                remove(&path)?;
            } else {
                credentials.save(&path).map_err(Failure::failed)?;
            }
            eprintln!(
                "pincer: removed the login for {name} from {}",
                path.display()
            );
        }
        None => {
            let names = crate::credentials::forget_all(&path).map_err(Failure::failed)?;
            if names.is_empty() {
                eprintln!("pincer: no stored logins");
            } else {
                eprintln!(
                    "pincer: removed the logins for {} ({})",
                    names.join(", "),
                    path.display()
                );
            }
        }
    }
    Ok(exit::OK)
}

fn remove(path: &std::path::Path) -> Result<(), Failure> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(Failure::failed(
            anyhow::Error::new(err).context(format!("cannot remove {}", path.display())),
        )),
        _ => Ok(()),
    }
}
