//! The policy gate: whether a planned tool call runs, needs a person's
//! approval, or is refused. Pure decisions over the plan, the session's mode,
//! the configured rules and what the session already remembered.

pub mod shell;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use ipnet::IpNet;

use serde::{Deserialize, Serialize};

use super::approval::Grant;
pub use super::boundary::{
    DEFAULT_FORBIDDEN, DEFAULT_PROTECTED, PathBoundary, PathError, Protected,
};
use super::session::Mode;
use super::tool::{Plan, ToolKind};
use shell::{Command, CommandRule, ShellLine};

/// An entry of `[web] allow_private`: an address or network, or a host
/// name, that may be fetched although it is not globally routable
/// (`tools::web::refusal` also asks it about the IPv4 address an IPv6
/// form carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivateAllow {
    Net(IpNet),
    Host(String),
}

impl PrivateAllow {
    pub fn parse(entry: &str) -> Option<Self> {
        let entry = entry.trim();
        if let Ok(net) = IpNet::from_str(entry) {
            return Some(PrivateAllow::Net(net));
        }
        if let Ok(ip) = IpAddr::from_str(entry.trim_matches(['[', ']'])) {
            return Some(PrivateAllow::Net(IpNet::from(ip)));
        }
        let host = entry.trim_end_matches('.').to_ascii_lowercase();
        (!host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .then_some(PrivateAllow::Host(host))
    }

    pub fn allows(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            PrivateAllow::Net(net) => net.contains(&ip),
            PrivateAllow::Host(name) => host.trim_end_matches('.').eq_ignore_ascii_case(name),
        }
    }
}

/// A configured answer for a tool or a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    Allow,
    Ask,
    Deny,
}

/// The configured rules; the same for every session.
#[derive(Debug, Clone, Default)]
pub struct PolicyRules {
    /// Per-tool rules by tool name.
    pub tools: HashMap<String, Rule>,
    /// Shell commands that run without asking (under `supervised`; under
    /// `read_only` the only ones that run at all).
    pub shell_allow: Vec<CommandRule>,
    /// Shell commands that always need approval, even under `full`.
    pub shell_ask: Vec<CommandRule>,
    /// Shell commands that never run.
    pub shell_deny: Vec<CommandRule>,
    /// Web hosts fetched without asking (`[web] allow`).
    pub web_allow: Vec<HostRule>,
    /// Web hosts never fetched (`[web] deny`).
    pub web_deny: Vec<HostRule>,
}

/// A web host rule: `example.com` takes the host and every host under it
/// (`docs.example.com`); `*` takes every host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule(String);

impl HostRule {
    /// A rule as written: a host name (a leading `*.` or `.` is the same as
    /// none), or `*`. `None` for an empty one or one with a scheme, path or
    /// port.
    pub fn parse(rule: &str) -> Option<Self> {
        let rule = rule.trim().to_ascii_lowercase();
        let rule = rule
            .strip_prefix("*.")
            .or_else(|| rule.strip_prefix('.'))
            .unwrap_or(&rule)
            .trim_end_matches('.')
            .to_owned();
        let valid = rule == "*"
            || (!rule.is_empty()
                && rule.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
                }));
        valid.then_some(HostRule(rule))
    }

    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.0 == "*"
            || host == self.0
            || host
                .strip_suffix(&self.0)
                .is_some_and(|rest| rest.ends_with('.'))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Commands allowed without asking unless configured otherwise: they read and report.
pub const DEFAULT_SHELL_ALLOW: &[&str] = &[
    "ls",
    "pwd",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "echo",
    "printf",
    "true",
    "false",
    "which",
    "file",
    "stat",
    "du",
    "df",
    "date",
    "uname",
    "whoami",
    "id",
    "basename",
    "dirname",
    "realpath",
    "sort",
    "uniq",
    "cut",
    "tr",
    "diff",
    "cmp",
    "git status",
    "git diff",
    "git log",
    "git show",
    "git branch",
    "git rev-parse",
    "git ls-files",
    "git blame",
    "cargo --version",
    "rustc --version",
];

