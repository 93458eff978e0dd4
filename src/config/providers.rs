//! Which providers there are, and which provider and model new sessions use.
//!
//! The providers come from four places, built into one map by
//! [`provider_map`]: the file's `[providers.NAME]` tables, the scripted model
//! `--script` names, the providers `pincer login` stored, and `openai` and
//! `anthropic`, which work without a table. The provider is chosen by the
//! usual layers (`--provider`, `PINCER_PROVIDER`, `provider`), else by the
//! model, else the last login's.

use std::collections::BTreeMap;
use std::path::Path;

use super::layers::Layers;
use super::{
    ConfigError, Env, FileConfig, Flags, Origin, ProviderConfig, ProviderKind, SCRIPTED, Sourced,
    absolute,
};
use crate::credentials::{Credentials, Login};

/// The providers there are and the choice among them.
pub(super) struct Choice {
    pub providers: BTreeMap<String, Sourced<ProviderConfig>>,
    pub provider: Option<Sourced<String>>,
    pub model: Option<Sourced<String>>,
}

/// Builds the provider map and chooses the provider and model, from the
/// file read at `origin` (its relative paths against `base`), the flags and
/// the environment (and the credentials file it locates).
pub(super) fn choose(
    file: &FileConfig,
    origin: &Origin,
    base: &Path,
    flags: &Flags,
    env: Env,
) -> Result<Choice, ConfigError> {
    let mut provider = Layers::new("provider")
        .flag("--provider", flags.provider.clone())
        .env("PINCER_PROVIDER")
        .file(origin, file.provider.clone())
        .resolve(env)?;
    let displaced = match &flags.script {
        Some(_) => make_room_for_script(&mut provider, &file.providers)?,
        None => false,
    };
    let credentials_path = crate::credentials::path(env);
    let credentials = match &credentials_path {
        Some(path) => Credentials::load(path)?,
        None => Credentials::default(),
    };
    let login_origin = Origin::Login(credentials_path.unwrap_or_default());
    let providers = provider_map(
        &Sources {
            tables: &file.providers,
            file: origin,
            base,
            script: flags.script.as_deref().zip(provider.as_ref()),
            logins: &credentials.providers,
            login: &login_origin,
            chosen: provider.as_ref(),
        },
        env,
    );
    if let Some(chosen) = &provider {
        check_configured(chosen, &providers)?;
    }
    // Whether `--script` set aside a provider from the environment or the
    // file: their model went with it.
    let model = Layers::new("model")
        .flag("--model", flags.model.clone())
        .env("PINCER_MODEL")
        .file(origin, file.model.clone())
        .resolve(env)?
        .filter(|model| !displaced || model.origin == Origin::Flag("--model"));
    if provider.is_none()
        && let Some(model) = &model
    {
        provider = provider_of_model(model, &providers)?;
    }
    // Nothing names a provider: the last login's, if it is still there.
    if provider.is_none()
        && let Some((name, _)) = credentials.default_login()
        && providers.get(name).is_some_and(|p| p.value.from_login)
    {
        provider = Some(Sourced::new(name.to_owned(), login_origin));
    }
    Ok(Choice {
        providers,
        provider,
        model,
    })
}

/// What [`provider_map`] builds the map from.
struct Sources<'a> {
    /// The file's `[providers.NAME]` tables, validated.
    tables: &'a BTreeMap<String, ProviderConfig>,
    /// Where the tables were read, the directory their paths are relative to.
    file: &'a Origin,
    base: &'a Path,
    /// `--script FILE` and the provider it plays.
    script: Option<(&'a Path, &'a Sourced<String>)>,
    /// The providers `pincer login` stored, from the credentials file at `login`.
    logins: &'a BTreeMap<String, Login>,
    login: &'a Origin,
    /// The provider the layers chose, if any.
    chosen: Option<&'a Sourced<String>>,
}

