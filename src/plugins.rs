//! Plugin bundles in Claude Code's layout: a folder with a
//! `.claude-plugin/plugin.json` manifest that packages skills, custom
//! commands, hooks and MCP servers together, or an entry of a marketplace
//! file (`.claude-plugin/marketplace.json`) naming such folders.
//!
//! `pincer plugin add` copies a plugin into the store (the configuration
//! directory's `plugins/`, one folder per plugin, so what runs is what was
//! added, whatever happens to the source later) and records it in
//! `plugins.toml` with the parts it brings, resolved once: `skills/`,
//! `commands/`, `hooks/hooks.json` and `.mcp.json` by default, plus the
//! paths the manifest names (which add to the defaults, never replace
//! them). Each part then goes through the rules of its kind: `parts` hands
//! the enabled plugins' skill folders to discovery and their hooks files to
//! the hooks runner (`app::wiring`), and `mcp_servers` reads a servers file
//! into the MCP client's specs.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where a plugin folder keeps its manifest.
pub const MANIFEST: &str = ".claude-plugin/plugin.json";
/// Where a marketplace keeps its list of plugins.
pub const MARKETPLACE: &str = ".claude-plugin/marketplace.json";
/// The store's record of installed plugins, beside their folders.
pub const REGISTRY: &str = "plugins.toml";

/// What a plugin copy may hold at most: a plugin is a bundle of text, and a
/// source that is a whole repository or home directory by mistake is
/// refused rather than copied.
const MAX_FILES: usize = 5_000;
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Folders never copied.
const SKIPPED: [&str; 3] = [".git", "node_modules", "__pycache__"];

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{}: {message}", path.display())]
    Manifest { path: PathBuf, message: String },
    #[error(
        "{}: not a plugin (no {MANIFEST}) and not a marketplace file (no {MARKETPLACE})",
        .0.display()
    )]
    NotAPlugin(PathBuf),
    #[error("plugin `{0}` is already installed (remove it first: `pincer plugin rm {0}`)")]
    Installed(String),
    #[error("no plugin `{0}` is installed")]
    Unknown(String),
    #[error("the marketplace `{marketplace}` has no plugin `{name}`; it has: {available}")]
    NotInMarketplace {
        marketplace: String,
        name: String,
        available: String,
    },
    #[error(
        "the marketplace `{marketplace}` offers several plugins; name those to add: {available}"
    )]
    NameThem {
        marketplace: String,
        available: String,
    },
    #[error(
        "plugin `{name}`: its source {source_text} is not a folder beside the marketplace file"
    )]
    RemoteSource { name: String, source_text: String },
    #[error("plugin name {0:?} is not allowed: lowercase letters, digits and hyphens, at most 64")]
    BadName(String),
    #[error("{}: {what}", path.display())]
    TooLarge { path: PathBuf, what: String },
    #[error("{}: a link that leads out of the plugin", .0.display())]
    LinkOut(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PluginError + '_ {
    move |source| PluginError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One path or several, as the manifest's `skills` and `commands` take.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Paths {
    One(String),
    Many(Vec<String>),
}

impl Paths {
    fn list(&self) -> Vec<String> {
        match self {
            Paths::One(path) => vec![path.clone()],
            Paths::Many(paths) => paths.clone(),
        }
    }
}

/// A file of the plugin, or the same content written inline.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FileOrInline {
    Path(String),
    Inline(serde_json::Map<String, serde_json::Value>),
}

/// `.claude-plugin/plugin.json`, or a marketplace entry standing in for
/// it. Fields Pincer does not use (`author`, `homepage`, `keywords`, …) are
/// accepted and ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub skills: Option<Paths>,
    #[serde(default)]
    pub commands: Option<Paths>,
    #[serde(default)]
    pub hooks: Option<FileOrInline>,
    #[serde(default)]
    pub mcp_servers: Option<FileOrInline>,
}

/// `.claude-plugin/marketplace.json`.
#[derive(Debug, Clone, Deserialize)]
struct Marketplace {
    name: String,
    plugins: Vec<MarketEntry>,
}