/// Commands that never run unless configured otherwise.
pub const DEFAULT_SHELL_DENY: &[&str] = &[
    "sudo", "su", "doas", "pkexec", "mkfs", "shutdown", "reboot", "halt", "poweroff", "chroot",
    "mount", "umount",
];

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Runs without asking; `remembered` when a session grant said so.
    Allow { reason: String, remembered: bool },
    /// A person must approve it first.
    Ask { reason: String },
    /// Never runs; `remembered` when a session's `reject_always` said so.
    Deny { reason: String, remembered: bool },
}

/// Everything the gate looks at for one call.
pub struct Check<'a> {
    pub mode: Mode,
    pub tool: &'a str,
    pub kind: ToolKind,
    pub plan: &'a Plan,
    pub grants: &'a [Grant],
    pub boundary: &'a PathBoundary,
    /// The directory a shell line runs in.
    pub cwd: &'a Path,
}

impl PolicyRules {
    /// Decides a planned call.
    pub fn check(&self, check: &Check<'_>) -> Gate {
        let tool_rule = self.tools.get(check.tool).copied();
        if tool_rule == Some(Rule::Deny) {
            return deny(format!(
                "the tool `{}` is denied by configuration",
                check.tool
            ));
        }
        // A tree the boundary lets tools read only (a skill's folder) is
        // never written, whatever the mode.
        if let Some(path) = check
            .plan
            .writes
            .iter()
            .find(|path| !check.boundary.contains(path))
        {
            return deny(format!("{} may be read, not written", path.display()));
        }
        if let Some(line) = &check.plan.command {
            return self.check_shell(check, line, tool_rule);
        }
        if !check.plan.hosts.is_empty() {
            return self.check_hosts(check, tool_rule);
        }
        let mutates = !check.kind.is_read_only();
        if mutates && check.mode == Mode::ReadOnly {
            return deny(format!(
                "read_only mode: `{}` {} ({})",
                check.tool,
                match check.kind {
                    // A tool Pincer knows only by its annotations (MCP).
                    ToolKind::Other => "may change things",
                    ToolKind::Read
                    | ToolKind::Edit
                    | ToolKind::Delete
                    | ToolKind::Move
                    | ToolKind::Search
                    | ToolKind::Execute
                    | ToolKind::Fetch
                    | ToolKind::Think => "would change files",
                },
                check.kind.as_str()
            ));
        }
        if let Some(reason) = needs_person(check.plan, check.boundary) {
            return Gate::Ask { reason };
        }
        if let Some(grant) = check
            .grants
            .iter()
            .find(|g| g.tool == check.tool && g.scope.is_empty())
        {
            return remembered(grant, check.tool);
        }
        match tool_rule {
            Some(Rule::Allow) => allow(format!("`{}` is allowed by configuration", check.tool)),
            Some(Rule::Ask) => Gate::Ask {
                reason: format!("`{}` needs approval by configuration", check.tool),
            },
            Some(Rule::Deny) | None if !mutates => allow("reads only".to_owned()),
            Some(Rule::Deny) | None => match check.mode {
                Mode::Full => allow("full mode".to_owned()),
                Mode::Supervised | Mode::ReadOnly => Gate::Ask {
                    reason: match check.kind {
                        ToolKind::Other => {
                            format!("supervised mode: `{}` may change things", check.tool)
                        }
                        ToolKind::Read
                        | ToolKind::Edit
                        | ToolKind::Delete
                        | ToolKind::Move
                        | ToolKind::Search
                        | ToolKind::Execute
                        | ToolKind::Fetch
                        | ToolKind::Think => {
                            format!("supervised mode: `{}` changes files", check.tool)
                        }
                    },
                },
            },
        }
    }