/// Every provider there is, each with the layer that made it: the file's
/// tables; the scripted model `--script` names (in place of a table of its
/// name, keeping that table's models and images); the providers `pincer
/// login` stored, unless a table has the name (the config file wins); and
/// `openai` and `anthropic` without a table, as their users expect, when
/// chosen by name, or found through their API key or base URL variable when
/// nothing else is configured (a local server needs no key).
fn provider_map(sources: &Sources, env: Env) -> BTreeMap<String, Sourced<ProviderConfig>> {
    let mut map: BTreeMap<String, Sourced<ProviderConfig>> = BTreeMap::new();
    for (name, table) in sources.tables {
        let mut table = table.clone();
        table.script = table.script.map(|script| sources.base.join(script));
        map.insert(name.clone(), Sourced::new(table, sources.file.clone()));
    }
    if let Some((script, name)) = sources.script {
        let entry = scripted(map.get(&name.value).map(|t| &t.value), script);
        map.insert(name.value.clone(), entry);
    }
    for (name, login) in sources.logins {
        map.entry(name.clone())
            .or_insert_with(|| Sourced::new(from_login(login), sources.login.clone()));
    }
    let nothing_else = sources.tables.is_empty() && sources.script.is_none();
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        if let Some(origin) = builtin_origin(&kind, sources.chosen, nothing_else, env) {
            map.entry(kind.as_str().to_owned())
                .or_insert_with(|| Sourced::new(ProviderConfig::of_kind(kind), origin));
        }
    }
    map
}

/// `--script` beats the environment and the file: alone it chooses the
/// scripted model whatever `PINCER_PROVIDER` or `provider` name, unless they
/// name a scripted provider table, and sets that aside (`true`). Only an
/// explicit `--provider` of another kind is refused. Afterwards a provider
/// is always chosen: the one the script plays.
fn make_room_for_script(
    provider: &mut Option<Sourced<String>>,
    tables: &BTreeMap<String, ProviderConfig>,
) -> Result<bool, ConfigError> {
    let scripted_table = |name: &str| {
        tables
            .get(name)
            .is_some_and(|p| p.kind == ProviderKind::Scripted)
    };
    let explicit = provider
        .as_ref()
        .is_some_and(|p| p.origin == Origin::Flag("--provider"));
    let displaced = !explicit
        && provider
            .as_ref()
            .is_some_and(|p| p.value != SCRIPTED && !scripted_table(&p.value));
    if displaced {
        *provider = None;
    }
    let name = provider
        .as_ref()
        .map_or(SCRIPTED.to_owned(), |p| p.value.clone());
    if name != SCRIPTED && !scripted_table(&name) {
        return Err(ConfigError::Invalid {
            origin: Origin::Flag("--script"),
            key: "script".into(),
            message: format!("--script needs --provider {SCRIPTED}, not {name:?}"),
        });
    }
    provider.get_or_insert_with(|| Sourced::new(name, Origin::Flag("--script")));
    Ok(displaced)
}

/// The scripted provider `--script` makes, with the models and images of
/// the table it replaces.
fn scripted(table: Option<&ProviderConfig>, script: &Path) -> Sourced<ProviderConfig> {
    Sourced::new(
        ProviderConfig {
            script: Some(absolute(script)),
            models: table.map(|t| t.models.clone()).unwrap_or_default(),
            images: table.and_then(|t| t.images),
            ..ProviderConfig::of_kind(ProviderKind::Scripted)
        },
        Origin::Flag("--script"),
    )
}

fn from_login(login: &Login) -> ProviderConfig {
    ProviderConfig {
        base_url: login.base_url.clone(),
        models: login.model.iter().cloned().collect(),
        api_key: login.api_key.clone(),
        from_login: true,
        ..ProviderConfig::of_kind(login.kind.clone())
    }
}

