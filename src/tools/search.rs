//! list_dir, glob and grep over the workspace.
//!
//! Walks use the `ignore` crate, the walker ripgrep uses, so `.gitignore`,
//! `.ignore` and hidden-file rules apply the way a developer expects; content
//! search uses ripgrep's `grep-searcher` and `grep-regex`. Every walk stays
//! inside what the path boundary allows: the root is resolved by
//! [`ToolContext::path`] when the call is planned, symlinks met during a
//! walk are never followed, and entries under a forbidden path are neither
//! reported nor entered. Results are sorted before they are cut to the caps,
//! so the same tree gives the same answer. This module knows the core's tool
//! seam and nothing of the faces.

use parking_lot::Mutex;
use std::fmt::Write as _;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use globset::{GlobBuilder, GlobMatcher};
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, MmapChoice, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch,
};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::tool::{Plan, Tool, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool};

/// The deepest `list_dir` goes; deeper listings drown the model in names.
const MAX_DEPTH: usize = 5;
/// The most context lines grep shows on each side of a match.
const MAX_CONTEXT: usize = 5;
/// The most matching lines a call may ask for, so one call cannot flood the
/// model's context (a configured default above it still applies).
const MAX_RESULTS_CEILING: usize = 2000;
/// A walk stops once it has this many times the cap: what is past the cap is
/// only counted, and past this point the count says "at least".
const EARLY_STOP_FACTOR: usize = 10;
/// ...but never before this many, so small caps still get exact counts.
const EARLY_STOP_MIN: usize = 1000;
/// ripgrep's own ceiling on search threads; more only contend for the disk.
const MAX_THREADS: usize = 12;

/// Caps on what the search tools return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchSettings {
    /// Matching lines grep shows when the call does not ask for another number.
    pub max_results: usize,
    /// Entries list_dir and glob show.
    pub max_entries: usize,
    /// Characters shown of one line; longer lines are cut around the match.
    pub max_line_chars: usize,
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            max_results: 200,
            max_entries: 1000,
            max_line_chars: 300,
        }
    }
}

/// The three search tools: `list_dir`, `glob` and `grep`.
pub fn tools(settings: SearchSettings) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListDir { settings }),
        Arc::new(Glob { settings }),
        Arc::new(Grep { settings }),
    ]
}

/// Lists a directory, optionally a few levels deep.
#[derive(Debug, Clone)]
pub struct ListDir {
    pub settings: SearchSettings,
}

/// Finds files and directories whose path matches a glob.
#[derive(Debug, Clone)]
pub struct Glob {
    pub settings: SearchSettings,
}

/// Searches file contents with a regex.
#[derive(Debug, Clone)]
pub struct Grep {
    pub settings: SearchSettings,
}

// ---------------------------------------------------------------------------
// Shared by the three tools

/// Which entries a walk shows beyond the default (visible, not ignored).
#[derive(Debug, Clone, Copy, Default)]
struct Visibility {
    hidden: bool,
    ignored: bool,
}

/// What a walk must never report or enter, beyond the ignore rules.
#[derive(Debug, Clone)]
struct Fence {
    /// The boundary's forbidden paths that lie inside the walk's root. A rule
    /// outside the root cannot cover anything the walk meets (a rule above
    /// the root would have refused the root itself), and leaving those out
    /// keeps the check per entry free in the usual workspace.
    forbidden: Arc<[PathBuf]>,
}

impl Fence {
    fn new(ctx: &ToolContext, root: &Path) -> Self {
        let forbidden = ctx
            .boundary
            .forbidden()
            .iter()
            .filter(|rule| rule.starts_with(root))
            .cloned()
            .collect();
        Self { forbidden }
    }

    fn admits(&self, entry: &DirEntry) -> bool {
        // Git's object store is never what a search is after, even when
        // hidden entries are asked for.
        if entry.depth() > 0
            && entry.file_name() == ".git"
            && entry.file_type().is_some_and(|t| t.is_dir())
        {
            return false;
        }
        !self
            .forbidden
            .iter()
            .any(|rule| entry.path().starts_with(rule))
    }
}

/// A walk over `root` with the ignore rules, the hidden rule and the fence.
fn walker(root: &Path, visibility: Visibility, fence: &Fence) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    let ignored = visibility.ignored;
    builder
        .hidden(!visibility.hidden)
        .ignore(!ignored)
        .git_ignore(!ignored)
        .git_global(!ignored)
        .git_exclude(!ignored)
        .parents(!ignored)
        // Inside a repository, .gitignore files count up to its root, as git
        // has it. A workspace that is no repository (yet) still means its
        // .gitignore files (ripgrep would need --no-require-git for that).
        .require_git(inside_git_repository(root))
        // The default, spelled out: a link could lead out of the boundary.
        .follow_links(false);
    let fence = fence.clone();
    builder.filter_entry(move |entry| fence.admits(entry));
    builder
}

fn inside_git_repository(root: &Path) -> bool {
    root.ancestors().any(|dir| dir.join(".git").exists())
}

fn search_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

/// Names paths the way the model sees them: relative to the workspace when
/// inside it. Owned, so walk threads can name what they find.
#[derive(Debug, Clone)]
struct PathNamer {
    /// The boundary's workspace, canonical like every resolved path.
    canonical: PathBuf,
    /// The workspace as the session spelled it, perhaps through a symlink.
    given: PathBuf,
}

impl PathNamer {
    fn new(ctx: &ToolContext) -> Self {
        Self {
            canonical: ctx.boundary.workspace().to_path_buf(),
            given: ctx.workspace.clone(),
        }
    }

    fn name(&self, path: &Path) -> String {
        for base in [&self.canonical, &self.given] {
            if let Ok(rel) = path.strip_prefix(base) {
                if rel.as_os_str().is_empty() {
                    return ".".to_owned();
                }
                return rel.display().to_string();
            }
        }
        path.display().to_string()
    }
}

fn shown_path(ctx: &ToolContext, path: &Path) -> String {
    PathNamer::new(ctx).name(path)
}

/// Sorts shown paths component by component (`a/b` before `a.rs`, as
/// `Path`'s order has it) with plain byte comparisons: `/` becomes the
/// smallest byte, which no path component holds.
fn sort_by_path<T>(items: &mut [T], shown: impl Fn(&T) -> &str) {
    items.sort_by_cached_key(|item| {
        shown(item)
            .bytes()
            .map(|byte| if byte == b'/' { 0 } else { byte })
            .collect::<Vec<u8>>()
    });
}

/// Where a call looks, for plan titles: "the workspace", "src/", "src/main.rs".
fn place(ctx: &ToolContext, root: &Path, is_dir: bool) -> String {
    match shown_path(ctx, root) {
        dot if dot == "." => "the workspace".to_owned(),
        dir if is_dir => format!("{dir}/"),
        file => file,
    }
}