    /// A call reaching web hosts: a denied host refuses it; then a tool
    /// rule, the allow list or a remembered answer per host decides; else
    /// `full` fetches, `supervised` asks, `read_only` refuses.
    fn check_hosts(&self, check: &Check<'_>, tool_rule: Option<Rule>) -> Gate {
        for host in &check.plan.hosts {
            if let Some(rule) = self.web_deny.iter().find(|rule| rule.matches(host)) {
                return deny(format!(
                    "{host} matches the web deny rule `{}`",
                    rule.as_str()
                ));
            }
        }
        match tool_rule {
            Some(Rule::Allow) => {
                return allow(format!("`{}` is allowed by configuration", check.tool));
            }
            Some(Rule::Ask) => {
                return Gate::Ask {
                    reason: format!("`{}` needs approval by configuration", check.tool),
                };
            }
            Some(Rule::Deny) | None => {}
        }
        // Whether a person's remembered answer let a host through.
        let mut by_grant = false;
        for host in &check.plan.hosts {
            if self.web_allow.iter().any(|rule| rule.matches(host)) {
                continue;
            }
            match check
                .grants
                .iter()
                .find(|g| g.tool == check.tool && (g.scope.is_empty() || g.scope == *host))
            {
                Some(grant) if !grant.allow => return remembered(grant, check.tool),
                Some(_) => by_grant = true,
                None => {
                    let reason = format!("{host} is not on the web allow list");
                    return match check.mode {
                        Mode::Full => allow(format!("full mode: {reason}")),
                        Mode::Supervised => Gate::Ask {
                            reason: format!("supervised mode: {reason}"),
                        },
                        Mode::ReadOnly => deny(format!("read_only mode: {reason}")),
                    };
                }
            }
        }
        Gate::Allow {
            reason: "every host is allowed".to_owned(),
            remembered: by_grant,
        }
    }

    fn check_shell(&self, check: &Check<'_>, line: &str, tool_rule: Option<Rule>) -> Gate {
        let parsed = match shell::analyze(line) {
            Ok(parsed) => parsed,
            Err(err) => {
                return match check.mode {
                    Mode::ReadOnly => deny(format!("read_only mode: {err}")),
                    Mode::Supervised | Mode::Full => Gate::Ask {
                        reason: format!("{err}; a person must read it"),
                    },
                };
            }
        };
        for command in &parsed.commands {
            if let Some(rule) = self.shell_deny.iter().find(|rule| rule.matches(command)) {
                return deny(format!(
                    "`{}` matches the deny rule `{}`",
                    command.words.join(" "),
                    rule.words.join(" ")
                ));
            }
        }
        if let Some(gate) = path_gate(&parsed, check) {
            return gate;
        }
        for command in &parsed.commands {
            let scope = command.words.join(" ");
            if let Some(grant) = check.grants.iter().find(|g| {
                g.tool == check.tool && !g.allow && (g.scope.is_empty() || g.scope == scope)
            }) {
                return remembered(grant, check.tool);
            }
        }
        let writes_files = parsed
            .redirects
            .iter()
            .any(|r| r.writes && !is_sink(&r.target));
        let allowed = |command: &Command| self.shell_allow.iter().any(|rule| rule.matches(command));
        let granted = |command: &Command| {
            let scope = command.words.join(" ");
            !command.dynamic
                && check.grants.iter().any(|g| {
                    g.tool == check.tool && g.allow && (g.scope.is_empty() || g.scope == scope)
                })
        };
        let asked: Vec<&Command> = parsed
            .commands
            .iter()
            .filter(|c| c.dynamic || self.shell_ask.iter().any(|rule| rule.matches(c)))
            .collect();
        let unlisted: Vec<&Command> = parsed.commands.iter().filter(|c| !allowed(c)).collect();
        match check.mode {
            Mode::ReadOnly => {
                if let Some(command) = unlisted.first() {
                    return deny(format!(
                        "read_only mode: `{}` is not an allowed read-only command",
                        command.words.join(" ")
                    ));
                }
                if writes_files {
                    return deny(
                        "read_only mode: the line redirects output into a file".to_owned(),
                    );
                }
                allow("every command is allowed by the shell rules".to_owned())
            }
            Mode::Supervised | Mode::Full => {
                if tool_rule == Some(Rule::Ask) {
                    return Gate::Ask {
                        reason: "`shell` needs approval by configuration".to_owned(),
                    };
                }
                if let Some(command) = asked.iter().find(|c| !granted(c)) {
                    return Gate::Ask {
                        reason: if command.dynamic {
                            format!(
                                "`{}` runs a command only known at run time",
                                command.words.join(" ")
                            )
                        } else {
                            format!(
                                "`{}` needs approval by the shell rules",
                                command.words.join(" ")
                            )
                        },
                    };
                }
                if check.mode == Mode::Full || tool_rule == Some(Rule::Allow) {
                    return allow(
                        if check.mode == Mode::Full {
                            "full mode"
                        } else {
                            "`shell` is allowed by configuration"
                        }
                        .to_owned(),
                    );
                }
                let needs: Vec<&&Command> = unlisted.iter().filter(|c| !granted(c)).collect();
                if let Some(command) = needs.first() {
                    return Gate::Ask {
                        reason: format!(
                            "supervised mode: `{}` is not in the allowed commands",
                            command.words.join(" ")
                        ),
                    };
                }
                if writes_files {
                    return Gate::Ask {
                        reason: "supervised mode: the line writes to a file".to_owned(),
                    };
                }
                let remembered = parsed.commands.iter().any(|c| !allowed(c));
                Gate::Allow {
                    reason: if remembered {
                        "every command is allowed by the shell rules or a remembered approval"
                            .to_owned()
                    } else {
                        "every command is allowed by the shell rules".to_owned()
                    },
                    remembered,
                }
            }
        }
    }
}

