//! `read_file`, `write_file` and `edit_file`.
//!
//! Reads and writes go through [`Files`](crate::core::tool::Files): the editor's
//! buffers when the client offers them, the local filesystem otherwise. Writes
//! are planned in full (the new text and its diff) before anything changes; the
//! write itself only lands if the file still holds what the plan read, so what a
//! person approved is exactly what is written. What an editor's buffer shows
//! differently is no change: the final newline its lines hide, an empty buffer
//! for a file not there yet ([`Since`]). An `edit_file` call whose file did
//! change is applied again to the text as it is now when each edit still
//! applies as it did (found once, or `replace_all`); only then does the
//! written change differ from the planned one.

use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::tool::{
    FileDiff, Plan, Since, Tool, ToolContext, ToolError, ToolKind, ToolOutput, TypedTool,
};

/// Limits of the file tools.
#[derive(Debug, Clone)]
pub struct FileSettings {
    /// Largest file `read_file` returns whole; larger files must be read by range.
    pub max_read_bytes: usize,
    /// Most lines `read_file` returns in one call.
    pub max_read_lines: usize,
    /// Largest content `write_file` / `edit_file` will write.
    pub max_write_bytes: usize,
}

impl Default for FileSettings {
    fn default() -> Self {
        Self {
            max_read_bytes: 256 * 1024,
            max_read_lines: 2000,
            max_write_bytes: 4 * 1024 * 1024,
        }
    }
}

pub fn tools(settings: FileSettings) -> Vec<Arc<dyn Tool>> {
    let settings = Arc::new(settings);
    vec![
        Arc::new(ReadFile {
            settings: settings.clone(),
        }),
        Arc::new(WriteFile {
            settings: settings.clone(),
        }),
        Arc::new(EditFile { settings }),
    ]
}

struct ReadFile {
    settings: Arc<FileSettings>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// File path, relative to the workspace
    path: String,
    /// First line to read (1-based)
    #[serde(default)]
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// Most lines to read
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

impl TypedTool for ReadFile {
    type Args = ReadArgs;
    const NAME: &'static str = "read_file";
    const KIND: ToolKind = ToolKind::Read;

    fn description(&self) -> String {
        "Read a text file in the workspace. Use offset/limit (1-based lines) for large files."
            .into()
    }