/// Where a built-in provider without a table comes from, if it is there at
/// all: the layer that chose it by name, else its key or base URL variable
/// when `nothing_else` is configured.
fn builtin_origin(
    kind: &ProviderKind,
    chosen: Option<&Sourced<String>>,
    nothing_else: bool,
    env: Env,
) -> Option<Origin> {
    if let Some(chosen) = chosen.filter(|p| p.value == kind.as_str()) {
        return Some(chosen.origin.clone());
    }
    let (key, url) = kind.default_env()?;
    let set = |var: &str| env(var).is_some_and(|v| !v.trim().is_empty());
    (nothing_else && (set(key) || set(url))).then_some(Origin::Env(key))
}

/// A chosen provider that is not in the map is an error naming what is.
fn check_configured(
    chosen: &Sourced<String>,
    providers: &BTreeMap<String, Sourced<ProviderConfig>>,
) -> Result<(), ConfigError> {
    if providers.contains_key(&chosen.value) {
        return Ok(());
    }
    let message = if chosen.value == SCRIPTED {
        "the scripted provider needs a model script: pass --script FILE".to_owned()
    } else if providers.is_empty() {
        format!(
            "no provider named {:?} is configured (no [providers.*] tables)",
            chosen.value
        )
    } else {
        format!(
            "no provider named {:?} is configured; configured: {}",
            chosen.value,
            providers.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    Err(ConfigError::Invalid {
        origin: chosen.origin.clone(),
        key: "provider".into(),
        message,
    })
}

/// The provider a model chosen without one goes to, from the model's layer.
fn provider_of_model(
    model: &Sourced<String>,
    providers: &BTreeMap<String, Sourced<ProviderConfig>>,
) -> Result<Option<Sourced<String>>, ConfigError> {
    let name =
        provider_for_model(&model.value, providers).map_err(|message| ConfigError::Invalid {
            origin: model.origin.clone(),
            key: "model".into(),
            message,
        })?;
    Ok(name.map(|name| Sourced::new(name, model.origin.clone())))
}

/// The provider for a model named without one (`pincer run --model gpt-4o`):
/// the one provider that lists it, else the one provider of the model's family
/// (`claude-*` is Anthropic's; `gpt-*`, `o1`…`o4`, `chatgpt-*` OpenAI's), else
/// the only provider there is. `Ok(None)` when nothing is configured; an error
/// naming the candidates when several could serve it.
fn provider_for_model(
    model: &str,
    providers: &BTreeMap<String, Sourced<ProviderConfig>>,
) -> Result<Option<String>, String> {
    let only = |names: &[&String]| match names {
        [one] => Some((*one).clone()),
        _ => None,
    };
    let listing: Vec<&String> = providers
        .iter()
        .filter(|(_, p)| p.value.models.iter().any(|m| m == model))
        .map(|(name, _)| name)
        .collect();
    if let Some(name) = only(&listing) {
        return Ok(Some(name));
    }
    let family = model_family(model);
    let of_family: Vec<&String> = providers
        .iter()
        .filter(|(_, p)| Some(&p.value.kind) == family.as_ref())
        .map(|(name, _)| name)
        .collect();
    if listing.is_empty()
        && let Some(name) = only(&of_family)
    {
        return Ok(Some(name));
    }
    if providers.len() <= 1 {
        return Ok(providers.keys().next().cloned());
    }
    let candidates: Vec<&String> = if !listing.is_empty() {
        listing
    } else if !of_family.is_empty() {
        of_family
    } else {
        providers.keys().collect()
    };
    let names: Vec<&str> = candidates.iter().map(|n| n.as_str()).collect();
    Err(format!(
        "{model:?} could be served by more than one provider ({}); choose one with --provider or `provider` in config",
        names.join(", ")
    ))
}

/// The kind of provider a well-known model name belongs to.
fn model_family(model: &str) -> Option<ProviderKind> {
    let model = model.to_ascii_lowercase();
    if model.starts_with("claude") {
        return Some(ProviderKind::Anthropic);
    }
    let openai = ["gpt-", "chatgpt-", "o1", "o3", "o4", "codex-"];
    openai
        .iter()
        .any(|prefix| model.starts_with(prefix))
        .then_some(ProviderKind::Openai)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn file() -> Origin {
        Origin::File(PathBuf::from("/etc/c.toml"))
    }

    fn table(kind: ProviderKind, models: &[&str]) -> ProviderConfig {
        ProviderConfig {
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            ..ProviderConfig::of_kind(kind)
        }
    }

    fn map(entries: &[(&str, ProviderKind, &[&str])]) -> BTreeMap<String, Sourced<ProviderConfig>> {
        entries
            .iter()
            .map(|(name, kind, models)| {
                (
                    (*name).to_owned(),
                    Sourced::new(table(kind.clone(), models), file()),
                )
            })
            .collect()
    }

    #[test]
    fn a_model_goes_to_the_provider_that_lists_it_else_its_family_else_the_only_one() {
        use ProviderKind::{Anthropic, Openai};
        let two = map(&[("a", Anthropic, &[]), ("o", Openai, &["local-llama"])]);
        for (model, expected) in [
            ("local-llama", Ok(Some("o"))),
            ("claude-sonnet-4", Ok(Some("a"))),
            ("gpt-4o", Ok(Some("o"))),
            ("o3-mini", Ok(Some("o"))),
            (
                "mistral",
                Err("\"mistral\" could be served by more than one provider (a, o)"),
            ),
        ] {
            let got = provider_for_model(model, &two);
            match expected {
                Ok(name) => assert_eq!(got.ok().flatten().as_deref(), name, "{model}"),
                Err(start) => assert!(
                    got.as_ref().is_err_and(|e| e.starts_with(start)),
                    "{model}: {got:?}"
                ),
            }
        }
        let one = map(&[("mine", Openai, &[])]);
        assert_eq!(
            provider_for_model("claude-x", &one),
            Ok(Some("mine".to_owned()))
        );
        assert_eq!(provider_for_model("m", &BTreeMap::new()), Ok(None));
        let both_list = map(&[
            ("x", Openai, &["m"]),
            ("y", Openai, &["m"]),
            ("z", Openai, &[]),
        ]);
        assert!(
            provider_for_model("m", &both_list).is_err_and(|e| e.contains("(x, y)")),
            "only the listing providers are candidates"
        );
    }

    #[test]
    fn model_families() {
        for (model, family) in [
            ("Claude-3-opus", Some(ProviderKind::Anthropic)),
            ("gpt-4.1", Some(ProviderKind::Openai)),
            ("chatgpt-4o-latest", Some(ProviderKind::Openai)),
            ("o1", Some(ProviderKind::Openai)),
            ("codex-mini", Some(ProviderKind::Openai)),
            ("llama3", None),
        ] {
            assert_eq!(model_family(model), family, "{model}");
        }
    }

    fn sources<'a>(
        tables: &'a BTreeMap<String, ProviderConfig>,
        logins: &'a BTreeMap<String, Login>,
        origins: &'a (Origin, Origin),
    ) -> Sources<'a> {
        Sources {
            tables,
            file: &origins.0,
            base: Path::new("/etc"),
            script: None,
            logins,
            login: &origins.1,
            chosen: None,
        }
    }

    /// The file's table beats a login of its name; a login beats nothing.
    #[test]
    fn the_map_takes_tables_over_logins() {
        let tables = BTreeMap::from([(
            "work".to_owned(),
            ProviderConfig {
                script: Some("s.jsonl".into()),
                ..ProviderConfig::of_kind(ProviderKind::Scripted)
            },
        )]);
        let login = |kind| Login {
            kind,
            base_url: None,
            api_key: Some("k".into()),
            model: Some("m".into()),
        };
        let logins = BTreeMap::from([
            ("work".to_owned(), login(ProviderKind::Openai)),
            ("home".to_owned(), login(ProviderKind::Anthropic)),
        ]);
        let origins = (file(), Origin::Login("/c/credentials.toml".into()));
        let built = provider_map(&sources(&tables, &logins, &origins), &|_| None);
        assert_eq!(built["work"].origin, file());
        assert_eq!(
            built["work"].value.script,
            Some(PathBuf::from("/etc/s.jsonl"))
        );
        assert_eq!(built["home"].origin, origins.1);
        assert!(built["home"].value.from_login);
        assert_eq!(built["home"].value.models, vec!["m".to_owned()]);
        assert_eq!(built.len(), 2);
    }

    /// `--script` replaces the table of its name, keeping what it offers.
    #[test]
    fn the_script_replaces_its_table_keeping_models_and_images() {
        let tables = BTreeMap::from([(
            "demo".to_owned(),
            ProviderConfig {
                script: Some("old.jsonl".into()),
                images: Some(true),
                ..table(ProviderKind::Scripted, &["a", "b"])
            },
        )]);
        let logins = BTreeMap::new();
        let origins = (file(), Origin::Default);
        let chosen = Sourced::new("demo".to_owned(), file());
        let script = PathBuf::from("/new.jsonl");
        let built = provider_map(
            &Sources {
                script: Some((&script, &chosen)),
                ..sources(&tables, &logins, &origins)
            },
            &|_| None,
        );
        let demo = &built["demo"];
        assert_eq!(demo.origin, Origin::Flag("--script"));
        assert_eq!(demo.value.script, Some(script.clone()));
        assert_eq!(demo.value.models, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(demo.value.images, Some(true));
    }

    /// `openai` and `anthropic` need no table: named, or found by their
    /// variables when nothing else is configured.
    #[test]
    fn built_in_providers_come_when_named_or_found_alone() {
        let none = BTreeMap::new();
        let logins = BTreeMap::new();
        let origins = (file(), Origin::Default);
        let key = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned());
        let built = provider_map(&sources(&none, &logins, &origins), &key);
        assert_eq!(
            built.keys().collect::<Vec<_>>(),
            ["anthropic"],
            "found by its key"
        );
        assert_eq!(built["anthropic"].origin, Origin::Env("ANTHROPIC_API_KEY"));
        let blank = |name: &str| (name == "OPENAI_API_KEY").then(|| " ".to_owned());
        assert!(provider_map(&sources(&none, &logins, &origins), &blank).is_empty());
        let tables = BTreeMap::from([("s".to_owned(), table(ProviderKind::Failover, &[]))]);
        let built = provider_map(&sources(&tables, &logins, &origins), &key);
        assert!(!built.contains_key("anthropic"), "a table is configured");
        let chosen = Sourced::new("openai".to_owned(), Origin::Flag("--provider"));
        let built = provider_map(
            &Sources {
                chosen: Some(&chosen),
                ..sources(&tables, &logins, &origins)
            },
            &|_| None,
        );
        assert_eq!(built["openai"].origin, Origin::Flag("--provider"));
    }

    #[test]
    fn the_script_sets_aside_a_provider_only_the_layers_below_a_flag_chose() {
        let tables = BTreeMap::from([
            ("demo".to_owned(), table(ProviderKind::Scripted, &[])),
            ("o".to_owned(), table(ProviderKind::Openai, &[])),
        ]);
        let run = |provider: Option<(&str, Origin)>| {
            let mut provider = provider.map(|(name, origin)| Sourced::new(name.to_owned(), origin));
            make_room_for_script(&mut provider, &tables)
                .map(|displaced| (provider.map(|p| (p.value, p.origin)), displaced))
                .map_err(|e| e.to_string())
        };
        let script = Origin::Flag("--script");
        assert_eq!(
            run(None),
            Ok((Some((SCRIPTED.to_owned(), script.clone())), false))
        );
        assert_eq!(
            run(Some(("o", Origin::Env("PINCER_PROVIDER")))),
            Ok((Some((SCRIPTED.to_owned(), script)), true))
        );
        assert_eq!(
            run(Some(("demo", file()))),
            Ok((Some(("demo".to_owned(), file())), false))
        );
        assert_eq!(
            run(Some(("o", Origin::Flag("--provider")))),
            Err("flag --script: script: --script needs --provider scripted, not \"o\"".to_owned())
        );
    }
}