/// Why a planned call needs a person's approval whatever the mode, the
/// rules, remembered answers or hooks say: it writes a protected path, or
/// its tool said so (`Plan::needs_person`).
pub fn needs_person(plan: &Plan, boundary: &PathBoundary) -> Option<String> {
    for path in &plan.writes {
        if let Some(rule) = boundary.protected().rule(path) {
            return Some(format!(
                "{} is a protected path (`{rule}`: agents read it as configuration or code to run); every write needs a person's approval",
                path.display()
            ));
        }
    }
    plan.needs_person.clone()
}

/// The grants an `allow_always` / `reject_always` answer creates for a call:
/// one per command for the shell, one for the whole tool otherwise.
pub fn grants_for(tool: &str, plan: &Plan, allow: bool) -> Vec<Grant> {
    let scopes: Vec<String> = match &plan.command {
        Some(line) => match shell::analyze(line) {
            Ok(parsed) => {
                let mut scopes: Vec<String> = Vec::new();
                for command in parsed.commands.iter().filter(|c| !c.dynamic) {
                    let scope = command.words.join(" ");
                    if !scopes.contains(&scope) {
                        scopes.push(scope);
                    }
                }
                scopes
            }
            // A line nobody can analyze is remembered as itself.
            Err(_) => vec![line.trim().to_owned()],
        },
        None if !plan.hosts.is_empty() => plan.hosts.clone(),
        None => vec![String::new()],
    };
    scopes
        .into_iter()
        .map(|scope| Grant {
            tool: tool.to_owned(),
            scope,
            allow,
        })
        .collect()
}

/// Output sinks that are not files anyone cares about.
fn is_sink(target: &str) -> bool {
    matches!(
        target,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    )
}

