//! The MCP client: the tools of Model Context Protocol servers, offered to the
//! model beside the built-in ones.
//!
//! This module is the only one that knows `rmcp`. To the core a session's
//! servers are one [`SessionTools`]: a list of [`Tool`]s that may change from
//! one model turn to the next, and problems to tell the user. Every call of an
//! MCP tool goes through the same gate as a built-in tool (policy, approval,
//! safety pass, receipt); its kind comes from the tool's annotations.
//!
//! Servers start lazily (on the first model turn of a run), are restarted with
//! backoff when they exit, and are stopped with the session. See `docs/mcp.md`.

mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::core::ids::SessionId;
use crate::core::tool::{
    Plan, ProgressUpdate, SessionToolList, SessionTools, SessionToolsFactory, Tool, ToolContext,
    ToolError, ToolKind, ToolOutput, ToolSpec,
};
use server::Server;

/// How Pincer reaches one MCP server.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to a minimal environment (`PATH`, `HOME`, locale); values are secrets.
        env: Vec<(String, String)>,
    },
    /// A streamable HTTP endpoint.
    Http {
        url: String,
        /// Sent with every request; values are secrets.
        headers: Vec<(String, String)>,
    },
}

/// Shows names, never the values of env variables and headers.
impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| name.clone()).collect()
        };
        match self {
            Transport::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &names(env))
                .finish(),
            Transport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

/// One MCP server as configured or passed by a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The name its tools are prefixed with (`NAME__TOOL`), already sanitized.
    pub name: String,
    pub transport: Transport,
}

impl ServerSpec {
    /// The secret values of the spec (env and header values), for the safety pass.
    pub fn secrets(&self) -> Vec<String> {
        match &self.transport {
            Transport::Stdio { env, .. } => env.iter().map(|(_, v)| v.clone()).collect(),
            Transport::Http { headers, .. } => headers.iter().map(|(_, v)| v.clone()).collect(),
        }
    }
}

/// Settings every server of every session shares.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// Servers every session gets (the config's `[mcpServers.NAME]` tables), by name.
    pub servers: Vec<ServerSpec>,
    /// Longest a tool call may take before it fails (and the server is told to stop).
    pub call_timeout: Duration,
    /// Longest a server may take to start and answer `initialize`.
    pub start_timeout: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            call_timeout: Duration::from_secs(600),
            start_timeout: Duration::from_secs(30),
        }
    }
}

/// Builds each session's servers from the configured ones.
#[derive(Debug)]
pub struct Factory {
    settings: Arc<McpSettings>,
}

impl Factory {
    pub fn new(settings: McpSettings) -> Self {
        Self {
            settings: Arc::new(settings),
        }
    }

    /// The servers of a session: the configured ones, with `extra` (from the
    /// client) added and replacing configured servers of the same name.
    pub fn session(&self, workspace: &Path, extra: Vec<ServerSpec>) -> SessionServers {
        let mut by_name: BTreeMap<String, ServerSpec> = BTreeMap::new();
        for spec in self.settings.servers.iter().cloned().chain(extra) {
            by_name.insert(spec.name.clone(), spec);
        }
        SessionServers {
            servers: by_name
                .into_values()
                .map(|spec| {
                    Arc::new(Server::new(
                        spec,
                        self.settings.clone(),
                        workspace.to_path_buf(),
                    ))
                })
                .collect(),
        }
    }

    pub fn settings(&self) -> &McpSettings {
        &self.settings
    }

    /// Starts every configured server (within its start timeout), lists its
    /// tools and stops it again: per server, how many tools or why not
    /// (`pincer doctor`).
    pub async fn check(&self, workspace: &Path) -> Vec<(String, Result<usize, String>)> {
        let servers = self.session(workspace, Vec::new());
        let lists =
            futures::future::join_all(servers.servers.iter().map(|server| server.tools())).await;
        let checked = servers
            .servers
            .iter()
            .zip(lists)
            .map(|(server, (tools, problem))| {
                let outcome = match problem {
                    Some(problem) => Err(problem),
                    None => Ok(tools.len()),
                };
                (server.name().to_owned(), outcome)
            })
            .collect();
        SessionTools::shutdown(&servers).await;
        checked
    }
}

impl SessionToolsFactory for Factory {
    fn for_session(&self, _session: &SessionId, workspace: &Path) -> Option<Arc<dyn SessionTools>> {
        if self.settings.servers.is_empty() {
            return None;
        }
        Some(Arc::new(self.session(workspace, Vec::new())))
    }
}

/// The MCP servers of one session.
pub struct SessionServers {
    /// In name order, so tool names and collisions resolve the same way every time.
    servers: Vec<Arc<Server>>,
}