    async fn plan(&self, args: &ReadArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let path = ctx.path(&args.path)?;
        Ok(Plan {
            title: format!("Read {}", ctx.display_path(&path)),
            reads: vec![path],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &ReadArgs,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let path = first(&plan.reads)?;
        let shown = ctx.display_path(path);
        if path.is_dir() {
            return Err(ToolError::Failed(format!(
                "{shown} is a directory; use list_dir"
            )));
        }
        // Binary files are refused before any text is read, from disk: an
        // editor buffer is always text.
        if let Some(size) = binary_size(path).await {
            return Err(ToolError::Failed(format!(
                "{shown} is a binary file ({size} bytes); read_file returns text only"
            )));
        }
        let text = ctx
            .files
            .read_text(path)
            .await?
            .ok_or_else(|| ToolError::Failed(format!("{shown} does not exist")))?;
        let ranged = args.offset.is_some() || args.limit.is_some();
        if !ranged
            && text.len() <= self.settings.max_read_bytes
            && text.lines().count() <= self.settings.max_read_lines
        {
            return Ok(ToolOutput::text(text));
        }
        self.lines(&text, args, &shown).map(ToolOutput::text)
    }
}

impl ReadFile {
    /// The lines `args` asks for (from `offset`, at most `limit` and the
    /// settings' caps), then where to read on when more remain.
    fn lines(&self, text: &str, args: &ReadArgs, shown: &str) -> Result<String, ToolError> {
        let total = text.lines().count();
        let start = args.offset.unwrap_or(1).max(1);
        if start > total.max(1) {
            return Err(ToolError::InvalidArguments(format!(
                "`offset` {start} is past the end of {shown} ({total} lines)"
            )));
        }
        let limit = args
            .limit
            .unwrap_or(self.settings.max_read_lines)
            .min(self.settings.max_read_lines);
        let mut out = String::new();
        let mut end = start - 1;
        for line in text.lines().skip(start - 1).take(limit) {
            if out.len() + line.len() > self.settings.max_read_bytes {
                break;
            }
            out.push_str(line);
            out.push('\n');
            end += 1;
        }
        if end < total || start > 1 {
            out.push_str(&format!(
                "[lines {start}-{end} of {total}; read more with offset {}]\n",
                end + 1
            ));
        }
        Ok(out)
    }
}

/// The file's size if it looks binary (a NUL byte in its first 8 KiB).
async fn binary_size(path: &Path) -> Option<u64> {
    use tokio::io::AsyncReadExt;
    let mut file = tokio::fs::File::open(path).await.ok()?;
    let size = file.metadata().await.ok()?.len();
    let mut head = vec![0u8; 8192];
    let n = file.read(&mut head).await.ok()?;
    head[..n].contains(&0).then_some(size)
}

struct WriteFile {
    settings: Arc<FileSettings>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// File path, relative to the workspace
    path: String,
    /// The complete new content
    content: String,
}

impl TypedTool for WriteFile {
    type Args = WriteArgs;
    const NAME: &'static str = "write_file";
    const KIND: ToolKind = ToolKind::Edit;

    fn description(&self) -> String {
        "Create a file or replace its whole content. Prefer edit_file for changes to existing files."
            .into()
    }

    async fn plan(&self, args: &WriteArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let path = ctx.path(&args.path)?;
        if path.is_dir() {
            return Err(ToolError::Failed(format!(
                "{} is a directory",
                ctx.display_path(&path)
            )));
        }
        if args.content.len() > self.settings.max_write_bytes {
            return Err(ToolError::InvalidArguments(format!(
                "`content` is {} bytes; the limit is {}",
                args.content.len(),
                self.settings.max_write_bytes
            )));
        }
        let old = ctx.files.read_text(&path).await?;
        let verb = if old.is_some() { "Write" } else { "Create" };
        let diff = file_diff(ctx, &path, old, args.content.clone());
        Ok(Plan {
            title: format!("{verb} {}", ctx.display_path(&path)),
            writes: vec![path],
            diffs: vec![diff],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        _args: &WriteArgs,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        apply(plan, ctx, None).await
    }
}

struct EditFile {
    settings: Arc<FileSettings>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Edit {
    /// Exact text to find
    old_text: String,
    /// Text to put in its place
    new_text: String,
    /// Replace every occurrence
    #[serde(default)]
    replace_all: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    /// File path, relative to the workspace
    path: String,
    #[schemars(length(min = 1))]
    edits: Vec<Edit>,
}

impl TypedTool for EditFile {
    type Args = EditArgs;
    const NAME: &'static str = "edit_file";
    const KIND: ToolKind = ToolKind::Edit;

    fn description(&self) -> String {
        "Change a file by exact search and replace. Each old_text must occur exactly once (include surrounding lines to make it unique) unless replace_all is set. Edits apply in order."
            .into()
    }

    async fn plan(&self, args: &EditArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
        if args.edits.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`edits` must contain at least one edit".into(),
            ));
        }
        let path = ctx.path(&args.path)?;
        let shown = ctx.display_path(&path);
        let old = ctx.files.read_text(&path).await?.ok_or_else(|| {
            ToolError::Failed(format!("{shown} does not exist; create it with write_file"))
        })?;
        let new = apply_edits(&old, &args.edits, &shown)?;
        if new == old {
            return Err(ToolError::InvalidArguments(format!(
                "the edits leave {shown} unchanged"
            )));
        }
        if new.len() > self.settings.max_write_bytes {
            return Err(ToolError::InvalidArguments(format!(
                "the edited file would be {} bytes; the limit is {}",
                new.len(),
                self.settings.max_write_bytes
            )));
        }
        let diff = file_diff(ctx, &path, Some(old), new);
        Ok(Plan {
            title: format!("Edit {shown}"),
            writes: vec![path],
            diffs: vec![diff],
            ..Plan::default()
        })
    }

    async fn execute(
        &self,
        args: &EditArgs,
        plan: &Plan,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let edits = (args.edits.as_slice(), self.settings.max_write_bytes);
        apply(plan, ctx, Some(edits)).await
    }
}

/// Applies edits in order; each must match exactly once unless `replace_all`.
fn apply_edits(text: &str, edits: &[Edit], shown: &str) -> Result<String, ToolError> {
    let mut text = text.to_owned();
    for (index, edit) in edits.iter().enumerate() {
        let n = index + 1;
        if edit.old_text.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "edit {n}: `old_text` is empty"
            )));
        }
        let count = text.matches(edit.old_text.as_str()).count();
        match count {
            0 => {
                return Err(ToolError::Failed(format!(
                    "edit {n}: `old_text` was not found in {shown}; read the file again and copy the text exactly"
                )));
            }
            1 => text = text.replacen(&edit.old_text, &edit.new_text, 1),
            _ if edit.replace_all => text = text.replace(&edit.old_text, &edit.new_text),
            _ => {
                return Err(ToolError::Failed(format!(
                    "edit {n}: `old_text` occurs {count} times in {shown}; include surrounding lines to make it unique, or set replace_all"
                )));
            }
        }
    }
    Ok(text)
}

