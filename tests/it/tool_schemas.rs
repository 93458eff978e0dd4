//! What a model is told of each built-in tool, as `pincer run` sends it to
//! a loopback OpenAI-compatible server (`tools[].function`) and to a
//! loopback Anthropic one (`tools[]`): each tool's description and the
//! JSON schema of its arguments, derived from the struct its arguments are
//! parsed into, against the snapshots in `tests/fixtures/tool-schemas/`
//! (one file a tool); and every schema in the shape both APIs take.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::http::anthropic::text_stream as anthropic_stream;
use crate::support::http::openai::text_stream;
use crate::support::http::{Loopback, Reply};

/// Rewrites the snapshots from what the binary sends, when set to `1`.
const UPDATE: &str = "PINCER_UPDATE_TOOL_SCHEMAS";

/// Every built-in tool on: the web search needs a backend named.
const CONFIG: &str = "[web.search]\nbackend = \"searxng\"\nurl = \"http://127.0.0.1:9/\"\n";

fn snapshots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tool-schemas")
}

/// The body of the one model request `pincer run` sends to `provider`
/// (`openai` or `anthropic`) served by `reply`.
fn request_to(provider: &str, reply: String) -> Value {
    let dir = TestDir::new();
    dir.write_config(CONFIG);
    let server = Loopback::model(move |_, _| Reply::event_stream(reply.clone()));
    let (key, url, base) = match provider {
        "openai" => (
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            format!("{}/v1", server.url),
        ),
        _ => (
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            server.url.clone(),
        ),
    };
    let out = dir
        .command()
        .env(key, "sk-test")
        .env(url, base)
        .args(["run", "--provider", provider, "--model", "m", "hi"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    requests[0].body.clone()
}

/// Each tool OpenAI is offered, by name: `{"description", "parameters"}`.
fn offered_to_openai() -> BTreeMap<String, Value> {
    let body = request_to("openai", text_stream("ok"));
    let mut tools = BTreeMap::new();
    for tool in body["tools"].as_array().unwrap() {
        assert_eq!(tool["type"], "function", "{tool}");
        let function = &tool["function"];
        let name = function["name"].as_str().unwrap().to_owned();
        let spec = json!({
            "description": function["description"],
            "parameters": function["parameters"],
        });
        assert!(tools.insert(name, spec).is_none(), "{body}");
    }
    tools
}

#[test]
fn every_built_in_tool_is_described_as_its_snapshot_says() {
    let tools = offered_to_openai();
    let dir = snapshots();
    if std::env::var(UPDATE).as_deref() == Ok("1") {
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        std::fs::create_dir_all(&dir).unwrap();
        for (name, spec) in &tools {
            let text = serde_json::to_string_pretty(spec).unwrap() + "\n";
            std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
        }
    }
    let how = format!(
        "if the change is meant, rewrite the snapshots with \
         `{UPDATE}=1 cargo test --locked --test it -- tool_schemas` and review them with `git diff`"
    );
    let mut snapshot_names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}; {how}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|file| file.strip_suffix(".json").map(str::to_owned))
        .collect();
    snapshot_names.sort();
    let offered: Vec<String> = tools.keys().cloned().collect();
    assert_eq!(
        offered,
        snapshot_names,
        "the tools offered are not the snapshots in {}; {how}",
        dir.display()
    );
    for (name, spec) in &tools {
        let path = dir.join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let snapshot: Value = serde_json::from_str(&text).unwrap();
        pretty_assertions::assert_eq!(
            &snapshot,
            spec,
            "`{name}` is described otherwise than {}; {how}",
            path.display()
        );
    }
    // All of them: files, search, shell, the task list, questions,
    // subagents, memory, the web and schedules.
    assert_eq!(tools.len(), 16, "{offered:?}");
}

/// Why `parameters` is not what OpenAI (`function.parameters`) and
/// Anthropic (`input_schema`) take: an object at the top with its
/// `properties`, `required` naming only those, every property typed with
/// one type, and nothing either refuses or resolves elsewhere (`$schema`,
/// `$ref`, `$defs`, `definitions`) at any depth.
fn shape_problem(parameters: &Value) -> Option<String> {
    if parameters["type"] != "object" {
        return Some("the top is not an object".to_owned());
    }
    let Some(properties) = parameters["properties"].as_object() else {
        return Some("no properties at the top".to_owned());
    };
    for name in parameters["required"].as_array().into_iter().flatten() {
        if !properties.contains_key(name.as_str().unwrap_or_default()) {
            return Some(format!("`required` names {name}, which is no property"));
        }
    }
    for (name, property) in properties {
        if !property["type"].is_string() || property["type"] == "null" {
            return Some(format!("`{name}` has no single type: {property}"));
        }
    }
    refused_anywhere(parameters, "")
}

#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "serde_json's Value: scalars hold no schema"
)]
fn refused_anywhere(value: &Value, at: &str) -> Option<String> {
    match value {
        Value::Object(object) => object.iter().find_map(|(key, inner)| {
            let here = format!("{at}/{key}");
            if ["$schema", "$ref", "$defs", "definitions"].contains(&key.as_str()) {
                return Some(format!("{here} is there"));
            }
            if key == "type" && !inner.is_string() {
                return Some(format!("{here} is {inner}"));
            }
            refused_anywhere(inner, &here)
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| refused_anywhere(item, &format!("{at}/{index}"))),
        _ => None,
    }
}

#[test]
fn every_schema_is_in_the_shape_openai_and_anthropic_take() {
    let openai = offered_to_openai();
    let body = request_to("anthropic", anthropic_stream("ok"));
    let anthropic: BTreeMap<String, Value> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| (tool["name"].as_str().unwrap().to_owned(), tool.clone()))
        .collect();
    assert_eq!(
        anthropic.keys().collect::<Vec<_>>(),
        openai.keys().collect::<Vec<_>>()
    );
    for (name, spec) in &openai {
        let parameters = &spec["parameters"];
        assert_eq!(shape_problem(parameters), None, "`{name}`: {parameters}");
        // A valid JSON Schema (2020-12, which both APIs read).
        if let Err(err) = jsonschema::meta::validate(parameters) {
            panic!("`{name}`: not a JSON Schema: {err}: {parameters}");
        }
        // Anthropic is told the same.
        assert_eq!(&anthropic[name]["input_schema"], parameters, "`{name}`");
        assert_eq!(anthropic[name]["description"], spec["description"]);
    }
}

#[test]
fn the_shape_check_finds_what_it_looks_for() {
    let good =
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert_eq!(shape_problem(&good), None);
    for (bad, expected) in [
        (json!({"type": "array"}), "the top is not"),
        (json!({"type": "object"}), "no properties"),
        (
            json!({"type": "object", "properties": {}, "required": ["a"]}),
            "`required` names \"a\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
            "`a` has no single type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}),
            "`a` has no single type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/A"}}}}),
            "/properties/a/items/$ref is there",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": ["string", "null"]}}}}),
            "/properties/a/items/type is",
        ),
        (
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {}}),
            "/$schema is there",
        ),
    ] {
        let found = shape_problem(&bad).unwrap_or_default();
        assert!(found.contains(expected), "{bad}: {found}");
    }
}
