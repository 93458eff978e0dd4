//! `pincer skills validate DIR`: a skill folder checked against the Agent
//! Skills specification with the rules of the reference validator
//! (`agentskills validate`, PyPI `skills-ref` 0.1.1), so both give the same
//! verdict on the same folder: the frontmatter split and read as it reads
//! it (StrictYAML: every value text; flow style, anchors, tags and
//! duplicate keys refused), then each field's rules. Discovery is more
//! lenient (`parse`); this is for authors.

use std::path::{Path, PathBuf};

use unicode_normalization::UnicodeNormalization as _;

use super::parse::{Node, Reading, load};

pub const MAX_NAME_CHARS: usize = 64;
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// The frontmatter fields the specification defines.
pub const ALLOWED_FIELDS: [&str; 6] = [
    "allowed-tools",
    "compatibility",
    "description",
    "license",
    "metadata",
    "name",
];

/// The problems of the skill at `path` (its folder, or its `SKILL.md`);
/// none when it is valid.
pub fn validate_path(path: &Path) -> Vec<String> {
    let dir = if path.is_file()
        && path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case("skill.md"))
    {
        path.parent().unwrap_or(Path::new(".")).to_path_buf()
    } else {
        path.to_path_buf()
    };
    if !dir.exists() {
        return vec![format!("path does not exist: {}", dir.display())];
    }
    if !dir.is_dir() {
        return vec![format!("not a directory: {}", dir.display())];
    }
    let Some(file) = skill_file(&dir) else {
        return vec!["missing required file: SKILL.md".into()];
    };
    let text = match std::fs::read(&file).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => return vec![format!("{} is not UTF-8", file.display())],
        Err(err) => return vec![format!("cannot read {}: {err}", file.display())],
    };
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    validate_text(&text, &folder)
}

/// `SKILL.md`, else `skill.md`, as the reference validator looks.
fn skill_file(dir: &Path) -> Option<PathBuf> {
    ["SKILL.md", "skill.md"]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|path| path.exists())
}

/// The problems of a `SKILL.md` whose folder is named `folder`.
pub fn validate_text(text: &str, folder: &str) -> Vec<String> {
    // Python reads the file with universal newlines.
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let Some(rest) = text.strip_prefix("---") else {
        return vec!["SKILL.md must start with YAML frontmatter (---)".into()];
    };
    // The reference splits at the next `---` anywhere, not only on a line
    // of its own.
    let Some((front, _body)) = rest.split_once("---") else {
        return vec!["SKILL.md frontmatter is not closed with ---".into()];
    };
    let node = match load(front, Reading::Strict) {
        Ok(node) => node,
        Err(err) => return vec![format!("invalid YAML in frontmatter: {err}")],
    };
    let Node::Map(entries) = &node else {
        return vec!["SKILL.md frontmatter must be a YAML mapping".into()];
    };
    let mut problems = Vec::new();
    let mut unknown: Vec<&str> = entries
        .iter()
        .map(|(key, _)| key.as_str())
        .filter(|key| !ALLOWED_FIELDS.contains(key))
        .collect();
    unknown.sort_unstable();
    if !unknown.is_empty() {
        problems.push(format!(
            "unexpected fields in frontmatter: {}; only {} are allowed",
            unknown.join(", "),
            ALLOWED_FIELDS.join(", ")
        ));
    }
    match node.get("name") {
        None => problems.push("missing required field in frontmatter: name".into()),
        Some(name) => problems.extend(name_problems(name.as_text(), folder)),
    }
    match node.get("description") {
        None => problems.push("missing required field in frontmatter: description".into()),
        Some(description) => match description.as_text() {
            Some(d) if !d.trim().is_empty() => {
                let chars = d.chars().count();
                if chars > MAX_DESCRIPTION_CHARS {
                    problems.push(format!(
                        "field 'description' exceeds {MAX_DESCRIPTION_CHARS} characters ({chars})"
                    ));
                }
            }
            Some(_) | None => {
                problems.push("field 'description' must be a non-empty string".into());
            }
        },
    }
    if let Some(compatibility) = node.get("compatibility") {
        match compatibility.as_text() {
            Some(c) => {
                let chars = c.chars().count();
                if chars > MAX_COMPATIBILITY_CHARS {
                    problems.push(format!(
                        "field 'compatibility' exceeds {MAX_COMPATIBILITY_CHARS} characters ({chars})"
                    ));
                }
            }
            None => problems.push("field 'compatibility' must be a string".into()),
        }
    }
    problems
}