#[derive(Debug, Clone, Deserialize)]
struct MarketEntry {
    #[serde(flatten)]
    manifest: Manifest,
    /// A folder relative to the marketplace's root, or an object naming a
    /// remote source (not fetched: nothing but loopback is reachable, and a
    /// person adds what they have on disk).
    source: serde_json::Value,
    /// `false`: the entry is the whole manifest, the folder needs none.
    #[serde(default = "yes")]
    strict: bool,
}

fn yes() -> bool {
    true
}

/// An installed plugin as `plugins.toml` records it: where it came from,
/// whether it is on, and its parts as paths inside its folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The folder or marketplace file it was added from.
    pub source: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<String>,
    pub enabled: bool,
    /// Folders holding skills (or a skill folder itself), relative to the
    /// plugin's folder.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Folders of command files, or command files.
    #[serde(default)]
    pub commands: Vec<String>,
    /// The hooks file (Claude Code's `hooks.json` shape), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<String>,
    /// The MCP servers file (`.mcp.json` shape), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    #[serde(default, rename = "plugin")]
    plugins: Vec<Installed>,
}

/// The plugins installed for a person: a folder of plugin copies and the
/// registry beside them.
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store in `dir` (created when the first plugin is added).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Where an installed plugin's copy is.
    pub fn folder(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Every installed plugin, in the order added.
    pub fn list(&self) -> Result<Vec<Installed>, PluginError> {
        Ok(self.registry()?.plugins)
    }

    /// The enabled plugins with their folders: what the other parts read.
    pub fn enabled(&self) -> Result<Vec<(Installed, PathBuf)>, PluginError> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|p| p.enabled)
            .map(|p| {
                let folder = self.folder(&p.name);
                (p, folder)
            })
            .collect())
    }

    /// Adds the plugin folder at `source`, or the plugins `names` of the
    /// marketplace file (or folder holding one) at `source`. Each is copied
    /// into the store and enabled; nothing is added when any fails.
    pub fn add(&self, source: &Path, names: &[String]) -> Result<Vec<Installed>, PluginError> {
        let source = source.canonicalize().map_err(io(source))?;
        let found = found(&source, names)?;
        let mut registry = self.registry()?;
        for (manifest, _, _, _) in &found {
            if registry.plugins.iter().any(|p| p.name == manifest.name) {
                return Err(PluginError::Installed(manifest.name.clone()));
            }
        }
        // Every copy is made beside the store first; only when all are
        // made are they moved into place and recorded.
        let mut staged = Vec::new();
        for (manifest, folder, marketplace, defaults) in found {
            let staging = self.dir.join(format!(".adding-{}", manifest.name));
            let _ = std::fs::remove_dir_all(&staging);
            let made = copy_tree(&folder, &staging)
                .and_then(|()| describe(&manifest, &staging, &source, marketplace, defaults));
            staged.push(staging);
            if let Err(err) = made {
                for staging in &staged {
                    let _ = std::fs::remove_dir_all(staging);
                }
                return Err(err);
            }
            let installed = made?;
            registry.plugins.push(installed);
        }
        let added: Vec<Installed> =
            registry.plugins[registry.plugins.len() - staged.len()..].to_vec();
        for (staging, plugin) in staged.iter().zip(&added) {
            let target = self.folder(&plugin.name);
            let _ = std::fs::remove_dir_all(&target);
            std::fs::rename(staging, &target).map_err(io(&target))?;
        }
        self.save(&registry)?;
        Ok(added)
    }

    /// Turns a plugin on or off without removing it.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> Result<Installed, PluginError> {
        let mut registry = self.registry()?;
        let plugin = registry
            .plugins
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| PluginError::Unknown(name.to_owned()))?;
        plugin.enabled = enabled;
        let plugin = plugin.clone();
        self.save(&registry)?;
        Ok(plugin)
    }

    /// Removes a plugin: its record, then its copy.
    pub fn remove(&self, name: &str) -> Result<Installed, PluginError> {
        let mut registry = self.registry()?;
        let at = registry
            .plugins
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| PluginError::Unknown(name.to_owned()))?;
        let plugin = registry.plugins.remove(at);
        self.save(&registry)?;
        let folder = self.folder(name);
        match std::fs::remove_dir_all(&folder) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io(&folder)(err)),
            _ => Ok(plugin),
        }
    }

    fn registry(&self) -> Result<Registry, PluginError> {
        let path = self.dir.join(REGISTRY);
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|err| PluginError::Manifest {
                path,
                message: err.to_string(),
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
            Err(err) => Err(io(&path)(err)),
        }
    }

    /// Writes the registry atomically.
    fn save(&self, registry: &Registry) -> Result<(), PluginError> {
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let path = self.dir.join(REGISTRY);
        let text = toml::to_string(registry).map_err(|err| PluginError::Manifest {
            path: path.clone(),
            message: err.to_string(),
        })?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir).map_err(io(&self.dir))?;
        file.write_all(
            format!("# Written by `pincer plugin`; change it with that command.\n{text}")
                .as_bytes(),
        )
        .map_err(io(&path))?;
        file.as_file().sync_all().map_err(io(&path))?;
        file.persist(&path).map_err(|err| io(&path)(err.error))?;
        Ok(())
    }
}