fn file_diff(ctx: &ToolContext, path: &Path, old: Option<String>, new: String) -> FileDiff {
    let shown = ctx.display_path(path);
    let before = old.as_deref().unwrap_or("");
    let unified = similar::TextDiff::from_lines(before, new.as_str())
        .unified_diff()
        .context_radius(3)
        .header(
            &if old.is_some() {
                format!("a/{shown}")
            } else {
                "/dev/null".to_owned()
            },
            &format!("b/{shown}"),
        )
        .to_string();
    FileDiff {
        path: path.to_path_buf(),
        old_text: old,
        new_text: new,
        unified,
    }
}

/// Writes the planned text if the file still holds what the plan read, or
/// differs from it only as an editor shows a file (`Since::compare`: a final
/// newline its buffer hides, an empty buffer for a file not there); the
/// file's final newline is kept. When it changed otherwise, `edits` (an
/// `edit_file` call's) are applied to its text as it is now if they still
/// apply; else nothing is written.
async fn apply(
    plan: &Plan,
    ctx: &ToolContext,
    edits: Option<(&[Edit], usize)>,
) -> Result<ToolOutput, ToolError> {
    let planned = plan
        .diffs
        .first()
        .ok_or_else(|| ToolError::Failed("the plan has no change to make".into()))?;
    let shown = ctx.display_path(&planned.path);
    let current = ctx.files.read_text(&planned.path).await?;
    let changed = || {
        ToolError::Failed(format!(
            "{shown} changed after the edit was planned; nothing was written, read it again"
        ))
    };
    let mut note = "";
    let diff = match Since::compare(planned.old_text.as_deref(), current.as_deref()) {
        Since::Same => planned.clone(),
        Since::NewlineShown => {
            let new = with_final_newline(planned.new_text.clone());
            file_diff(ctx, &planned.path, current, new)
        }
        Since::Changed => {
            let (Some((edits, max_bytes)), Some(now)) = (edits, current) else {
                return Err(changed());
            };
            // A buffer's text hides the final newline the file had when planned.
            let now = if planned
                .old_text
                .as_deref()
                .is_some_and(|t| t.ends_with('\n'))
            {
                with_final_newline(now)
            } else {
                now
            };
            let new = apply_edits(&now, edits, &shown).map_err(|_| changed())?;
            if new.len() > max_bytes {
                return Err(ToolError::Failed(format!(
                    "{shown} changed after the edit was planned, and edited now it would be {} bytes; the limit is {max_bytes}",
                    new.len()
                )));
            }
            note = "; it had changed since the edit was planned, and the edits were applied to its text as it is now";
            file_diff(ctx, &planned.path, Some(now), new)
        }
    };
    ctx.files
        .write_text(&diff.path, diff.new_text.clone())
        .await?;
    let (added, removed) = line_counts(&diff.unified);
    let verb = if diff.old_text.is_some() {
        "Updated"
    } else {
        "Created"
    };
    Ok(ToolOutput {
        text: format!("{verb} {shown} (+{added} -{removed} lines{note})"),
        diffs: vec![diff],
        ..ToolOutput::default()
    })
}