impl SessionTools for SessionServers {
    fn relist(&self) -> BoxFuture<'_, SessionToolList> {
        Box::pin(async move {
            futures::future::join_all(self.servers.iter().map(|server| server.mark_stale())).await;
            self.tools().await
        })
    }

    fn tools(&self) -> BoxFuture<'_, SessionToolList> {
        Box::pin(async move {
            let lists =
                futures::future::join_all(self.servers.iter().map(|server| server.tools())).await;
            let mut list = SessionToolList::default();
            let mut taken: Vec<String> = Vec::new();
            for (server, (tools, problem)) in self.servers.iter().zip(lists) {
                if let Some(problem) = problem {
                    list.problems.push(problem);
                }
                for remote in tools {
                    let name = unique_name(&tool_name(server.name(), &remote.name), &taken);
                    taken.push(name.clone());
                    list.tools.push(Arc::new(McpTool {
                        server: server.clone(),
                        name,
                        remote,
                    }));
                }
            }
            list
        })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            futures::future::join_all(self.servers.iter().map(|server| server.shutdown())).await;
        })
    }

    fn secrets(&self) -> Vec<String> {
        self.servers
            .iter()
            .flat_map(|server| server.spec().secrets())
            .collect()
    }
}

/// What Pincer keeps of a server's tool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RemoteTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub kind: ToolKind,
}

/// One tool of an MCP server, under its namespaced name.
struct McpTool {
    server: Arc<Server>,
    /// `SERVER__TOOL`, sanitized and unique in the session.
    name: String,
    remote: RemoteTool,
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        let about = if self.remote.description.is_empty() {
            String::new()
        } else {
            format!(" {}", self.remote.description)
        };
        ToolSpec {
            name: self.name.clone(),
            description: format!(
                "[tool `{}` of the MCP server `{}`]{about}",
                self.remote.name,
                self.server.name()
            ),
            parameters: self.remote.input_schema.clone(),
        }
    }

    fn kind(&self) -> ToolKind {
        self.remote.kind
    }

    fn plan<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Plan, ToolError>> {
        Box::pin(async move {
            arguments_object(arguments)?;
            Ok(Plan {
                title: format!("MCP {}: {}", self.server.name(), self.remote.name),
                ..Plan::default()
            })
        })
    }

    fn execute<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        _plan: &'a Plan,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments = arguments_object(arguments)?;
            self.server
                .call(&self.remote.name, arguments, ctx)
                .await
                .map(ToolOutput::text)
        })
    }
}

fn arguments_object(
    arguments: &serde_json::Value,
) -> Result<serde_json::Map<String, serde_json::Value>, ToolError> {
    if let Some(map) = arguments.as_object() {
        Ok(map.clone())
    } else if arguments.is_null() {
        Ok(serde_json::Map::new())
    } else {
        Err(ToolError::InvalidArguments(format!(
            "the arguments must be a JSON object, got {arguments}"
        )))
    }
}

/// Progress a server reports on a call: a line of the call's output while it
/// runs (through the gate's safety pass, like all tool output), and the log.
pub(crate) fn report_progress(ctx: &ToolContext, server: &str, text: &str) {
    tracing::debug!(target: "pincer::mcp", session = %ctx.session_id, server, "progress: {text}");
    ctx.progress
        .report(ProgressUpdate::Output(format!("[progress {text}]\n")));
}

/// Longest tool name providers accept.
const MAX_NAME: usize = 64;

/// `name` with every character providers reject replaced by `_`, at most 64 characters.
pub fn sanitize(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect();
    if clean.is_empty() {
        "_".to_owned()
    } else {
        clean
    }
}

/// The name the model sees for `tool` of `server`: `SERVER__TOOL`, sanitized.
pub fn tool_name(server: &str, tool: &str) -> String {
    sanitize(&format!("{}__{}", sanitize(server), sanitize(tool)))
}

/// `name`, or `name_2`, `name_3`, ... (shortened to fit) if it is taken.
fn unique_name(name: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == name) {
        return name.to_owned();
    }
    (2..)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep = MAX_NAME.saturating_sub(suffix.len()).min(name.len());
            format!("{}{suffix}", &name[..keep])
        })
        .find(|candidate| !taken.iter().any(|t| t == candidate))
        .unwrap_or_else(|| name.to_owned())
}

/// A tool's kind from its annotations: read-only tools read, destructive ones
/// delete, the rest (and tools without annotations) count as changing things.
pub fn kind_from_hints(read_only: Option<bool>, destructive: Option<bool>) -> ToolKind {
    match (read_only, destructive) {
        (Some(true), _) => ToolKind::Read,
        (_, Some(true)) => ToolKind::Delete,
        _ => ToolKind::Other,
    }
}