/// Resolves the `path` argument inside the boundary; it must exist.
async fn resolve_root(ctx: &ToolContext, raw: Option<&str>) -> Result<(PathBuf, bool), ToolError> {
    let raw = raw.unwrap_or(".");
    let root = ctx.path(raw)?;
    match tokio::fs::metadata(&root).await {
        Ok(meta) => Ok((root, meta.is_dir())),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Err(ToolError::Failed(format!(
            "{} does not exist",
            shown_path(ctx, &root)
        ))),
        Err(err) => Err(ToolError::Failed(format!(
            "cannot read {}: {err}",
            shown_path(ctx, &root)
        ))),
    }
}

/// The root the plan resolved, checked again: a walker follows a root that
/// is a symlink, and one may have been put in its place since planning.
fn planned_root(plan: &Plan, ctx: &ToolContext) -> Result<PathBuf, ToolError> {
    let Some(root) = plan.reads.first() else {
        return Err(ToolError::Failed(
            "the plan names no path to search".to_owned(),
        ));
    };
    ctx.boundary.check(root)?;
    match std::fs::symlink_metadata(root) {
        Ok(meta) if meta.file_type().is_symlink() => Err(ToolError::Failed(format!(
            "{} became a symlink after the call was planned",
            shown_path(ctx, root)
        ))),
        Ok(_) => Ok(root.clone()),
        Err(err) => Err(ToolError::Failed(format!(
            "cannot read {}: {err}",
            shown_path(ctx, root)
        ))),
    }
}

/// Walks the root the plan resolved ([`planned_root`]) on the blocking
/// pool: `walk` gets the root, the [`Fence`] around it and the flag that
/// halts it. When the call is cancelled, the flag is raised (walks check it
/// per entry) and the call ends with `Cancelled` once the walk has let go.
async fn run_walk<T: Send + 'static>(
    plan: &Plan,
    ctx: &ToolContext,
    walk: impl FnOnce(PathBuf, Fence, Arc<AtomicBool>) -> T + Send + 'static,
) -> Result<T, ToolError> {
    let root = planned_root(plan, ctx)?;
    let fence = Fence::new(ctx, &root);
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let halt = Arc::new(AtomicBool::new(false));
    let mut task = tokio::task::spawn_blocking({
        let halt = Arc::clone(&halt);
        move || walk(root, fence, halt)
    });
    let joined = tokio::select! {
        joined = &mut task => joined,
        () = ctx.cancel.cancelled() => {
            halt.store(true, Ordering::Relaxed);
            // Wait so no walk outlives its call; it stops at the next entry.
            let _ = task.await;
            return Err(ToolError::Cancelled);
        }
    };
    joined.map_err(|err| ToolError::Failed(format!("the search stopped unexpectedly: {err}")))
}

/// Per-thread results of a parallel walk, handed over when the thread's
/// visitor is dropped, so threads never contend for a lock per result.
struct Gather<T> {
    local: Vec<T>,
    into: Arc<Mutex<Vec<T>>>,
}

impl<T> Gather<T> {
    fn new(into: &Arc<Mutex<Vec<T>>>) -> Self {
        Self {
            local: Vec::new(),
            into: Arc::clone(into),
        }
    }
}

impl<T> Drop for Gather<T> {
    fn drop(&mut self) {
        let mut all = self.into.lock();
        all.append(&mut self.local);
    }
}

fn take_all<T>(shared: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *shared.lock())
}

fn plural(count: usize, one: &str, many: &str) -> String {
    if count == 1 {
        format!("{count} {one}")
    } else {
        format!("{count} {many}")
    }
}

fn unreadable_note(out: &mut String, unreadable: usize) {
    if unreadable > 0 {
        let _ = write!(
            out,
            "\n({} could not be read)",
            plural(unreadable, "path", "paths")
        );
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(message.into())
}

// ---------------------------------------------------------------------------
// list_dir

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Directory to list, relative to the workspace (default ".")
    path: Option<String>,
    /// How many levels to show (default 1)
    #[schemars(range(min = 1, max = MAX_DEPTH))]
    depth: Option<usize>,
    /// Also list entries whose name starts with a dot
    include_hidden: Option<bool>,
    /// Also list entries ignored by .gitignore and .ignore
    include_ignored: Option<bool>,
}

struct ListRequest {
    depth: usize,
    visibility: Visibility,
}

impl ListArgs {
    fn request(&self) -> Result<ListRequest, ToolError> {
        let depth = self.depth.unwrap_or(1);
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(invalid(format!(
                "`depth` must be between 1 and {MAX_DEPTH}, got {depth}"
            )));
        }
        Ok(ListRequest {
            depth,
            visibility: Visibility {
                hidden: self.include_hidden.unwrap_or(false),
                ignored: self.include_ignored.unwrap_or(false),
            },
        })
    }
}

struct Listing {
    lines: Vec<String>,
    total: usize,
    unreadable: usize,
}