/// The text ending in a newline, unless it is empty or ends in one already.
fn with_final_newline(mut text: String) -> String {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

fn line_counts(unified: &str) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in unified.lines() {
        if line.starts_with('+') && !line.starts_with("+++") {
            added += 1;
        } else if line.starts_with('-') && !line.starts_with("---") {
            removed += 1;
        }
    }
    (added, removed)
}

fn first(paths: &[std::path::PathBuf]) -> Result<&std::path::PathBuf, ToolError> {
    paths
        .first()
        .ok_or_else(|| ToolError::Failed("the plan names no file".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::SessionId;
    use crate::core::policy::PathBoundary;
    use crate::core::tool::Files;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    fn ctx(dir: &Path) -> ToolContext {
        let ws = std::fs::canonicalize(dir).unwrap();
        ToolContext {
            session_id: SessionId::from_string("ses_t".into()),
            workspace: ws.clone(),
            boundary: Arc::new(PathBoundary::new(&ws, &[], &[], None)),
            files: Files::local(SessionId::from_string("ses_t".into())),
            cancel: CancellationToken::new(),
            progress: crate::core::tool::Progress::none(),
            terminal: None,
            memory: None,
            call_id: None,
            run_id: None,
            skills: None,
        }
    }

    async fn run(
        tool: &Arc<dyn Tool>,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let plan = tool.plan(&args, ctx).await?;
        tool.execute(&args, &plan, ctx).await
    }

    fn tool(name: &str) -> Arc<dyn Tool> {
        tools(FileSettings {
            max_read_lines: 3,
            ..FileSettings::default()
        })
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap()
    }

    #[tokio::test]
    async fn read_file_reads_ranges_and_refuses_binaries() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        std::fs::write(dir.path().join("a.txt"), "1\n2\n3\n4\n5\n").unwrap();
        std::fs::write(dir.path().join("b.bin"), b"\x7fELF\0\0\x01").unwrap();
        let read = tool("read_file");
        let out = run(
            &read,
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
            &ctx,
        )
        .await
        .unwrap();
        assert_eq!(
            out.text,
            "2\n3\n[lines 2-3 of 5; read more with offset 4]\n"
        );
        let out = run(&read, json!({"path": "a.txt"}), &ctx).await.unwrap();
        assert!(
            out.text.starts_with("1\n2\n3\n[lines 1-3 of 5"),
            "{}",
            out.text
        );
        let err = run(&read, json!({"path": "b.bin"}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("binary file (7 bytes)"), "{err}");
        let err = run(&read, json!({"path": "missing"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "missing does not exist");
        let err = run(&read, json!({"path": 3}), &ctx).await.unwrap_err();
        assert!(
            err.to_string().starts_with("invalid arguments: `path`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn edit_file_applies_several_edits_and_fails_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        std::fs::write(dir.path().join("f.rs"), "fn a() {}\nfn b() {}\nfn b() {}\n").unwrap();
        let edit = tool("edit_file");
        let err = run(
            &edit,
            json!({"path": "f.rs", "edits": [{"old_text": "fn c", "new_text": "x"}]}),
            &ctx,
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().contains("edit 1: `old_text` was not found"),
            "{err}"
        );
        let err = run(
            &edit,
            json!({"path": "f.rs", "edits": [{"old_text": "fn a", "new_text": "fn z"}, {"old_text": "fn b", "new_text": "x"}]}),
            &ctx,
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("edit 2: `old_text` occurs 2 times"),
            "{err}"
        );
        // Nothing was written by the failed calls.
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.rs")).unwrap(),
            "fn a() {}\nfn b() {}\nfn b() {}\n"
        );
        let args = json!({"path": "f.rs", "edits": [
            {"old_text": "fn a", "new_text": "fn z"},
            {"old_text": "fn b", "new_text": "fn y", "replace_all": true}
        ]});
        let plan = edit.plan(&args, &ctx).await.unwrap();
        assert_eq!(plan.diffs.len(), 1);
        let unified = &plan.diffs[0].unified;
        assert!(
            unified.starts_with("--- a/f.rs\n+++ b/f.rs\n@@ -1,3 +1,3 @@\n")
                && unified.contains("-fn a() {}\n")
                && unified.contains("+fn z() {}\n"),
            "{unified}"
        );
        let out = edit.execute(&args, &plan, &ctx).await.unwrap();
        assert_eq!(out.text, "Updated f.rs (+3 -3 lines)");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.rs")).unwrap(),
            "fn z() {}\nfn y() {}\nfn y() {}\n"
        );
    }

    #[tokio::test]
    async fn a_write_lands_only_if_the_file_is_unchanged_since_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let write = tool("write_file");
        let args = json!({"path": "new/dir/f.txt", "content": "hello\n"});
        let plan = write.plan(&args, &ctx).await.unwrap();
        assert_eq!(plan.diffs[0].old_text, None);
        std::fs::create_dir_all(dir.path().join("new/dir")).unwrap();
        std::fs::write(dir.path().join("new/dir/f.txt"), "someone else\n").unwrap();
        let err = write.execute(&args, &plan, &ctx).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("changed after the edit was planned"),
            "{err}"
        );
        std::fs::remove_file(dir.path().join("new/dir/f.txt")).unwrap();
        let out = write.execute(&args, &plan, &ctx).await.unwrap();
        assert_eq!(out.text, "Created new/dir/f.txt (+1 -0 lines)");
    }

    /// `ctx` reading and writing as an editor's buffers show files.
    fn buffer_ctx(dir: &Path) -> ToolContext {
        let mut ctx = ctx(dir);
        ctx.files = crate::core::tool::BufferView::files(ctx.session_id.clone());
        ctx
    }

    #[tokio::test]
    async fn a_buffer_without_the_final_newline_or_empty_for_no_file_is_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let disk = ctx(dir.path());
        let buffer = buffer_ctx(dir.path());
        // Planned against the disk, written after the editor opened a
        // buffer: the new file reads "", the edited one without its newline.
        let write = tool("write_file");
        let args = json!({"path": "new.txt", "content": "hello\n"});
        let plan = write.plan(&args, &disk).await.unwrap();
        assert_eq!(plan.diffs[0].old_text, None);
        let out = write.execute(&args, &plan, &buffer).await.unwrap();
        assert_eq!(out.text, "Created new.txt (+1 -0 lines)");
        assert_eq!(out.diffs, plan.diffs);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new.txt")).unwrap(),
            "hello\n"
        );
        std::fs::write(dir.path().join("notes.txt"), "# Notes\nstatus: draft\n").unwrap();
        let edit = tool("edit_file");
        let args =
            json!({"path": "notes.txt", "edits": [{"old_text": "draft", "new_text": "final"}]});
        let plan = edit.plan(&args, &disk).await.unwrap();
        let out = edit.execute(&args, &plan, &buffer).await.unwrap();
        assert_eq!(out.text, "Updated notes.txt (+1 -1 lines)");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "# Notes\nstatus: final\n"
        );
        // Planned against the buffer, written to the disk: the file's final
        // newline, which the plan did not see, is kept.
        let args =
            json!({"path": "notes.txt", "edits": [{"old_text": "final", "new_text": "done"}]});
        let plan = edit.plan(&args, &buffer).await.unwrap();
        assert_eq!(plan.diffs[0].new_text, "# Notes\nstatus: done");
        let out = edit.execute(&args, &plan, &disk).await.unwrap();
        assert_eq!(out.diffs[0].new_text, "# Notes\nstatus: done\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "# Notes\nstatus: done\n"
        );
        // A file that has no final newline keeps having none.
        std::fs::write(dir.path().join("bare.txt"), "no newline").unwrap();
        let args =
            json!({"path": "bare.txt", "edits": [{"old_text": "no", "new_text": "still no"}]});
        let plan = edit.plan(&args, &disk).await.unwrap();
        edit.execute(&args, &plan, &disk).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("bare.txt")).unwrap(),
            "still no newline"
        );
        // A real change is still one for write_file, whatever the client.
        let args = json!({"path": "new.txt", "content": "mine\n"});
        let plan = write.plan(&args, &disk).await.unwrap();
        std::fs::write(dir.path().join("new.txt"), "theirs\n").unwrap();
        let err = write.execute(&args, &plan, &buffer).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "new.txt changed after the edit was planned; nothing was written, read it again"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new.txt")).unwrap(),
            "theirs\n"
        );
    }

    #[tokio::test]
    async fn an_edit_applies_to_a_changed_file_only_while_its_edits_still_apply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        let edit = tool("edit_file");
        let args = json!({"path": "f.txt", "edits": [{"old_text": "status: draft", "new_text": "status: final"}]});
        // Planned and written on the disk; planned on the disk and written
        // after the editor opened a buffer, which hides the final newline.
        for (disk, ctx) in [
            (ctx(dir.path()), ctx(dir.path())),
            (ctx(dir.path()), buffer_ctx(dir.path())),
        ] {
            std::fs::write(&path, "# Notes\nstatus: draft\n").unwrap();
            let plan = edit.plan(&args, &disk).await.unwrap();
            // Someone adds a line after the plan: the edit still applies once.
            std::fs::write(&path, "# Notes\nstatus: draft\nowner: ann\n").unwrap();
            let out = edit.execute(&args, &plan, &ctx).await.unwrap();
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                "# Notes\nstatus: final\nowner: ann\n"
            );
            assert!(
                out.text
                    .starts_with("Updated f.txt (+1 -1 lines; it had changed since"),
                "{}",
                out.text
            );
            // The change recorded is the one made, from the text found.
            assert!(
                out.diffs[0]
                    .unified
                    .contains("-status: draft\n+status: final\n owner: ann"),
                "{}",
                out.diffs[0].unified
            );
            assert_eq!(
                out.diffs[0].new_text,
                "# Notes\nstatus: final\nowner: ann\n"
            );
            // The text to replace is gone, or no longer unique: nothing is written.
            for now in [
                "# Notes\nstatus: review\n",
                "# Notes\nstatus: draft\nstatus: draft\n",
            ] {
                std::fs::write(&path, "# Notes\nstatus: draft\n").unwrap();
                let plan = edit.plan(&args, &disk).await.unwrap();
                std::fs::write(&path, now).unwrap();
                let err = edit.execute(&args, &plan, &ctx).await.unwrap_err();
                assert_eq!(
                    err.to_string(),
                    "f.txt changed after the edit was planned; nothing was written, read it again"
                );
                assert_eq!(std::fs::read_to_string(&path).unwrap(), now);
            }
            // Deleted since: nothing to apply the edits to.
            std::fs::write(&path, "# Notes\nstatus: draft\n").unwrap();
            let plan = edit.plan(&args, &disk).await.unwrap();
            std::fs::remove_file(&path).unwrap();
            let err = edit.execute(&args, &plan, &ctx).await.unwrap_err();
            assert!(
                err.to_string()
                    .contains("changed after the edit was planned"),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn paths_outside_the_workspace_are_refused_before_any_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        let ctx = ctx(&ws);
        for path in ["../secret", "link", "/etc/passwd"] {
            let err = tool("read_file")
                .plan(&json!({"path": path}), &ctx)
                .await
                .unwrap_err();
            assert!(matches!(err, ToolError::Path(_)), "{path}: {err}");
            let err = tool("write_file")
                .plan(&json!({"path": path, "content": "x"}), &ctx)
                .await
                .unwrap_err();
            assert!(matches!(err, ToolError::Path(_)), "{path}: {err}");
        }
    }
}