/// The plugins `source` names: itself when it is a plugin folder, else the
/// marketplace's entries `names` (all of them when it has one only), each
/// with its folder, the marketplace's name, and whether the default folders
/// count (not for an entry that is the whole manifest).
fn found(source: &Path, names: &[String]) -> Result<Vec<Found>, PluginError> {
    let manifest_path = source.join(MANIFEST);
    if source.is_dir() && manifest_path.is_file() {
        let manifest = read_manifest(&manifest_path)?;
        return Ok(vec![(manifest, source.to_path_buf(), None, true)]);
    }
    let (file, root) = if source.is_file() {
        // `…/.claude-plugin/marketplace.json`: its root is above the folder.
        let parent = source.parent().unwrap_or(Path::new("/"));
        let root = if parent.ends_with(".claude-plugin") {
            parent.parent().unwrap_or(parent)
        } else {
            parent
        };
        (source.to_path_buf(), root.to_path_buf())
    } else if source.join(MARKETPLACE).is_file() {
        (source.join(MARKETPLACE), source.to_path_buf())
    } else {
        return Err(PluginError::NotAPlugin(source.to_path_buf()));
    };
    let text = std::fs::read_to_string(&file).map_err(io(&file))?;
    let market: Marketplace = serde_json::from_str(&text).map_err(|err| PluginError::Manifest {
        path: file.clone(),
        message: err.to_string(),
    })?;
    let available = market
        .plugins
        .iter()
        .map(|p| p.manifest.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let chosen: Vec<&MarketEntry> = if names.is_empty() {
        if market.plugins.len() != 1 {
            return Err(PluginError::NameThem {
                marketplace: market.name,
                available,
            });
        }
        market.plugins.iter().collect()
    } else {
        names
            .iter()
            .map(|name| {
                market
                    .plugins
                    .iter()
                    .find(|p| &p.manifest.name == name)
                    .ok_or_else(|| PluginError::NotInMarketplace {
                        marketplace: market.name.clone(),
                        name: name.clone(),
                        available: available.clone(),
                    })
            })
            .collect::<Result<_, _>>()?
    };
    chosen
        .into_iter()
        .map(|entry| {
            let folder = entry_folder(entry, &root)?;
            let manifest = if entry.strict {
                let own = read_manifest(&folder.join(MANIFEST))?;
                merged(own, &entry.manifest)
            } else {
                entry.manifest.clone()
            };
            Ok((manifest, folder, Some(market.name.clone()), entry.strict))
        })
        .collect()
}

type Found = (Manifest, PathBuf, Option<String>, bool);

/// A marketplace entry's folder: a relative path inside the marketplace's
/// root (`./` for the root itself).
fn entry_folder(entry: &MarketEntry, root: &Path) -> Result<PathBuf, PluginError> {
    let remote = || PluginError::RemoteSource {
        name: entry.manifest.name.clone(),
        source_text: crate::core::quote::quote(&entry.source.to_string()).to_string(),
    };
    let relative = entry.source.as_str().ok_or_else(remote)?;
    let folder = root.join(relative);
    let folder = folder.canonicalize().map_err(|_| remote())?;
    if !folder.starts_with(root) || !folder.is_dir() {
        return Err(remote());
    }
    Ok(folder)
}

/// A strict entry's fields add to the folder's own manifest.
fn merged(mut own: Manifest, entry: &Manifest) -> Manifest {
    let join = |a: Option<Paths>, b: &Option<Paths>| -> Option<Paths> {
        let mut all = a.map(|p| p.list()).unwrap_or_default();
        all.extend(b.as_ref().map(Paths::list).unwrap_or_default());
        (!all.is_empty()).then_some(Paths::Many(all))
    };
    own.skills = join(own.skills.take(), &entry.skills);
    own.commands = join(own.commands.take(), &entry.commands);
    own.hooks = own.hooks.or_else(|| entry.hooks.clone());
    own.mcp_servers = own.mcp_servers.or_else(|| entry.mcp_servers.clone());
    own.description = own.description.or_else(|| entry.description.clone());
    own.version = own.version.or_else(|| entry.version.clone());
    own
}

fn read_manifest(path: &Path) -> Result<Manifest, PluginError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|err| PluginError::Manifest {
        path: path.to_path_buf(),
        message: err.to_string(),
    })?;
    check_name(&manifest.name)?;
    Ok(manifest)
}