/// Checks the paths a shell line names: a forbidden path is refused, a write
/// redirected outside the boundary is refused, and a path that is the
/// workspace's parent or above (`~`, `/`, `..`) needs approval.
fn path_gate(line: &ShellLine, check: &Check<'_>) -> Option<Gate> {
    let mut candidates: Vec<(&str, bool)> = Vec::new();
    for command in &line.commands {
        for word in command.words.iter().skip(1) {
            // `--file=~/.ssh/id` names a path after the `=`.
            let value = word.rsplit_once('=').map_or(word.as_str(), |(_, v)| v);
            if looks_like_path(value) {
                candidates.push((value, false));
            }
        }
    }
    for redirect in &line.redirects {
        candidates.push((redirect.target.as_str(), redirect.writes));
    }
    let mut above: Option<PathBuf> = None;
    for (raw, writes) in candidates {
        if raw.contains('$') || raw.contains('`') {
            continue;
        }
        let resolved = check.boundary.resolve_unchecked(check.cwd, raw);
        if let Some(rule) = check.boundary.forbidden_rule(&resolved) {
            return Some(deny(format!(
                "`{raw}` reaches the forbidden path {}",
                rule.display()
            )));
        }
        if writes && let Some(rule) = check.boundary.protected().rule(&resolved) {
            return Some(deny(format!(
                "the line writes to {}, a protected path (`{rule}`), which commands never write; write_file or edit_file asks a person",
                resolved.display()
            )));
        }
        if writes && !is_sink(raw) && !check.boundary.contains(&resolved) {
            return Some(deny(format!(
                "the line writes to {} outside the workspace",
                resolved.display()
            )));
        }
        if check.boundary.workspace().starts_with(&resolved)
            && resolved != check.boundary.workspace()
        {
            above.get_or_insert(resolved);
        }
    }
    // A forbidden path could also be reached through a directory above it.
    above.map(|path| Gate::Ask {
        reason: format!(
            "the line names {}, which contains the workspace",
            path.display()
        ),
    })
}

fn looks_like_path(word: &str) -> bool {
    word.starts_with('/')
        || word.starts_with('~')
        || word.starts_with("./")
        || word == "."
        || word == ".."
        || word.starts_with("../")
        || (word.contains('/') && !word.contains("://"))
}

fn allow(reason: String) -> Gate {
    Gate::Allow {
        reason,
        remembered: false,
    }
}

fn deny(reason: String) -> Gate {
    Gate::Deny {
        reason,
        remembered: false,
    }
}