/// The text the model sees of a call's content blocks (in their JSON form):
/// text joined, other content summarized.
pub fn content_text(
    blocks: &[serde_json::Value],
    structured: Option<&serde_json::Value>,
) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        let field = |name: &str| block.get(name).and_then(serde_json::Value::as_str);
        let part = match field("type").unwrap_or_default() {
            "text" => field("text").unwrap_or_default().to_owned(),
            kind @ ("image" | "audio") => format!(
                "[{kind}: {}, {} bytes]",
                field("mimeType").unwrap_or("unknown type"),
                base64_len(field("data").unwrap_or_default())
            ),
            "resource" => {
                let resource = block.get("resource");
                let inner = |name: &str| {
                    resource
                        .and_then(|r| r.get(name))
                        .and_then(serde_json::Value::as_str)
                };
                match inner("text") {
                    Some(text) => text.to_owned(),
                    None => format!(
                        "[resource: {}, {}, {} bytes]",
                        inner("uri").unwrap_or_default(),
                        inner("mimeType").unwrap_or("unknown type"),
                        base64_len(inner("blob").unwrap_or_default())
                    ),
                }
            }
            "resource_link" => format!(
                "[resource link: {}{}]",
                field("uri").unwrap_or_default(),
                field("name")
                    .map(|name| format!(" ({name})"))
                    .unwrap_or_default()
            ),
            other => format!("[{other} content]"),
        };
        parts.push(part);
    }
    if parts.is_empty()
        && let Some(value) = structured
    {
        return value.to_string();
    }
    parts.join("\n")
}

/// The decoded size of base64 text.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// The environment a stdio server starts with before its own variables.
fn base_env() -> Vec<(String, String)> {
    const KEEP: [&str; 9] = [
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ",
    ];
    KEEP.iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v)))
        .collect()
}

/// The workspace a server process starts in, if it exists.
fn working_dir(workspace: &Path) -> Option<PathBuf> {
    workspace.is_dir().then(|| workspace.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn names_are_sanitized_and_namespaced() {
        assert_eq!(tool_name("fs", "read_file"), "fs__read_file");
        assert_eq!(
            tool_name("my server", "get.thing/x"),
            "my_server__get_thing_x"
        );
        assert_eq!(tool_name("ü", "é"), "____");
        let long = tool_name(&"s".repeat(40), &"t".repeat(40));
        assert_eq!(long.len(), 64);
        assert!(long.starts_with(&format!("{}__", "s".repeat(40))));
        assert_eq!(sanitize(""), "_");
    }

    #[test]
    fn collisions_get_a_numbered_suffix() {
        let taken = vec!["a__b".to_owned(), "a__b_2".to_owned()];
        assert_eq!(unique_name("a__b", &taken), "a__b_3");
        assert_eq!(unique_name("a__c", &taken), "a__c");
        let long = "x".repeat(64);
        let renamed = unique_name(&long, std::slice::from_ref(&long));
        assert_eq!(renamed.len(), 64);
        assert!(renamed.ends_with("_2"));
    }

    #[test]
    fn kind_follows_the_annotations() {
        assert_eq!(kind_from_hints(Some(true), None), ToolKind::Read);
        assert_eq!(kind_from_hints(Some(true), Some(true)), ToolKind::Read);
        assert_eq!(kind_from_hints(Some(false), Some(true)), ToolKind::Delete);
        assert_eq!(kind_from_hints(None, Some(true)), ToolKind::Delete);
        assert_eq!(kind_from_hints(None, None), ToolKind::Other);
        assert_eq!(kind_from_hints(Some(false), Some(false)), ToolKind::Other);
        assert!(!kind_from_hints(None, None).is_read_only());
    }

    #[test]
    fn content_is_joined_and_summarized() {
        let blocks = vec![
            json!({"type": "text", "text": "first"}),
            json!({"type": "image", "mimeType": "image/png", "data": "AAAA"}),
            json!({"type": "audio", "mimeType": "audio/wav", "data": "AAA="}),
            json!({"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}}),
            json!({"type": "resource", "resource": {"uri": "file:///b", "mimeType": "application/zip", "blob": "AAAAAAAA"}}),
            json!({"type": "resource_link", "uri": "file:///c", "name": "c"}),
        ];
        assert_eq!(
            content_text(&blocks, None),
            "first\n[image: image/png, 3 bytes]\n[audio: audio/wav, 2 bytes]\ninline\n\
             [resource: file:///b, application/zip, 6 bytes]\n[resource link: file:///c (c)]"
        );
        assert_eq!(content_text(&[], Some(&json!({"sum": 3}))), r#"{"sum":3}"#);
        assert_eq!(content_text(&[], None), "");
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert!(arguments_object(&json!({"a": 1})).is_ok());
        assert_eq!(arguments_object(&json!(null)), Ok(serde_json::Map::new()));
        assert!(matches!(
            arguments_object(&json!([1])),
            Err(ToolError::InvalidArguments(_))
        ));
    }

    #[test]
    fn session_servers_override_configured_ones_by_name() {
        let spec = |name: &str, command: &str| ServerSpec {
            name: name.to_owned(),
            transport: Transport::Stdio {
                command: command.to_owned(),
                args: Vec::new(),
                env: Vec::new(),
            },
        };
        let factory = Factory::new(McpSettings {
            servers: vec![spec("b", "config-b"), spec("a", "config-a")],
            ..McpSettings::default()
        });
        let session = factory.session(Path::new("/"), vec![spec("b", "client-b")]);
        let commands: Vec<String> = session
            .servers
            .iter()
            .map(|s| match &s.spec().transport {
                Transport::Stdio { command, .. } => command.clone(),
                Transport::Http { url, .. } => url.clone(),
            })
            .collect();
        assert_eq!(commands, vec!["config-a", "client-b"]);
    }
}