/// A plugin's name becomes a folder and a prefix of its commands: the
/// kebab-case the format asks for, nothing that could climb out.
fn check_name(name: &str) -> Result<(), PluginError> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if fine {
        Ok(())
    } else {
        Err(PluginError::BadName(
            crate::core::quote::quote(name).to_string(),
        ))
    }
}

/// The record of a plugin copied to `folder`: its parts, the default
/// folders first (when `defaults`, or when the manifest names none of that
/// kind), each kept only when it exists and not inside another; inline hooks
/// or servers written to a file of their own inside the copy.
fn describe(
    manifest: &Manifest,
    folder: &Path,
    source: &Path,
    marketplace: Option<String>,
    defaults: bool,
) -> Result<Installed, PluginError> {
    check_name(&manifest.name)?;
    let inside = |relative: &str| -> Option<String> {
        let relative = relative.trim_start_matches("./");
        let path = folder.join(relative).canonicalize().ok()?;
        let root = folder.canonicalize().ok()?;
        (path.starts_with(&root) && path.exists())
            .then(|| relative.trim_end_matches('/').to_owned())
    };
    let paths = |default: &str, named: &Option<Paths>| -> Vec<String> {
        let named = named.as_ref().map(Paths::list).unwrap_or_default();
        let default = (defaults || named.is_empty()).then(|| default.to_owned());
        let found: Vec<String> = default
            .into_iter()
            .chain(named)
            .filter_map(|p| inside(&p))
            .collect();
        let mut kept: Vec<String> = Vec::new();
        for path in found {
            let covered = kept
                .iter()
                .any(|k| Path::new(&path).starts_with(k) || Path::new(k).starts_with(&path));
            if !covered {
                kept.push(path);
            }
        }
        kept
    };
    let file = |default: &str, named: &Option<FileOrInline>, own: &str| match named {
        Some(FileOrInline::Path(path)) => Ok(inside(path)),
        Some(FileOrInline::Inline(map)) => {
            let path = folder.join(own);
            let text = serde_json::to_string_pretty(map).map_err(|err| PluginError::Manifest {
                path: path.clone(),
                message: err.to_string(),
            })?;
            std::fs::write(&path, text).map_err(io(&path))?;
            Ok(Some(own.to_owned()))
        }
        None => Ok(inside(default)),
    };
    Ok(Installed {
        name: manifest.name.clone(),
        version: manifest.version.clone(),
        description: manifest.description.clone(),
        source: source.to_path_buf(),
        marketplace,
        enabled: true,
        skills: paths("skills", &manifest.skills),
        commands: paths("commands", &manifest.commands),
        hooks: file("hooks/hooks.json", &manifest.hooks, ".pincer-hooks.json")?,
        mcp_servers: file(".mcp.json", &manifest.mcp_servers, ".pincer-mcp.json")?,
    })
}