fn remembered(grant: &Grant, tool: &str) -> Gate {
    let what = if grant.scope.is_empty() {
        format!("`{tool}`")
    } else {
        format!("`{}`", grant.scope)
    };
    if grant.allow {
        Gate::Allow {
            reason: format!("{what} was approved for the rest of the session"),
            remembered: true,
        }
    } else {
        Gate::Deny {
            reason: format!("{what} was rejected for the rest of the session"),
            remembered: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boundary(dir: &Path) -> PathBoundary {
        let forbidden: Vec<String> = DEFAULT_FORBIDDEN.iter().map(|s| (*s).to_owned()).collect();
        PathBoundary::new(dir, &[], &forbidden, Some(PathBuf::from("/home/user")))
    }

    #[test]
    fn paths_inside_the_workspace_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let b = boundary(&ws);
        assert_eq!(
            b.resolve(&ws, "src/main.rs").unwrap(),
            ws.join("src/main.rs")
        );
        assert_eq!(b.resolve(&ws, "./a/../b").unwrap(), ws.join("b"));
        assert_eq!(b.resolve(&ws, ws.to_str().unwrap()).unwrap(), ws);
    }

    #[test]
    fn traversal_absolute_and_symlink_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let b = boundary(&ws);
        assert!(matches!(
            b.resolve(&ws, "../x"),
            Err(PathError::Outside { .. })
        ));
        assert!(matches!(
            b.resolve(&ws, "/etc/passwd"),
            Err(PathError::Outside { .. })
        ));
        std::os::unix::fs::symlink("/etc", ws.join("link")).unwrap();
        assert!(matches!(
            b.resolve(&ws, "link/passwd"),
            Err(PathError::Outside { .. })
        ));
        // A relative link that climbs out.
        std::os::unix::fs::symlink("../..", ws.join("up")).unwrap();
        assert!(matches!(
            b.resolve(&ws, "up/etc"),
            Err(PathError::Outside { .. })
        ));
        // A link that stays inside is fine.
        std::fs::create_dir(ws.join("real")).unwrap();
        std::os::unix::fs::symlink("real", ws.join("alias")).unwrap();
        assert_eq!(b.resolve(&ws, "alias/f").unwrap(), ws.join("real/f"));
    }

    #[test]
    fn the_forbidden_list_wins_even_inside_a_root() {
        let b = PathBoundary::new(
            Path::new("/home/user"),
            &[],
            &["~/.ssh".to_owned()],
            Some(PathBuf::from("/home/user")),
        );
        assert!(matches!(
            b.resolve(Path::new("/home/user"), "~/.ssh/id_rsa"),
            Err(PathError::Forbidden { .. })
        ));
        assert!(matches!(
            b.resolve(Path::new("/home/user"), ".ssh/../.ssh/config"),
            Err(PathError::Forbidden { .. })
        ));
        assert!(b.resolve(Path::new("/home/user"), "notes.txt").is_ok());
    }

    fn rules() -> PolicyRules {
        let parse = |list: &[&str]| {
            list.iter()
                .map(|r| CommandRule::parse(r).unwrap())
                .collect::<Vec<_>>()
        };
        PolicyRules {
            tools: [
                ("write_file".to_owned(), Rule::Ask),
                ("grep".to_owned(), Rule::Deny),
            ]
            .into_iter()
            .collect(),
            shell_allow: parse(DEFAULT_SHELL_ALLOW),
            shell_ask: parse(&["git push"]),
            shell_deny: parse(DEFAULT_SHELL_DENY),
            web_allow: vec![HostRule::parse("docs.rs").unwrap()],
            web_deny: vec![HostRule::parse("*.evil.test").unwrap()],
        }
    }

    #[test]
    fn web_hosts_by_list_grant_and_mode() {
        let ws = PathBuf::from("/home/user/project");
        let b = PathBoundary::new(&ws, &[], &[], None);
        let gate = |mode: Mode, host: &str, grants: &[Grant]| {
            let plan = Plan {
                hosts: vec![host.to_owned()],
                ..Plan::default()
            };
            let gate = rules().check(&Check {
                mode,
                tool: "web_fetch",
                kind: ToolKind::Fetch,
                plan: &plan,
                grants,
                boundary: &b,
                cwd: &ws,
            });
            (summary(&gate).0, summary(&gate).1.to_owned())
        };
        // The allow list covers the host and those under it, in every mode.
        for mode in Mode::ALL {
            assert_eq!(gate(mode, "docs.rs", &[]).0, "allow");
            assert_eq!(gate(mode, "api.docs.rs", &[]).0, "allow");
            assert_eq!(gate(mode, "a.evil.test", &[]).0, "deny");
        }
        assert_eq!(gate(Mode::Full, "example.com", &[]).0, "allow");
        assert_eq!(
            gate(Mode::Supervised, "example.com", &[]),
            (
                "ask",
                "supervised mode: example.com is not on the web allow list".to_owned()
            )
        );
        assert_eq!(gate(Mode::ReadOnly, "example.com", &[]).0, "deny");
        assert_eq!(gate(Mode::Supervised, "notdocs.rs", &[]).0, "ask");
        // An "always" answer is remembered per host.
        let granted = grants_for(
            "web_fetch",
            &Plan {
                hosts: vec!["example.com".into()],
                ..Plan::default()
            },
            true,
        );
        assert_eq!(granted[0].scope, "example.com");
        assert_eq!(gate(Mode::Supervised, "example.com", &granted).0, "allow");
        assert_eq!(gate(Mode::Supervised, "other.com", &granted).0, "ask");
        // A deny rule wins over a grant.
        let evil = [Grant {
            tool: "web_fetch".into(),
            scope: "x.evil.test".into(),
            allow: true,
        }];
        assert_eq!(gate(Mode::Full, "x.evil.test", &evil).0, "deny");
        assert_eq!(HostRule::parse("https://x.test/"), None);
        assert!(HostRule::parse("*").unwrap().matches("anything.test"));
    }

    /// (mode, line) -> the gate's kind and a fragment of its reason.
    fn shell_gate(mode: Mode, line: &str, grants: &[Grant]) -> Gate {
        let ws = PathBuf::from("/home/user/project");
        let b = PathBoundary::new(
            &ws,
            &[],
            &DEFAULT_FORBIDDEN
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>(),
            Some(PathBuf::from("/home/user")),
        );
        let plan = Plan {
            command: Some(line.to_owned()),
            ..Plan::default()
        };
        rules().check(&Check {
            mode,
            tool: "shell",
            kind: ToolKind::Execute,
            plan: &plan,
            grants,
            boundary: &b,
            cwd: &ws,
        })
    }

    fn summary(gate: &Gate) -> (&'static str, &str) {
        match gate {
            Gate::Allow { reason, .. } => ("allow", reason),
            Gate::Ask { reason } => ("ask", reason),
            Gate::Deny { reason, .. } => ("deny", reason),
        }
    }

    #[test]
    fn tools_known_only_by_their_annotations_follow_their_kind() {
        let ws = PathBuf::from("/home/user/project");
        let b = PathBoundary::new(&ws, &[], &[], None);
        let plan = Plan::default();
        let judge = |mode: Mode, kind: ToolKind| {
            let gate = rules().check(&Check {
                mode,
                tool: "srv__tool",
                kind,
                plan: &plan,
                grants: &[],
                boundary: &b,
                cwd: &ws,
            });
            let (verdict, reason) = summary(&gate);
            (verdict, reason.to_owned())
        };
        use Mode::*;
        let cases = [
            (ReadOnly, ToolKind::Read, "allow", "reads only"),
            (Supervised, ToolKind::Read, "allow", "reads only"),
            (
                ReadOnly,
                ToolKind::Other,
                "deny",
                "read_only mode: `srv__tool` may change things (other)",
            ),
            (
                Supervised,
                ToolKind::Other,
                "ask",
                "supervised mode: `srv__tool` may change things",
            ),
            (Full, ToolKind::Other, "allow", "full mode"),
            (
                ReadOnly,
                ToolKind::Delete,
                "deny",
                "read_only mode: `srv__tool` would change files (delete)",
            ),
            (
                Supervised,
                ToolKind::Delete,
                "ask",
                "supervised mode: `srv__tool` changes files",
            ),
        ];
        for (mode, kind, verdict, reason) in cases {
            assert_eq!(
                judge(mode, kind),
                (verdict, reason.to_owned()),
                "{mode:?} {kind:?}"
            );
        }
    }

    #[test]
    fn shell_lines_are_judged_by_every_command_they_run() {
        use Mode::*;
        let cases: &[(Mode, &str, &str, &str)] = &[
            (
                Supervised,
                "ls -la | grep x && git status",
                "allow",
                "allowed by the shell rules",
            ),
            (
                Supervised,
                "ls && rm -rf build",
                "ask",
                "`rm -rf build` is not in the allowed commands",
            ),
            (
                Supervised,
                "echo $(curl http://x)",
                "ask",
                "`curl http://x` is not in the allowed commands",
            ),
            (Supervised, "echo `wget x`", "ask", "`wget x`"),
            (
                Supervised,
                "ls; sudo rm -rf /",
                "deny",
                "matches the deny rule `sudo`",
            ),
            (
                Full,
                "cat x | sudo tee /etc/hosts",
                "deny",
                "deny rule `sudo`",
            ),
            (Full, "cargo build", "allow", "full mode"),
            (
                Full,
                "git push origin main",
                "ask",
                "needs approval by the shell rules",
            ),
            (Full, "$CMD --force", "ask", "only known at run time"),
            (
                Supervised,
                "echo \"unterminated",
                "ask",
                "cannot analyze the shell line",
            ),
            (
                ReadOnly,
                "echo \"unterminated",
                "deny",
                "read_only mode: cannot analyze",
            ),
            (
                ReadOnly,
                "ls && cat README",
                "allow",
                "allowed by the shell rules",
            ),
            (
                ReadOnly,
                "ls && touch x",
                "deny",
                "`touch x` is not an allowed read-only command",
            ),
            (
                ReadOnly,
                "echo hi > notes.txt",
                "deny",
                "redirects output into a file",
            ),
            (Supervised, "echo hi > notes.txt", "ask", "writes to a file"),
            (Supervised, "echo hi > /dev/null", "allow", "allowed"),
            (
                Full,
                "cat ~/.ssh/id_rsa",
                "deny",
                "forbidden path /home/user/.ssh",
            ),
            (
                Full,
                "cp --from=~/.aws/credentials x",
                "deny",
                "forbidden path /home/user/.aws",
            ),
            (
                Full,
                "echo x > /tmp/outside",
                "deny",
                "writes to /tmp/outside outside the workspace",
            ),
            (
                Full,
                "ls && rm -rf ~",
                "ask",
                "/home/user, which contains the workspace",
            ),
            (Full, "rm -rf ..", "ask", "which contains the workspace"),
            (
                Full,
                "cat /etc/shadow",
                "deny",
                "forbidden path /etc/shadow",
            ),
        ];
        for (mode, line, kind, fragment) in cases {
            let gate = shell_gate(*mode, line, &[]);
            let (got, reason) = summary(&gate);
            assert_eq!(got, *kind, "{mode:?} {line:?}: {reason}");
            assert!(
                reason.contains(fragment),
                "{mode:?} {line:?}: {reason:?} lacks {fragment:?}"
            );
        }
    }

    #[test]
    fn remembered_answers_cover_the_commands_they_were_given_for() {
        let allow = grants_for(
            "shell",
            &Plan {
                command: Some("cargo test -p x && make".into()),
                ..Plan::default()
            },
            true,
        );
        let scopes: Vec<&str> = allow.iter().map(|g| g.scope.as_str()).collect();
        assert_eq!(scopes, vec!["cargo test -p x", "make"]);
        let gate = shell_gate(Mode::Supervised, "make; cargo test -p x", &allow);
        assert_eq!(
            gate,
            Gate::Allow {
                reason: "every command is allowed by the shell rules or a remembered approval"
                    .into(),
                remembered: true
            }
        );
        // A different command is still asked about.
        assert_eq!(
            summary(&shell_gate(Mode::Supervised, "cargo test -p y", &allow)).0,
            "ask"
        );
        // A remembered rejection refuses the command wherever it appears.
        let reject = grants_for(
            "shell",
            &Plan {
                command: Some("make".into()),
                ..Plan::default()
            },
            false,
        );
        let gate = shell_gate(Mode::Full, "ls && make", &reject);
        assert_eq!(
            summary(&gate),
            ("deny", "`make` was rejected for the rest of the session")
        );
        // Deny rules beat remembered approvals.
        let sudo = vec![Grant {
            tool: "shell".into(),
            scope: "sudo ls".into(),
            allow: true,
        }];
        assert_eq!(summary(&shell_gate(Mode::Full, "sudo ls", &sudo)).0, "deny");
    }

    #[test]
    fn tools_are_judged_by_kind_mode_and_configured_rule() {
        let ws = PathBuf::from("/w");
        let b = PathBoundary::new(&ws, &[], &[], None);
        let plan = Plan::default();
        let check = |mode, tool, kind, grants: &[Grant]| {
            let gate = rules().check(&Check {
                mode,
                tool,
                kind,
                plan: &plan,
                grants,
                boundary: &b,
                cwd: &ws,
            });
            summary(&gate).0
        };
        use Mode::*;
        assert_eq!(check(ReadOnly, "read_file", ToolKind::Read, &[]), "allow");
        assert_eq!(check(ReadOnly, "edit_file", ToolKind::Edit, &[]), "deny");
        assert_eq!(check(Supervised, "edit_file", ToolKind::Edit, &[]), "ask");
        assert_eq!(check(Full, "edit_file", ToolKind::Edit, &[]), "allow");
        // Configured: write_file always asks, grep never runs.
        assert_eq!(check(Full, "write_file", ToolKind::Edit, &[]), "ask");
        assert_eq!(check(Full, "grep", ToolKind::Search, &[]), "deny");
        let always = [Grant {
            tool: "write_file".into(),
            scope: String::new(),
            allow: true,
        }];
        assert_eq!(
            check(Supervised, "write_file", ToolKind::Edit, &always),
            "allow"
        );
        // read_only wins over a remembered approval.
        assert_eq!(
            check(ReadOnly, "write_file", ToolKind::Edit, &always),
            "deny"
        );
    }
}