/// The rules of `name`: 1-64 characters, lowercase letters, digits and
/// hyphens, no hyphen at either end nor two in a row, the folder's name
/// (both compared in Unicode NFKC, as the reference does).
fn name_problems(name: Option<&str>, folder: &str) -> Vec<String> {
    let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
        return vec!["field 'name' must be a non-empty string".into()];
    };
    let name: String = name.trim().nfkc().collect();
    let shown = crate::core::quote::quote(&name);
    let mut problems = Vec::new();
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        problems.push(format!(
            "field 'name' `{shown}` exceeds {MAX_NAME_CHARS} characters ({chars})"
        ));
    }
    if name != name.to_lowercase() {
        problems.push(format!("field 'name' `{shown}` must be lowercase"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push("field 'name' cannot start or end with a hyphen".into());
    }
    if name.contains("--") {
        problems.push("field 'name' cannot contain consecutive hyphens".into());
    }
    if !name.chars().all(|c| c.is_alphanumeric() || c == '-') {
        problems.push(format!(
            "field 'name' `{shown}` holds characters other than letters, digits and hyphens"
        ));
    }
    let folder: String = folder.nfkc().collect();
    if folder != name {
        problems.push(format!(
            "field 'name' `{shown}` must match the folder's name `{}`",
            crate::core::quote::quote(&folder)
        ));
    }
    problems
}

/// Whether `name` follows the specification's rules for a name (the
/// folder aside): what discovery warns about.
pub fn name_is_valid(name: &str) -> bool {
    name_problems(Some(name), name).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(front: &str, folder: &str) -> Vec<String> {
        validate_text(&format!("---\n{front}---\nbody\n"), folder)
    }

    #[test]
    fn a_valid_skill_has_no_problems() {
        assert_eq!(
            check(
                "name: pdf-tools\ndescription: Reads PDFs.\nlicense: MIT\ncompatibility: qpdf\n\
                 metadata:\n  a: b\nallowed-tools: Read\n",
                "pdf-tools"
            ),
            Vec::<String>::new()
        );
        // Every value is text: a number is a name like any other.
        assert!(check("name: '12'\ndescription: d\n", "12").is_empty());
        assert!(check("name: 12\ndescription: d\n", "12").is_empty());
    }

    #[test]
    fn each_rule_names_its_field() {
        let long = "a".repeat(65);
        let cases = [
            ("name: Pdf\ndescription: d\n", "Pdf", "must be lowercase"),
            (
                "name: -pdf\ndescription: d\n",
                "-pdf",
                "start or end with a hyphen",
            ),
            (
                "name: a--b\ndescription: d\n",
                "a--b",
                "consecutive hyphens",
            ),
            ("name: a_b\ndescription: d\n", "a_b", "other than letters"),
            (
                &format!("name: {long}\ndescription: d\n"),
                &long,
                "exceeds 64",
            ),
            ("name: a\ndescription: d\n", "b", "must match the folder"),
            (
                "description: d\n",
                "a",
                "missing required field in frontmatter: name",
            ),
            (
                "name: a\n",
                "a",
                "missing required field in frontmatter: description",
            ),
            (
                "name: a\ndescription:\n",
                "a",
                "'description' must be a non-empty",
            ),
            (
                "name: a\ndescription: d\nversion: 1\n",
                "a",
                "unexpected fields in frontmatter: version",
            ),
            (
                "name: a\ndescription: d\ncompatibility:\n  - x\n",
                "a",
                "'compatibility' must be a string",
            ),
            (
                "name: a\ndescription: d\nallowed-tools: [a]\n",
                "a",
                "flow style",
            ),
            ("name: a\ndescription: Use when: x\n", "a", "invalid YAML"),
            ("- a\n", "a", "must be a YAML mapping"),
        ];
        for (front, folder, expected) in cases {
            let problems = check(front, folder);
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{front:?}: {problems:?}"
            );
        }
        let long = "d".repeat(1025);
        assert!(check(&format!("name: a\ndescription: {long}\n"), "a")[0].contains("1024"));
        let long = "c".repeat(501);
        assert!(
            check(
                &format!("name: a\ndescription: d\ncompatibility: {long}\n"),
                "a"
            )[0]
            .contains("500")
        );
        assert_eq!(
            validate_text("# title\n", "a"),
            ["SKILL.md must start with YAML frontmatter (---)"]
        );
        assert_eq!(
            validate_text("---\nname: a\n", "a"),
            ["SKILL.md frontmatter is not closed with ---"]
        );
    }

    #[test]
    fn names_follow_the_format() {
        assert!(name_is_valid("pdf-2"));
        assert!(name_is_valid("données"));
        for bad in ["", "PDF", "-a", "a-", "a--b", "a b", &"a".repeat(65)] {
            assert!(!name_is_valid(bad), "{bad:?}");
        }
    }
}