/// Copies `from` to `to` (which must not exist), skipping `.git` and the
/// like, refusing links that lead outside `from` and sources past the size
/// bounds.
fn copy_tree(from: &Path, to: &Path) -> Result<(), PluginError> {
    let mut files = 0usize;
    let mut bytes = 0u64;
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source, target)) = stack.pop() {
        std::fs::create_dir_all(&target).map_err(io(&target))?;
        for entry in std::fs::read_dir(&source).map_err(io(&source))? {
            let entry = entry.map_err(io(&source))?;
            let path = entry.path();
            let name = entry.file_name();
            if SKIPPED.iter().any(|s| name == *s) {
                continue;
            }
            let kind = entry.file_type().map_err(io(&path))?;
            let real = if kind.is_symlink() {
                let real = path.canonicalize().map_err(io(&path))?;
                if !real.starts_with(from) {
                    return Err(PluginError::LinkOut(path));
                }
                real
            } else {
                path.clone()
            };
            let destination = target.join(&name);
            if real.is_dir() {
                stack.push((real, destination));
                continue;
            }
            files += 1;
            bytes += std::fs::metadata(&real).map_err(io(&real))?.len();
            if files > MAX_FILES || bytes > MAX_BYTES {
                return Err(PluginError::TooLarge {
                    path: from.to_path_buf(),
                    what: format!(
                        "more than {MAX_FILES} files or {} MiB: not a plugin folder?",
                        MAX_BYTES / 1024 / 1024
                    ),
                });
            }
            std::fs::copy(&real, &destination).map_err(io(&real))?;
        }
    }
    Ok(())
}

/// `${CLAUDE_PLUGIN_ROOT}` (and `${PINCER_PLUGIN_ROOT}`) in a plugin's
/// hook commands and server definitions: its folder.
pub fn expand_root(text: &str, root: &Path) -> String {
    let root = root.to_string_lossy();
    text.replace("${CLAUDE_PLUGIN_ROOT}", &root)
        .replace("${PINCER_PLUGIN_ROOT}", &root)
}

/// One server of a plugin's `.mcp.json` (Claude Code's `mcpServers`
/// shape): a command Pincer starts, or a URL. Other keys (`cwd`,
/// `timeout`, …) are accepted and not used.
#[derive(Debug, Deserialize)]
struct McpEntry {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The MCP servers of `plugin`'s servers file `file` (`{"mcpServers":
/// {NAME: …}}`, or the map itself as a manifest writes it inline), each
/// named `PLUGIN_NAME` (sanitized as configured servers are) with
/// `${CLAUDE_PLUGIN_ROOT}` in its command, arguments, environment, URL and
/// headers made `root`. What cannot be used is a problem naming the file:
/// the whole file when it is not JSON, else the server.
pub fn mcp_servers(
    plugin: &str,
    root: &Path,
    file: &Path,
) -> (Vec<crate::mcp::ServerSpec>, Vec<String>) {
    use crate::mcp::{ServerSpec, Transport, sanitize};
    let shown = file.display();
    let value: serde_json::Value = match std::fs::read(file) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            Err(err) => return (Vec::new(), vec![format!("{shown}: not JSON: {err}")]),
        },
        Err(err) => return (Vec::new(), vec![format!("{shown}: cannot read it: {err}")]),
    };
    let Some(map) = value
        .get("mcpServers")
        .unwrap_or(&value)
        .as_object()
        .cloned()
    else {
        return (
            Vec::new(),
            vec![format!("{shown}: `mcpServers` is not a JSON object")],
        );
    };
    let expand = |text: &str| expand_root(text, root);
    let mut servers = Vec::new();
    let mut problems = Vec::new();
    for (name, entry) in map {
        let entry: McpEntry = match serde_json::from_value(entry) {
            Ok(entry) => entry,
            Err(err) => {
                problems.push(format!("{shown}: server `{name}`: {err}"));
                continue;
            }
        };
        let pairs = |map: &BTreeMap<String, String>| -> Vec<(String, String)> {
            map.iter().map(|(k, v)| (k.clone(), expand(v))).collect()
        };
        let transport = match (entry.kind.as_deref(), &entry.command, &entry.url) {
            (Some("sse"), _, _) => {
                problems.push(format!(
                    "{shown}: server `{name}` uses the SSE transport, which Pincer does not support"
                ));
                continue;
            }
            (None | Some("stdio"), Some(command), None) => Transport::Stdio {
                command: expand(command),
                args: entry.args.iter().map(|a| expand(a)).collect(),
                env: pairs(&entry.env),
            },
            (None | Some("http"), None, Some(url)) => Transport::Http {
                url: expand(url),
                headers: pairs(&entry.headers),
            },
            _ => {
                problems.push(format!(
                    "{shown}: server `{name}`: give `command` (a stdio server) or `url` (`type`: `http`)"
                ));
                continue;
            }
        };
        servers.push(ServerSpec {
            name: sanitize(&format!("{plugin}_{name}")),
            transport,
        });
    }
    (servers, problems)
}