fn list_entries(
    root: &Path,
    request: &ListRequest,
    fence: &Fence,
    cap: usize,
    halt: &AtomicBool,
) -> Listing {
    let mut builder = walker(root, request.visibility, fence);
    builder
        .max_depth(Some(request.depth))
        .sort_by_file_name(|a, b| a.cmp(b));
    let mut listing = Listing {
        lines: Vec::new(),
        total: 0,
        unreadable: 0,
    };
    for result in builder.build() {
        if halt.load(Ordering::Relaxed) {
            break;
        }
        let entry = match result {
            Ok(entry) => entry,
            Err(_) => {
                listing.unreadable += 1;
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        listing.total += 1;
        if listing.lines.len() < cap {
            listing.lines.push(list_line(&entry));
        }
    }
    listing
}

fn list_line(entry: &DirEntry) -> String {
    let indent = "  ".repeat(entry.depth().saturating_sub(1));
    let name = entry.file_name().to_string_lossy();
    match entry.file_type() {
        Some(t) if t.is_dir() => format!("{indent}{name}/"),
        Some(t) if t.is_symlink() => format!("{indent}{name} (symlink)"),
        Some(t) if t.is_file() => match entry.metadata() {
            Ok(meta) => format!("{indent}{name} ({})", human_size(meta.len())),
            Err(_) => format!("{indent}{name}"),
        },
        _ => format!("{indent}{name}"),
    }
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

impl TypedTool for ListDir {
    type Args = ListArgs;
    const NAME: &'static str = "list_dir";
    const KIND: ToolKind = ToolKind::Read;

    fn description(&self) -> String {
        "List a directory of the workspace. Entries are sorted by name, \
         directories end with `/`, files show their size. Hidden entries and \
         entries ignored by .gitignore/.ignore are left out unless asked for."
            .to_owned()
    }

    async fn plan(&self, args: &ListArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        args.request()?;
        let (root, is_dir) = resolve_root(ctx, args.path.as_deref()).await?;
        if !is_dir {
            return Err(ToolError::Failed(format!(
                "{} is not a directory",
                shown_path(ctx, &root)
            )));
        }
        Ok(Plan {
            title: format!("List {}", place(ctx, &root, true)),
            reads: vec![root],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &ListArgs,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = args.request()?;
        let cap = self.settings.max_entries;
        let listing = run_walk(plan, ctx, move |root, fence, halt| {
            list_entries(&root, &request, &fence, cap, &halt)
        })
        .await?;
        if listing.lines.is_empty() {
            let mut out = "No entries".to_owned();
            unreadable_note(&mut out, listing.unreadable);
            return Ok(ToolOutput::text(out));
        }
        let mut out = listing.lines.join("\n");
        let more = listing.total - listing.lines.len();
        if more > 0 {
            let _ = write!(
                out,
                "\n{} not shown; list a subdirectory or use a smaller depth",
                plural(more, "more entry", "more entries")
            );
        }
        unreadable_note(&mut out, listing.unreadable);
        Ok(ToolOutput::text(out))
    }
}

// ---------------------------------------------------------------------------
// glob

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob to match, e.g. "src/**/*.rs"
    pattern: String,
    /// Directory to search, relative to the workspace (default ".")
    path: Option<String>,
    /// Also match paths with a component starting with a dot (on by default
    /// when the pattern names one)
    include_hidden: Option<bool>,
    /// Also match paths ignored by .gitignore and .ignore
    include_ignored: Option<bool>,
}

struct GlobRequest {
    matcher: GlobMatcher,
    /// An absolute pattern is matched against absolute paths, a relative one
    /// against paths relative to the searched directory.
    absolute: bool,
    visibility: Visibility,
}

impl GlobArgs {
    fn request(&self) -> Result<GlobRequest, ToolError> {
        let pattern = self.pattern.trim_start_matches("./");
        if pattern.is_empty() {
            return Err(invalid("`pattern` is empty"));
        }
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|err| invalid(format!("`pattern` is not a valid glob: {err}")))?
            .compile_matcher();
        // A pattern that names a dot-directory or dot-file asks for it; it
        // would otherwise never match.
        let names_hidden = pattern
            .split('/')
            .any(|part| part.starts_with('.') && part != "." && part != "..");
        Ok(GlobRequest {
            matcher,
            absolute: pattern.starts_with('/'),
            visibility: Visibility {
                hidden: self.include_hidden.unwrap_or(names_hidden),
                ignored: self.include_ignored.unwrap_or(false),
            },
        })
    }
}

struct GlobFound {
    /// Matching paths, directories flagged.
    paths: Vec<(PathBuf, bool)>,
    /// How many matched, counting those past the cap.
    total: usize,
    stopped_early: bool,
    unreadable: usize,
}

fn glob_walk(
    root: &Path,
    request: &GlobRequest,
    fence: &Fence,
    stop_after: usize,
    halt: &AtomicBool,
) -> GlobFound {
    let results: Arc<Mutex<Vec<(PathBuf, bool)>>> = Arc::default();
    let total = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    let unreadable = AtomicUsize::new(0);
    let mut builder = walker(root, request.visibility, fence);
    builder.threads(search_threads());
    builder.build_parallel().run(|| {
        let mut gather = Gather::new(&results);
        let (total, stopped, unreadable) = (&total, &stopped, &unreadable);
        Box::new(move |result| {
            if halt.load(Ordering::Relaxed) || stopped.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let entry = match result {
                Ok(entry) => entry,
                Err(_) => {
                    unreadable.fetch_add(1, Ordering::Relaxed);
                    return WalkState::Continue;
                }
            };
            let is_dir = match entry.file_type() {
                Some(t) if t.is_dir() => true,
                Some(t) if t.is_file() => false,
                _ => return WalkState::Continue,
            };
            if entry.depth() == 0 {
                return WalkState::Continue;
            }
            let target = if request.absolute {
                entry.path()
            } else {
                entry.path().strip_prefix(root).unwrap_or(entry.path())
            };
            if !request.matcher.is_match(target) {
                return WalkState::Continue;
            }
            if total.fetch_add(1, Ordering::Relaxed) >= stop_after {
                stopped.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            gather.local.push((entry.into_path(), is_dir));
            WalkState::Continue
        })
    });
    let paths = take_all(&results);
    GlobFound {
        paths,
        total: total.load(Ordering::Relaxed),
        stopped_early: stopped.load(Ordering::Relaxed),
        unreadable: unreadable.load(Ordering::Relaxed),
    }
}

impl TypedTool for Glob {
    type Args = GlobArgs;
    const NAME: &'static str = "glob";
    const KIND: ToolKind = ToolKind::Search;

    fn description(&self) -> String {
        "Find files and directories whose path matches a glob, e.g. \
         `src/**/*.rs` or `**/Cargo.toml`. Patterns are relative to `path`; `*` \
         does not cross `/`, `**` does. Matches are sorted; directories end with \
         `/`. Hidden and .gitignore'd paths are left out unless asked for."
            .to_owned()
    }

    async fn plan(&self, args: &GlobArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        args.request()?;
        let (root, is_dir) = resolve_root(ctx, args.path.as_deref()).await?;
        Ok(Plan {
            title: format!("Find \"{}\" in {}", args.pattern, place(ctx, &root, is_dir)),
            reads: vec![root],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &GlobArgs,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = args.request()?;
        let cap = self.settings.max_entries;
        let stop_after = cap.saturating_mul(EARLY_STOP_FACTOR).max(EARLY_STOP_MIN);
        let found = run_walk(plan, ctx, move |root, fence, halt| {
            glob_walk(&root, &request, &fence, stop_after, &halt)
        })
        .await?;
        if found.paths.is_empty() {
            let mut out = "No matches".to_owned();
            unreadable_note(&mut out, found.unreadable);
            return Ok(ToolOutput::text(out));
        }
        let namer = PathNamer::new(ctx);
        let mut named: Vec<(String, bool)> = found
            .paths
            .iter()
            .map(|(path, is_dir)| (namer.name(path), *is_dir))
            .collect();
        sort_by_path(&mut named, |(name, _)| name);
        let mut out = String::new();
        for (name, is_dir) in named.iter().take(cap) {
            out.push_str(name);
            if *is_dir {
                out.push('/');
            }
            out.push('\n');
        }
        out.pop();
        let more = found.total - found.paths.len().min(cap);
        if more > 0 {
            let at_least = if found.stopped_early { "at least " } else { "" };
            let _ = write!(
                out,
                "\n{at_least}{} not shown; narrow the pattern or path",
                plural(more, "more match", "more matches")
            );
        }
        unreadable_note(&mut out, found.unreadable);
        Ok(ToolOutput::text(out))
    }
}

// ---------------------------------------------------------------------------
// grep

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regex to search for (a literal string with fixed_strings)
    pattern: String,
    /// File or directory to search, relative to the workspace (default ".")
    path: Option<String>,
    /// Only search files matching this glob, e.g. "*.rs" (file name) or
    /// "src/**/*.ts" (path)
    glob: Option<String>,
    /// Ignore case
    case_insensitive: Option<bool>,
    /// Treat the pattern as a literal string, not a regex
    fixed_strings: Option<bool>,
    /// Lines of context before and after each match (default 0)
    #[schemars(range(min = 0, max = MAX_CONTEXT))]
    context: Option<usize>,
    // Its description, default and most are the settings' (`Grep::configured`).
    #[schemars(range(min = 1))]
    max_results: Option<usize>,
    /// Also search files and directories whose name starts with a dot
    include_hidden: Option<bool>,
    /// Also search files ignored by .gitignore and .ignore
    include_ignored: Option<bool>,
}

/// The `glob` argument of grep: which files are searched.
struct FileFilter {
    matcher: GlobMatcher,
    /// A glob with a `/` is matched against the path below the searched
    /// directory, one without against the file name (as in .gitignore).
    whole_path: bool,
}

impl FileFilter {
    fn new(glob: &str) -> Result<Self, ToolError> {
        let glob = glob.trim_start_matches("./");
        if glob.is_empty() {
            return Err(invalid("`glob` is empty"));
        }
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|err| invalid(format!("`glob` is not a valid glob: {err}")))?
            .compile_matcher();
        Ok(Self {
            matcher,
            whole_path: glob.contains('/'),
        })
    }

    fn admits(&self, root: &Path, path: &Path) -> bool {
        if self.whole_path {
            self.matcher
                .is_match(path.strip_prefix(root).unwrap_or(path))
        } else {
            path.file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

/// A grep call's arguments, checked.
struct GrepRequest {
    matcher: RegexMatcher,
    filter: Option<FileFilter>,
    context: usize,
    cap: usize,
    visibility: Visibility,
}

impl GrepArgs {
    fn request(&self, settings: &SearchSettings) -> Result<GrepRequest, ToolError> {
        if self.pattern.is_empty() {
            return Err(invalid("`pattern` is empty"));
        }
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(self.case_insensitive.unwrap_or(false))
            .fixed_strings(self.fixed_strings.unwrap_or(false))
            // Matches never span lines; this lets the searcher look for
            // candidate lines with the regex's literal fast path, as ripgrep
            // does, and refuses patterns that need a `\n`.
            .line_terminator(Some(b'\n'))
            .build(&self.pattern)
            .map_err(|err| invalid(format!("`pattern` is not a valid regex: {err}")))?;
        let filter = self.glob.as_deref().map(FileFilter::new).transpose()?;
        let context = self.context.unwrap_or(0);
        if context > MAX_CONTEXT {
            return Err(invalid(format!(
                "`context` must be between 0 and {MAX_CONTEXT}, got {context}"
            )));
        }
        let cap = match self.max_results {
            None => settings.max_results,
            Some(0) => return Err(invalid("`max_results` must be at least 1")),
            Some(n) => n.min(MAX_RESULTS_CEILING.max(settings.max_results)),
        };
        Ok(GrepRequest {
            matcher,
            filter,
            context,
            cap,
            visibility: Visibility {
                hidden: self.include_hidden.unwrap_or(false),
                ignored: self.include_ignored.unwrap_or(false),
            },
        })
    }
}

/// One grep walk: what it looks for and what it has found so far.
struct GrepRun {
    root: PathBuf,
    namer: PathNamer,
    request: GrepRequest,
    max_line_chars: usize,
    /// Matching lines found in finished files; the walk stops past this.
    stop_after: usize,
    matched: AtomicUsize,
    /// Raised when the walk stopped at `stop_after`, so counts are lower bounds.
    stopped: AtomicBool,
    /// Raised when the call is cancelled.
    halt: Arc<AtomicBool>,
    unreadable: AtomicUsize,
    files: Arc<Mutex<Vec<FileHits>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    Match,
    Context,
    /// A gap between two groups of context.
    Break,
}

#[derive(Debug, Clone)]
struct HitLine {
    kind: LineKind,
    number: u64,
    /// The shown part of the line, in `FileHits::text`.
    text: Range<usize>,
    cut_front: bool,
    cut_back: bool,
}

/// The lines one file contributed. Their text shares one buffer so a match
/// costs no allocation of its own.
#[derive(Debug, Default)]
struct FileHits {
    /// The file's path as the model sees it, named on the walk's threads.
    shown: String,
    text: Vec<u8>,
    lines: Vec<HitLine>,
    matches: usize,
    binary: bool,
}

impl FileHits {
    fn clear(&mut self) {
        self.text.clear();
        self.lines.clear();
        self.matches = 0;
        self.binary = false;
    }

    fn push(
        &mut self,
        kind: LineKind,
        number: u64,
        line: &[u8],
        focus: Option<&RegexMatcher>,
        max_chars: usize,
    ) {
        let line = trim_line_end(line);
        let shown = if line.len() <= max_chars {
            0..line.len()
        } else {
            // Only long lines pay for finding the match again.
            let at = focus
                .and_then(|matcher| matcher.find(line).ok().flatten())
                .map_or(0, |m| m.start());
            window(line, at, max_chars)
        };
        let start = self.text.len();
        self.text.extend_from_slice(&line[shown.clone()]);
        self.lines.push(HitLine {
            kind,
            number,
            text: start..self.text.len(),
            cut_front: shown.start > 0,
            cut_back: shown.end < line.len(),
        });
    }

    fn push_break(&mut self) {
        let at = self.text.len();
        self.lines.push(HitLine {
            kind: LineKind::Break,
            number: 0,
            text: at..at,
            cut_front: false,
            cut_back: false,
        });
    }
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The bytes of a long line worth keeping: from the start when the match is
/// near it, else from a little before the match; enough bytes for
/// `max_chars` characters of any width.
fn window(line: &[u8], at: usize, max_chars: usize) -> Range<usize> {
    let mut start = if at < max_chars.saturating_mul(3) / 4 {
        0
    } else {
        at.saturating_sub(max_chars / 4)
    };
    // Start on a character, not inside one.
    while start < line.len() && line[start] & 0xC0 == 0x80 {
        start += 1;
    }
    let end = line
        .len()
        .min(start.saturating_add(max_chars.saturating_mul(4)));
    start..end
}

/// Appends a kept line, cut to `max_chars` characters, marking cuts with `…`.
fn push_line_text(out: &mut String, bytes: &[u8], line: &HitLine, max_chars: usize) {
    let text = String::from_utf8_lossy(bytes);
    if line.cut_front {
        out.push('…');
    }
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => {
            out.push_str(&text[..end]);
            out.push('…');
        }
        None => {
            out.push_str(&text);
            if line.cut_back {
                out.push('…');
            }
        }
    }
}

/// Collects one file's lines while the searcher reads it.
struct Collect<'a> {
    hits: &'a mut FileHits,
    run: &'a GrepRun,
    matcher: &'a RegexMatcher,
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = found.line_number().unwrap_or(0);
        for (offset, line) in (0u64..).zip(found.lines()) {
            self.hits.push(
                LineKind::Match,
                first + offset,
                line,
                Some(self.matcher),
                self.run.max_line_chars,
            );
            self.hits.matches += 1;
        }
        // One file alone can be far past the cap (a log, a lockfile).
        let seen = self.hits.matches + self.run.matched.load(Ordering::Relaxed);
        Ok(seen <= self.run.stop_after && !self.run.halt.load(Ordering::Relaxed))
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.hits.push(
            LineKind::Context,
            context.line_number().unwrap_or(0),
            context.bytes(),
            None,
            self.run.max_line_chars,
        );
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.hits.push_break();
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        // A file with a NUL byte is not text: none of it is reported, not
        // even lines matched before the NUL was seen.
        self.hits.binary = true;
        Ok(false)
    }
}

/// One search thread: its own searcher, matcher and buffers.
struct GrepVisitor {
    run: Arc<GrepRun>,
    searcher: Searcher,
    matcher: RegexMatcher,
    hits: FileHits,
    found: Gather<FileHits>,
}

impl ParallelVisitor for GrepVisitor {
    fn visit(&mut self, result: Result<DirEntry, ignore::Error>) -> WalkState {
        let run = &*self.run;
        if run.halt.load(Ordering::Relaxed) || run.stopped.load(Ordering::Relaxed) {
            return WalkState::Quit;
        }
        let entry = match result {
            Ok(entry) => entry,
            Err(_) => {
                run.unreadable.fetch_add(1, Ordering::Relaxed);
                return WalkState::Continue;
            }
        };
        // Directories are walked, not searched; symlinks are not followed.
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        if entry.depth() > 0
            && let Some(filter) = &run.request.filter
            && !filter.admits(&run.root, entry.path())
        {
            return WalkState::Continue;
        }
        self.hits.clear();
        let mut sink = Collect {
            hits: &mut self.hits,
            run,
            matcher: &self.matcher,
        };
        if self
            .searcher
            .search_path(&self.matcher, entry.path(), &mut sink)
            .is_err()
        {
            run.unreadable.fetch_add(1, Ordering::Relaxed);
            return WalkState::Continue;
        }
        if self.hits.binary || self.hits.matches == 0 {
            return WalkState::Continue;
        }
        let matches = self.hits.matches;
        let mut hits = std::mem::take(&mut self.hits);
        hits.shown = run.namer.name(entry.path());
        self.found.local.push(hits);
        let total = run.matched.fetch_add(matches, Ordering::Relaxed) + matches;
        if total > run.stop_after {
            run.stopped.store(true, Ordering::Relaxed);
            return WalkState::Quit;
        }
        WalkState::Continue
    }
}

struct GrepVisitors {
    run: Arc<GrepRun>,
    searcher: Searcher,
}

impl<'s> ParallelVisitorBuilder<'s> for GrepVisitors {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(GrepVisitor {
            run: Arc::clone(&self.run),
            searcher: self.searcher.clone(),
            // Each thread gets its own matcher so no regex cache is shared.
            matcher: self.run.request.matcher.clone(),
            hits: FileHits::default(),
            found: Gather::new(&self.run.files),
        })
    }
}

/// What a grep walk found, unsorted.
struct GrepFound {
    files: Vec<FileHits>,
    matched: usize,
    stopped_early: bool,
    unreadable: usize,
}

fn grep_walk(run: GrepRun, fence: &Fence) -> GrepFound {
    let searcher = SearcherBuilder::new()
        // NUL means binary, and the file is dropped (ripgrep's rule for files
        // it finds while walking).
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(true)
        .before_context(run.request.context)
        .after_context(run.request.context)
        // ripgrep maps files only when given a handful of explicit paths;
        // for a walk over many small files reading is faster.
        .memory_map(MmapChoice::never())
        .build();
    let mut builder = walker(&run.root, run.request.visibility, fence);
    builder.threads(search_threads());
    let run = Arc::new(run);
    builder.build_parallel().visit(&mut GrepVisitors {
        run: Arc::clone(&run),
        searcher,
    });
    GrepFound {
        files: take_all(&run.files),
        matched: run.matched.load(Ordering::Relaxed),
        stopped_early: run.stopped.load(Ordering::Relaxed),
        unreadable: run.unreadable.load(Ordering::Relaxed),
    }
}

/// `path:line:text` for matches, `path-line-text` for context, `--` between
/// groups (ripgrep's layout), cut to `cap` matching lines with a note.
fn render_grep(mut found: GrepFound, cap: usize, context: usize, max_line_chars: usize) -> String {
    sort_by_path(&mut found.files, |file| &file.shown);
    let mut out = String::new();
    let mut shown = 0usize;
    let mut files_cut = 0usize;
    for file in &found.files {
        if shown >= cap {
            files_cut += 1;
            continue;
        }
        let path = &file.shown;
        if context > 0 && !out.is_empty() {
            out.push_str("--\n");
        }
        for line in &file.lines {
            if shown >= cap && line.kind != LineKind::Context {
                // The cap fell inside this file; the context right after the
                // last shown match was kept, the rest is not.
                files_cut += 1;
                break;
            }
            let separator = match line.kind {
                LineKind::Match => {
                    shown += 1;
                    ':'
                }
                LineKind::Context => '-',
                LineKind::Break => {
                    out.push_str("--\n");
                    continue;
                }
            };
            let _ = write!(out, "{path}{separator}{}{separator}", line.number);
            push_line_text(
                &mut out,
                &file.text[line.text.clone()],
                line,
                max_line_chars,
            );
            out.push('\n');
        }
    }
    out.pop();
    let more = found.matched.saturating_sub(shown);
    if more > 0 {
        let at_least = if found.stopped_early { "at least " } else { "" };
        let _ = write!(
            out,
            "\n{at_least}{} in {at_least}{} not shown; narrow the pattern or path",
            plural(more, "more match", "more matches"),
            plural(files_cut, "file", "files")
        );
    }
    unreadable_note(&mut out, found.unreadable);
    out
}

impl TypedTool for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";
    const KIND: ToolKind = ToolKind::Search;

    fn description(&self) -> String {
        "Search file contents in the workspace with a regex (Rust regex \
         syntax, one line at a time). Prints `path:line:text` for matching lines \
         (`path-line-text` for context lines), sorted by path and line. Hidden, \
         binary and .gitignore'd files are skipped unless asked for."
            .to_owned()
    }

    /// The default and the most of `max_results`, which are the settings'.
    fn configured(&self) -> Vec<(&'static str, serde_json::Value)> {
        let default = self.settings.max_results;
        vec![(
            "max_results",
            serde_json::json!({
                "maximum": MAX_RESULTS_CEILING.max(default),
                "description": format!("Most matching lines to show (default {default})"),
            }),
        )]
    }

    async fn plan(&self, args: &GrepArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        args.request(&self.settings)?;
        let (root, is_dir) = resolve_root(ctx, args.path.as_deref()).await?;
        Ok(Plan {
            title: format!(
                "Search \"{}\" in {}",
                args.pattern,
                place(ctx, &root, is_dir)
            ),
            reads: vec![root],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &GrepArgs,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = args.request(&self.settings)?;
        let (cap, context) = (request.cap, request.context);
        let namer = PathNamer::new(ctx);
        let max_line_chars = self.settings.max_line_chars;
        // Sorting and rendering tens of thousands of lines is work too;
        // it stays off the runtime's threads with the walk.
        let text = run_walk(plan, ctx, move |root, fence, halt| {
            let run = GrepRun {
                root,
                namer,
                request,
                max_line_chars,
                stop_after: cap.saturating_mul(EARLY_STOP_FACTOR).max(EARLY_STOP_MIN),
                matched: AtomicUsize::new(0),
                stopped: AtomicBool::new(false),
                halt,
                unreadable: AtomicUsize::new(0),
                files: Arc::default(),
            };
            let found = grep_walk(run, &fence);
            if found.files.is_empty() {
                let mut out = "No matches".to_owned();
                unreadable_note(&mut out, found.unreadable);
                return out;
            }
            render_grep(found, cap, context, max_line_chars)
        })
        .await?;
        Ok(ToolOutput::text(text))
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::core::ids::SessionId;
    use crate::core::policy::{PathBoundary, PathError};
    use crate::core::tool::Files;

    /// A temporary workspace; `ws` is canonical, `outside` is beside it.
    struct Fixture {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(&outside).unwrap();
        Fixture {
            _dir: dir,
            ws,
            outside,
        }
    }

    fn write(root: &Path, rel: &str, content: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn context_with(ws: &Path, forbidden: &[String]) -> ToolContext {
        ToolContext {
            session_id: SessionId::generate(),
            workspace: ws.to_path_buf(),
            boundary: Arc::new(PathBoundary::new(ws, &[], forbidden, None)),
            files: Files::local(SessionId::generate()),
            cancel: CancellationToken::new(),
            progress: crate::core::tool::Progress::none(),
            terminal: None,
            memory: None,
            call_id: None,
            run_id: None,
            skills: None,
        }
    }

    fn context(ws: &Path) -> ToolContext {
        context_with(ws, &[])
    }

    async fn call_with(
        tool: &dyn Tool,
        ctx: &ToolContext,
        arguments: Value,
    ) -> Result<String, ToolError> {
        let plan = tool.plan(&arguments, ctx).await?;
        tool.execute(&arguments, &plan, ctx)
            .await
            .map(|output| output.text)
    }

    async fn list(ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let tool = ListDir {
            settings: SearchSettings::default(),
        };
        call_with(&tool, ctx, arguments).await
    }

    async fn glob(ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let tool = Glob {
            settings: SearchSettings::default(),
        };
        call_with(&tool, ctx, arguments).await
    }

    async fn grep(ctx: &ToolContext, arguments: Value) -> Result<String, ToolError> {
        let tool = Grep {
            settings: SearchSettings::default(),
        };
        call_with(&tool, ctx, arguments).await
    }

    /// A small project: sources, an ignored build dir and log, hidden files.
    fn project(ws: &Path) {
        write(ws, ".gitignore", "target/\n*.log\n");
        write(ws, "README.md", "hello needle\n");
        write(ws, "src/main.rs", "fn main() {\n    needle();\n}\n");
        write(ws, "src/lib.rs", "pub fn needle() {}\n");
        write(ws, "src/util/mod.rs", "// no match here\n");
        write(ws, "target/debug/out.rs", "needle in the build dir\n");
        write(ws, "run.log", "needle in a log\n");
        write(ws, ".env", "needle=hidden\n");
        write(ws, ".config/settings.toml", "needle = true\n");
    }

    #[test]
    fn tools_are_the_three_with_their_kinds() {
        let all = tools(SearchSettings::default());
        let described: Vec<(String, ToolKind)> = all
            .iter()
            .map(|tool| (tool.spec().name, tool.kind()))
            .collect();
        assert_eq!(
            described,
            vec![
                ("list_dir".to_owned(), ToolKind::Read),
                ("glob".to_owned(), ToolKind::Search),
                ("grep".to_owned(), ToolKind::Search),
            ]
        );
    }

    #[tokio::test]
    async fn list_dir_sorts_marks_directories_and_skips_hidden_and_ignored() {
        let f = fixture();
        project(&f.ws);
        let ctx = context(&f.ws);
        assert_eq!(
            list(&ctx, json!({})).await.unwrap(),
            "README.md (13 B)\nsrc/"
        );
        assert_eq!(
            list(&ctx, json!({"depth": 3})).await.unwrap(),
            "README.md (13 B)\nsrc/\n  lib.rs (19 B)\n  main.rs (28 B)\n  util/\n    mod.rs (17 B)"
        );
        assert_eq!(
            list(
                &ctx,
                json!({"include_hidden": true, "include_ignored": true})
            )
            .await
            .unwrap(),
            ".config/\n.env (14 B)\n.gitignore (14 B)\nREADME.md (13 B)\nrun.log (16 B)\nsrc/\ntarget/"
        );
        assert_eq!(
            list(&ctx, json!({"path": "src/util"})).await.unwrap(),
            "mod.rs (17 B)"
        );
    }

    #[tokio::test]
    async fn gitignore_files_above_a_repository_do_not_count() {
        let f = fixture();
        // The fixture's base directory holds both `ws` and `outside`.
        let base = f.ws.parent().unwrap();
        write(base, ".gitignore", "*.md\n");
        write(&f.ws, "README.md", "needle\n");
        write(&f.ws, "notes.txt", "needle\n");
        let ctx = context(&f.ws);
        // No repository anywhere: every .gitignore above counts.
        assert_eq!(list(&ctx, json!({})).await.unwrap(), "notes.txt (7 B)");
        // The workspace is a repository: git stops at its root, and so do we.
        fs::create_dir(f.ws.join(".git")).unwrap();
        assert_eq!(
            list(&ctx, json!({})).await.unwrap(),
            "README.md (7 B)\nnotes.txt (7 B)"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle"})).await.unwrap(),
            "README.md:1:needle\nnotes.txt:1:needle"
        );
    }

    #[tokio::test]
    async fn list_dir_plans_a_title_and_refuses_files_and_bad_depths() {
        let f = fixture();
        project(&f.ws);
        let ctx = context(&f.ws);
        let tool: &dyn Tool = &ListDir {
            settings: SearchSettings::default(),
        };
        let plan = tool.plan(&json!({"path": "src"}), &ctx).await.unwrap();
        assert_eq!(plan.title, "List src/");
        assert_eq!(plan.reads, vec![f.ws.join("src")]);
        let plan = tool.plan(&json!({}), &ctx).await.unwrap();
        assert_eq!(plan.title, "List the workspace");
        assert_eq!(
            list(&ctx, json!({"path": "README.md"})).await,
            Err(ToolError::Failed("README.md is not a directory".to_owned()))
        );
        assert_eq!(
            list(&ctx, json!({"depth": 9})).await,
            Err(ToolError::InvalidArguments(
                "`depth` must be between 1 and 5, got 9".to_owned()
            ))
        );
        assert_eq!(
            list(&ctx, json!({"path": "nope"})).await,
            Err(ToolError::Failed("nope does not exist".to_owned()))
        );
    }

    #[tokio::test]
    async fn list_dir_caps_entries_with_a_note() {
        let f = fixture();
        for name in ["a", "b", "c", "d", "e"] {
            write(&f.ws, name, "");
        }
        let ctx = context(&f.ws);
        let tool = ListDir {
            settings: SearchSettings {
                max_entries: 3,
                ..SearchSettings::default()
            },
        };
        assert_eq!(
            call_with(&tool, &ctx, json!({})).await.unwrap(),
            "a (0 B)\nb (0 B)\nc (0 B)\n2 more entries not shown; list a subdirectory or use a smaller depth"
        );
    }

    #[tokio::test]
    async fn glob_matches_sorted_paths_and_respects_ignores() {
        let f = fixture();
        project(&f.ws);
        let ctx = context(&f.ws);
        assert_eq!(
            glob(&ctx, json!({"pattern": "src/**/*.rs"})).await.unwrap(),
            "src/lib.rs\nsrc/main.rs\nsrc/util/mod.rs"
        );
        // `*` stays in one directory; `**` crosses them.
        assert_eq!(
            glob(&ctx, json!({"pattern": "*.rs"})).await.unwrap(),
            "No matches"
        );
        assert_eq!(
            glob(&ctx, json!({"pattern": "**/*.rs", "path": "src/util"}))
                .await
                .unwrap(),
            "src/util/mod.rs"
        );
        assert_eq!(
            glob(&ctx, json!({"pattern": "**/*.rs", "include_ignored": true}))
                .await
                .unwrap(),
            "src/lib.rs\nsrc/main.rs\nsrc/util/mod.rs\ntarget/debug/out.rs"
        );
        assert_eq!(
            glob(&ctx, json!({"pattern": "**/util"})).await.unwrap(),
            "src/util/"
        );
        // Naming a dot-file asks for hidden files.
        assert_eq!(
            glob(&ctx, json!({"pattern": ".env"})).await.unwrap(),
            ".env"
        );
        assert!(matches!(
            glob(&ctx, json!({"pattern": "src/[a"})).await,
            Err(ToolError::InvalidArguments(message)) if message.starts_with("`pattern` is not a valid glob")
        ));
    }

    #[tokio::test]
    async fn glob_caps_matches_with_a_note() {
        let f = fixture();
        for index in 0..7 {
            write(&f.ws, &format!("f{index}.txt"), "");
        }
        let ctx = context(&f.ws);
        let tool = Glob {
            settings: SearchSettings {
                max_entries: 2,
                ..SearchSettings::default()
            },
        };
        assert_eq!(
            call_with(&tool, &ctx, json!({"pattern": "*.txt"}))
                .await
                .unwrap(),
            "f0.txt\nf1.txt\n5 more matches not shown; narrow the pattern or path"
        );
    }

    #[tokio::test]
    async fn grep_output_is_relative_sorted_and_skips_hidden_and_ignored() {
        let f = fixture();
        project(&f.ws);
        let ctx = context(&f.ws);
        let expected = "README.md:1:hello needle\nsrc/lib.rs:1:pub fn needle() {}\nsrc/main.rs:2:    needle();";
        for _ in 0..5 {
            assert_eq!(
                grep(&ctx, json!({"pattern": "needle"})).await.unwrap(),
                expected
            );
        }
        assert_eq!(
            grep(
                &ctx,
                json!({"pattern": "needle", "include_hidden": true, "include_ignored": true})
            )
            .await
            .unwrap(),
            ".config/settings.toml:1:needle = true\n.env:1:needle=hidden\nREADME.md:1:hello needle\nrun.log:1:needle in a log\nsrc/lib.rs:1:pub fn needle() {}\nsrc/main.rs:2:    needle();\ntarget/debug/out.rs:1:needle in the build dir"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle", "path": "src"}))
                .await
                .unwrap(),
            "src/lib.rs:1:pub fn needle() {}\nsrc/main.rs:2:    needle();"
        );
        // A single file, even an ignored one, is searched when named.
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle", "path": "run.log"}))
                .await
                .unwrap(),
            "run.log:1:needle in a log"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle", "glob": "*.rs"}))
                .await
                .unwrap(),
            "src/lib.rs:1:pub fn needle() {}\nsrc/main.rs:2:    needle();"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle", "glob": "src/m*.rs"}))
                .await
                .unwrap(),
            "src/main.rs:2:    needle();"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "haystack"})).await.unwrap(),
            "No matches"
        );
    }

    #[tokio::test]
    async fn grep_plans_a_title_and_the_path_it_reads() {
        let f = fixture();
        project(&f.ws);
        let ctx = context(&f.ws);
        let tool: &dyn Tool = &Grep {
            settings: SearchSettings::default(),
        };
        let plan = tool
            .plan(&json!({"pattern": "fn \\w+", "path": "src"}), &ctx)
            .await
            .unwrap();
        assert_eq!(plan.title, "Search \"fn \\w+\" in src/");
        assert_eq!(plan.reads, vec![f.ws.join("src")]);
        let plan = tool.plan(&json!({"pattern": "x"}), &ctx).await.unwrap();
        assert_eq!(plan.title, "Search \"x\" in the workspace");
    }

    #[tokio::test]
    async fn grep_caps_matches_with_a_note() {
        let f = fixture();
        write(&f.ws, "a.txt", "hit 1\nhit 2\nhit 3\n");
        write(&f.ws, "b.txt", "hit 4\nhit 5\n");
        write(&f.ws, "c.txt", "hit 6\n");
        let ctx = context(&f.ws);
        assert_eq!(
            grep(&ctx, json!({"pattern": "hit", "max_results": 2}))
                .await
                .unwrap(),
            "a.txt:1:hit 1\na.txt:2:hit 2\n4 more matches in 3 files not shown; narrow the pattern or path"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "hit", "max_results": 5}))
                .await
                .unwrap(),
            "a.txt:1:hit 1\na.txt:2:hit 2\na.txt:3:hit 3\nb.txt:1:hit 4\nb.txt:2:hit 5\n1 more match in 1 file not shown; narrow the pattern or path"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "hit", "max_results": 0})).await,
            Err(ToolError::InvalidArguments(
                "`max_results` must be at least 1".to_owned()
            ))
        );
    }

    #[tokio::test]
    async fn grep_stops_early_far_past_the_cap_and_says_so() {
        let f = fixture();
        let many: String = (0..3000).map(|n| format!("hit {n}\n")).collect();
        write(&f.ws, "big.txt", &many);
        write(&f.ws, "small.txt", "hit\n");
        let ctx = context(&f.ws);
        let tool = Grep {
            settings: SearchSettings {
                max_results: 1,
                ..SearchSettings::default()
            },
        };
        let text = call_with(&tool, &ctx, json!({"pattern": "hit"}))
            .await
            .unwrap();
        let (first, note) = text.split_once('\n').unwrap();
        assert!(
            first.ends_with(":1:hit 0") || first == "small.txt:1:hit",
            "{text}"
        );
        assert!(
            note.starts_with("at least ")
                && note.ends_with("not shown; narrow the pattern or path"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn paths_escaping_the_workspace_are_refused_by_every_tool() {
        let f = fixture();
        write(&f.outside, "secret.txt", "needle\n");
        std::os::unix::fs::symlink(&f.outside, f.ws.join("out")).unwrap();
        let ctx = context(&f.ws);
        let outside = f.outside.to_str().unwrap().to_owned();
        for path in ["../outside", outside.as_str(), "out", "out/secret.txt"] {
            let results = [
                list(&ctx, json!({"path": path})).await,
                glob(&ctx, json!({"pattern": "*", "path": path})).await,
                grep(&ctx, json!({"pattern": "needle", "path": path})).await,
            ];
            for result in results {
                assert!(
                    matches!(result, Err(ToolError::Path(PathError::Outside { .. }))),
                    "{path}: {result:?}"
                );
            }
        }
    }

    #[tokio::test]
    async fn walks_do_not_follow_a_symlinked_directory_out_of_the_workspace() {
        let f = fixture();
        write(&f.outside, "secret.txt", "needle\n");
        write(&f.ws, "inside.txt", "needle\n");
        std::os::unix::fs::symlink(&f.outside, f.ws.join("link")).unwrap();
        std::os::unix::fs::symlink(f.outside.join("secret.txt"), f.ws.join("file-link")).unwrap();
        let ctx = context(&f.ws);
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle"})).await.unwrap(),
            "inside.txt:1:needle"
        );
        assert_eq!(
            glob(&ctx, json!({"pattern": "**/*.txt"})).await.unwrap(),
            "inside.txt"
        );
        assert_eq!(
            list(&ctx, json!({"depth": 3})).await.unwrap(),
            "file-link (symlink)\ninside.txt (7 B)\nlink (symlink)"
        );
    }

    #[tokio::test]
    async fn a_forbidden_directory_inside_the_workspace_never_shows() {
        let f = fixture();
        write(&f.ws, ".ssh/id_ed25519", "needle private key\n");
        write(&f.ws, "keys/prod.pem", "needle pem\n");
        write(&f.ws, "notes.txt", "needle note\n");
        let forbidden = vec![
            f.ws.join(".ssh").display().to_string(),
            f.ws.join("keys").display().to_string(),
        ];
        let ctx = context_with(&f.ws, &forbidden);
        let everything = json!({"include_hidden": true, "include_ignored": true});
        let with = |extra: Value| {
            let mut arguments = everything.clone();
            for (key, value) in extra.as_object().unwrap() {
                arguments[key] = value.clone();
            }
            arguments
        };
        assert_eq!(
            grep(&ctx, with(json!({"pattern": "needle"})))
                .await
                .unwrap(),
            "notes.txt:1:needle note"
        );
        assert_eq!(
            glob(&ctx, with(json!({"pattern": "**"}))).await.unwrap(),
            "notes.txt"
        );
        assert_eq!(
            list(&ctx, with(json!({"depth": 3}))).await.unwrap(),
            "notes.txt (12 B)"
        );
        assert!(matches!(
            grep(&ctx, json!({"pattern": "needle", "path": "keys"})).await,
            Err(ToolError::Path(PathError::Forbidden { .. }))
        ));
    }

    #[tokio::test]
    async fn an_invalid_regex_names_the_problem() {
        let f = fixture();
        let ctx = context(&f.ws);
        let Err(ToolError::InvalidArguments(message)) =
            grep(&ctx, json!({"pattern": "fn (unclosed"})).await
        else {
            panic!("an invalid regex must be refused");
        };
        assert!(
            message.starts_with("`pattern` is not a valid regex"),
            "{message}"
        );
        assert!(message.contains("unclosed group"), "{message}");
        assert!(matches!(
            grep(&ctx, json!({"pattern": "a\\nb"})).await,
            Err(ToolError::InvalidArguments(_))
        ));
        assert_eq!(
            grep(&ctx, json!({"pattern": "x", "context": 6})).await,
            Err(ToolError::InvalidArguments(
                "`context` must be between 0 and 5, got 6".to_owned()
            ))
        );
        assert!(matches!(
            grep(&ctx, json!({"pattern": "x", "colour": true})).await,
            Err(ToolError::InvalidArguments(message)) if message.contains("colour")
        ));
    }

    #[tokio::test]
    async fn binary_files_are_skipped() {
        let f = fixture();
        fs::write(f.ws.join("blob.bin"), b"needle\0\x01\x02needle\n").unwrap();
        // The NUL comes long after the match, past the searcher's first buffer.
        let mut late = format!("needle early\n{}", "filler\n".repeat(50_000)).into_bytes();
        late.extend_from_slice(b"\0binary tail\n");
        fs::write(f.ws.join("late.bin"), late).unwrap();
        write(&f.ws, "text.txt", "needle\n");
        let ctx = context(&f.ws);
        assert_eq!(
            grep(&ctx, json!({"pattern": "needle"})).await.unwrap(),
            "text.txt:1:needle"
        );
    }

    #[tokio::test]
    async fn context_lines_surround_matches() {
        let f = fixture();
        let lines: String = (1..=12).map(|n| format!("line {n}\n")).collect();
        write(&f.ws, "a.txt", &lines);
        write(&f.ws, "b.txt", "x\nline 1 again\n");
        let ctx = context(&f.ws);
        assert_eq!(
            grep(&ctx, json!({"pattern": "^line (3|9)$", "context": 1}))
                .await
                .unwrap(),
            "a.txt-2-line 2\na.txt:3:line 3\na.txt-4-line 4\n--\na.txt-8-line 8\na.txt:9:line 9\na.txt-10-line 10"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "line 1\\b", "context": 1}))
                .await
                .unwrap(),
            "a.txt:1:line 1\na.txt-2-line 2\n--\nb.txt-1-x\nb.txt:2:line 1 again"
        );
    }

    #[tokio::test]
    async fn fixed_strings_and_case_insensitive() {
        let f = fixture();
        write(
            &f.ws,
            "a.txt",
            "call a.b(c) here\nor axbc there\nNeedle\nneedle\n",
        );
        let ctx = context(&f.ws);
        assert_eq!(
            grep(&ctx, json!({"pattern": "a.b(c)", "fixed_strings": true}))
                .await
                .unwrap(),
            "a.txt:1:call a.b(c) here"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "a.b(c)"})).await.unwrap(),
            "a.txt:2:or axbc there"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "NEEDLE", "case_insensitive": true}))
                .await
                .unwrap(),
            "a.txt:3:Needle\na.txt:4:needle"
        );
        assert_eq!(
            grep(&ctx, json!({"pattern": "NEEDLE"})).await.unwrap(),
            "No matches"
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut_around_the_match() {
        let f = fixture();
        let line = format!("{}needle{}\n", "a".repeat(1000), "b".repeat(1000));
        write(&f.ws, "min.js", &line);
        write(&f.ws, "short.js", &format!("needle{}\n", "c".repeat(400)));
        let ctx = context(&f.ws);
        let tool = Grep {
            settings: SearchSettings {
                max_line_chars: 20,
                ..SearchSettings::default()
            },
        };
        assert_eq!(
            call_with(&tool, &ctx, json!({"pattern": "needle"}))
                .await
                .unwrap(),
            format!(
                "min.js:1:…aaaaaneedlebbbbbbbbb…\nshort.js:1:needle{}…",
                "c".repeat(14)
            )
        );
    }

    #[tokio::test]
    async fn a_cancelled_call_returns_cancelled() {
        let f = fixture();
        project(&f.ws);
        let ctx = context(&f.ws);
        let tool: &dyn Tool = &Grep {
            settings: SearchSettings::default(),
        };
        let arguments = json!({"pattern": "needle"});
        let plan = tool.plan(&arguments, &ctx).await.unwrap();
        ctx.cancel.cancel();
        assert_eq!(
            tool.execute(&arguments, &plan, &ctx).await,
            Err(ToolError::Cancelled)
        );
    }

    #[test]
    fn sizes_read_like_a_person_would_write_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MB");
    }
}