/// The parts of the enabled plugins, by kind, as absolute paths.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parts {
    /// Plugin name → its folder (`${CLAUDE_PLUGIN_ROOT}`).
    pub folders: BTreeMap<String, PathBuf>,
    /// Plugin name → folders holding skills (or skill folders).
    pub skills: BTreeMap<String, Vec<PathBuf>>,
    pub commands: BTreeMap<String, Vec<PathBuf>>,
    pub hooks: BTreeMap<String, PathBuf>,
    pub mcp_servers: BTreeMap<String, PathBuf>,
}

impl Store {
    /// What the enabled plugins bring, for discovery, hooks and MCP.
    pub fn parts(&self) -> Result<Parts, PluginError> {
        let mut parts = Parts::default();
        for (plugin, folder) in self.enabled()? {
            let at = |p: &String| folder.join(p);
            parts.folders.insert(plugin.name.clone(), folder.clone());
            parts
                .skills
                .insert(plugin.name.clone(), plugin.skills.iter().map(at).collect());
            parts.commands.insert(
                plugin.name.clone(),
                plugin.commands.iter().map(at).collect(),
            );
            if let Some(hooks) = &plugin.hooks {
                parts.hooks.insert(plugin.name.clone(), folder.join(hooks));
            }
            if let Some(servers) = &plugin.mcp_servers {
                parts
                    .mcp_servers
                    .insert(plugin.name.clone(), folder.join(servers));
            }
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn skill(dir: &Path, name: &str) {
        write(
            &dir.join(name).join("SKILL.md"),
            &format!("---\nname: {name}\ndescription: does {name}\n---\nbody\n"),
        );
    }

    /// A plugin folder with a skill, a command, hooks and an MCP server.
    fn plugin(dir: &Path, name: &str) -> PathBuf {
        let root = dir.join(name);
        write(
            &root.join(MANIFEST),
            &format!(r#"{{"name": "{name}", "version": "1.2.0", "author": {{"name": "x"}}}}"#),
        );
        skill(&root.join("skills"), "review");
        write(&root.join("commands/ship.md"), "Ship $ARGUMENTS\n");
        write(
            &root.join("hooks/hooks.json"),
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/stop.sh"}]}]}}"#,
        );
        write(
            &root.join(".mcp.json"),
            r#"{"mcpServers": {"e": {"command": "npx"}}}"#,
        );
        write(&root.join(".git/HEAD"), "ref: x\n");
        root
    }

    #[test]
    fn a_plugin_folder_is_copied_with_its_parts_and_can_be_disabled_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let source = plugin(dir.path(), "tools-kit");
        let store = Store::new(dir.path().join("store"));
        let added = store.add(&source, &[]).unwrap();
        assert_eq!(added.len(), 1);
        let installed = &added[0];
        assert_eq!(installed.name, "tools-kit");
        assert_eq!(installed.version.as_deref(), Some("1.2.0"));
        assert!(installed.enabled);
        assert_eq!(installed.skills, ["skills"]);
        assert_eq!(installed.commands, ["commands"]);
        assert_eq!(installed.hooks.as_deref(), Some("hooks/hooks.json"));
        assert_eq!(installed.mcp_servers.as_deref(), Some(".mcp.json"));
        let folder = store.folder("tools-kit");
        assert!(folder.join("skills/review/SKILL.md").is_file());
        assert!(!folder.join(".git").exists());
        // The copy stands on its own.
        std::fs::remove_dir_all(&source).unwrap();
        let parts = store.parts().unwrap();
        assert_eq!(parts.skills["tools-kit"], [folder.join("skills")]);
        assert_eq!(parts.hooks["tools-kit"], folder.join("hooks/hooks.json"));
        // Added again: refused by name.
        let again = plugin(dir.path(), "tools-kit");
        let err = store.add(&again, &[]).unwrap_err();
        assert!(err.to_string().contains("already installed"), "{err}");
        store.set_enabled("tools-kit", false).unwrap();
        assert!(store.parts().unwrap().skills.is_empty());
        assert_eq!(store.list().unwrap().len(), 1);
        store.remove("tools-kit").unwrap();
        assert!(store.list().unwrap().is_empty());
        assert!(!folder.exists());
        let err = store.remove("tools-kit").unwrap_err();
        assert_eq!(err.to_string(), "no plugin `tools-kit` is installed");
    }

    #[test]
    fn a_marketplace_adds_the_plugins_named_with_an_entry_as_their_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let market = dir.path().join("market");
        skill(&market.join("skills"), "algorithmic-art");
        skill(&market.join("skills"), "brand-guidelines");
        plugin(&market.join("plugins"), "strict-one");
        write(
            &market.join(MARKETPLACE),
            r#"{"name": "examples", "owner": {"name": "x"}, "plugins": [
                {"name": "example-skills", "source": "./", "strict": false,
                 "skills": ["./skills/algorithmic-art", "./skills/brand-guidelines", "./skills/missing"]},
                {"name": "strict-one", "source": "./plugins/strict-one", "skills": "./extra"},
                {"name": "far", "source": {"source": "github", "repo": "a/b"}}
            ]}"#,
        );
        let store = Store::new(dir.path().join("store"));
        let err = store.add(&market, &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("name those to add: example-skills, strict-one, far"),
            "{err}"
        );
        let err = store.add(&market, &["nope".into()]).unwrap_err();
        assert!(err.to_string().contains("has no plugin `nope`"), "{err}");
        let err = store.add(&market, &["far".into()]).unwrap_err();
        assert!(err.to_string().contains("is not a folder beside"), "{err}");
        let added = store
            .add(
                &market.join(MARKETPLACE),
                &["example-skills".into(), "strict-one".into()],
            )
            .unwrap();
        assert_eq!(added[0].marketplace.as_deref(), Some("examples"));
        // The entry is the whole manifest: its skills are the plugin's (not
        // the root's whole `skills/`), those that exist.
        assert_eq!(
            added[0].skills,
            ["skills/algorithmic-art", "skills/brand-guidelines"]
        );
        assert!(added[0].commands.is_empty());
        assert_eq!(added[1].name, "strict-one");
        // A strict entry adds to the folder's own defaults (`./extra` does
        // not exist there).
        assert_eq!(added[1].skills, ["skills"]);
        assert_eq!(added[1].version.as_deref(), Some("1.2.0"));
        assert_eq!(store.list().unwrap().len(), 2);
    }

    #[test]
    fn when_one_named_plugin_cannot_be_added_none_is() {
        let dir = tempfile::tempdir().unwrap();
        let market = dir.path().join("market");
        plugin(&market, "good");
        let bad = plugin(&market, "bad");
        std::os::unix::fs::symlink("/etc", bad.join("etc")).unwrap();
        write(
            &market.join(MARKETPLACE),
            r#"{"name": "m", "plugins": [{"name": "good", "source": "./good"},
                {"name": "bad", "source": "./bad"}]}"#,
        );
        let store = Store::new(dir.path().join("store"));
        let err = store
            .add(&market, &["good".into(), "bad".into()])
            .unwrap_err();
        assert!(err.to_string().contains("leads out of the plugin"), "{err}");
        assert!(store.list().unwrap().is_empty());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("store"))
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn names_that_could_climb_out_and_links_out_of_the_plugin_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("bad");
        write(&source.join(MANIFEST), r#"{"name": "../escape"}"#);
        let store = Store::new(dir.path().join("store"));
        let err = store.add(&source, &[]).unwrap_err();
        assert!(err.to_string().contains("is not allowed"), "{err}");
        let linked = plugin(dir.path(), "linked");
        std::os::unix::fs::symlink("/etc", linked.join("etc")).unwrap();
        let err = store.add(&linked, &[]).unwrap_err();
        assert!(err.to_string().contains("leads out of the plugin"), "{err}");
        assert!(store.list().unwrap().is_empty());
        let err = store.add(dir.path(), &[]).unwrap_err();
        assert!(err.to_string().contains("not a plugin"), "{err}");
    }

    #[test]
    fn inline_hooks_and_servers_become_files_of_the_copy() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("inline");
        write(
            &source.join(MANIFEST),
            r#"{"name": "inline", "hooks": {"hooks": {}}, "mcpServers": {"s": {"command": "x"}}}"#,
        );
        let store = Store::new(dir.path().join("store"));
        let added = store.add(&source, &[]).unwrap();
        assert_eq!(added[0].hooks.as_deref(), Some(".pincer-hooks.json"));
        let servers =
            std::fs::read_to_string(store.folder("inline").join(".pincer-mcp.json")).unwrap();
        assert!(servers.contains("\"command\": \"x\""), "{servers}");
        assert_eq!(
            expand_root("${CLAUDE_PLUGIN_ROOT}/run.sh", Path::new("/p")),
            "/p/run.sh"
        );
    }

    #[test]
    fn a_plugins_servers_are_prefixed_expanded_and_the_unusable_named() {
        use crate::mcp::Transport;
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new("/store/kit");
        let file = dir.path().join(".mcp.json");
        write(
            &file,
            r#"{"mcpServers": {
                "db tools": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/db", "args": ["--root", "${CLAUDE_PLUGIN_ROOT}"],
                             "env": {"DB": "${CLAUDE_PLUGIN_ROOT}/db.sqlite"}, "cwd": "."},
                "api": {"type": "http", "url": "http://127.0.0.1:9/${CLAUDE_PLUGIN_ROOT}", "headers": {"X-Root": "${PINCER_PLUGIN_ROOT}"}},
                "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                "neither": {"args": []},
                "wrong": {"command": 7}
            }}"#,
        );
        let (servers, problems) = mcp_servers("kit", root, &file);
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        // In the order written.
        assert_eq!(names, ["kit_db_tools", "kit_api"]);
        assert_eq!(
            servers[0].transport,
            Transport::Stdio {
                command: "/store/kit/bin/db".into(),
                args: vec!["--root".into(), "/store/kit".into()],
                env: vec![("DB".into(), "/store/kit/db.sqlite".into())],
            }
        );
        assert_eq!(
            servers[1].transport,
            Transport::Http {
                url: "http://127.0.0.1:9//store/kit".into(),
                headers: vec![("X-Root".into(), "/store/kit".into())],
            }
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
        let shown = file.display().to_string();
        assert!(
            problems.iter().all(|p| p.starts_with(&shown)),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`old` uses the SSE transport"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`neither`: give `command`"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("server `wrong`: invalid type"))
        );
        // The map as a manifest writes it inline; a file that is not JSON.
        write(&file, r#"{"s": {"command": "x"}}"#);
        assert_eq!(mcp_servers("kit", root, &file).0[0].name, "kit_s");
        write(&file, "{");
        let (servers, problems) = mcp_servers("kit", root, &file);
        assert!(servers.is_empty());
        assert!(
            problems[0].starts_with(&format!("{shown}: not JSON")),
            "{problems:?}"
        );
    }
}
