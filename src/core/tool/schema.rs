//! The JSON schema a model is shown of a typed tool's arguments: derived by
//! `schemars` from the arguments' type, then tidied, here and only here,
//! into the shape every provider takes as a function's parameters (OpenAI's
//! `parameters`, Anthropic's `input_schema`): one object with its
//! subschemas inlined; no `$schema`, title, `$defs` or `null`.
//!
//! What the derive makes and what is tidied away:
//! - an `Option` field is "may be left out" (it is not in `required`), not
//!   "may be null": the `null` schemars adds to its type, its `enum` or an
//!   `anyOf`, and its `"default": null`, are dropped;
//! - an enum whose variants have doc comments (a `oneOf` of one `const`
//!   each) is one `enum` of the names, as an enum without them is: the
//!   variants' comments are for Rust readers;
//! - an integer's `format` (`uint`, `int64`: schemars' words, no JSON
//!   Schema format) is dropped; its `minimum` and `maximum` stay;
//! - a doc comment's lines become one paragraph of the description (a line
//!   break within a paragraph is a space);
//! - the root's title and description go (the tool's description is its
//!   own); `additionalProperties: false` stays where `deny_unknown_fields`
//!   puts it.

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

/// The parameters schema of `T`, with `configured` (`(property, keywords)`:
/// what the tool's settings decide, a default or a bound) laid over the
/// properties they name. A name no property has adds a property without a
/// type, which the schemas' test (`tests/it/tool_schemas.rs`) refuses.
pub fn parameters<T: JsonSchema>(configured: Vec<(&str, Value)>) -> Value {
    let settings = SchemaSettings::draft2020_12().with(|settings| {
        settings.inline_subschemas = true;
        settings.meta_schema = None;
    });
    let settings = settings.with_transform(RecursiveTransform(tidy));
    let mut root = settings.into_generator().into_root_schema_for::<T>();
    root.remove("title");
    root.remove("description");
    let mut root = root.to_value();
    if let Some(properties) = root.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, keywords) in configured {
            overlay(properties, name, keywords);
        }
    }
    root
}

/// One schema (not its subschemas) in the shape the providers take.
fn tidy(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    drop_null(object);
    names_only(object);
    if object.get("default") == Some(&Value::Null) {
        object.remove("default");
    }
    if object.get("type").and_then(Value::as_str) == Some("integer") {
        object.remove("format");
    }
    if let Some(Value::String(text)) = object.get_mut("description") {
        *text = one_paragraph(text);
    }
}

/// Removes what makes `null` valid: from `type`, from `enum`, or an
/// `anyOf` of the schema and `null`, which becomes the schema.
fn drop_null(object: &mut Map<String, Value>) {
    let is_null = |value: &Value| value.get("type").and_then(Value::as_str) == Some("null");
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let single = match object.get("anyOf").and_then(Value::as_array) {
        Some(any) if any.len() == 2 && any.iter().any(is_null) => {
            any.iter().find(|s| !is_null(s)).cloned()
        }
        _ => None,
    };
    if let Some(Value::Object(inner)) = single {
        object.remove("anyOf");
        for (key, value) in inner {
            object.entry(key).or_insert(value);
        }
        drop_null(object);
    }
}

/// A `oneOf` of string constants (an enum's variants with doc comments)
/// as one `enum` of them.
fn names_only(object: &mut Map<String, Value>) {
    let names: Option<Vec<Value>> =
        object
            .get("oneOf")
            .and_then(Value::as_array)
            .and_then(|variants| {
                variants
                    .iter()
                    .map(|variant| variant.get("const").filter(|c| c.is_string()).cloned())
                    .collect()
            });
    if let Some(names) = names {
        object.remove("oneOf");
        object.insert("type".to_owned(), Value::from("string"));
        object.insert("enum".to_owned(), Value::Array(names));
    }
}

/// A doc comment's text with each paragraph on one line.
fn one_paragraph(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Lays `keywords` (an object) over the property `name`.
fn overlay(properties: &mut Map<String, Value>, name: &str, keywords: Value) {
    let property = properties
        .entry(name.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if let (Value::Object(property), Value::Object(keywords)) = (property, keywords) {
        property.extend(keywords);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    #[serde(rename_all = "snake_case")]
    enum Colour {
        Red,
        DarkBlue,
    }

    /// How loud: this line is for Rust readers.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    #[serde(rename_all = "snake_case")]
    enum Volume {
        /// Hardly.
        Quiet,
        /// Very.
        Loud,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    #[serde(deny_unknown_fields)]
    struct Part {
        /// Its name.
        name: String,
    }

    /// The arguments: this line is nobody's description.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// Where it is: a path,
        /// relative to the workspace.
        path: String,
        /// How many.
        #[schemars(range(min = 1, max = 9))]
        count: Option<u32>,
        #[serde(default)]
        colour: Option<Colour>,
        #[serde(default)]
        all: bool,
        parts: Vec<Part>,
        /// How loud it is.
        volume: Option<Volume>,
    }

    #[test]
    fn a_derived_schema_is_one_object_without_nulls_refs_or_formats() {
        let schema = parameters::<Args>(Vec::new());
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where it is: a path, relative to the workspace."},
                    "count": {"type": "integer", "minimum": 1, "maximum": 9, "description": "How many."},
                    "colour": {"type": "string", "enum": ["red", "dark_blue"]},
                    "all": {"type": "boolean", "default": false},
                    "volume": {"type": "string", "enum": ["quiet", "loud"], "description": "How loud it is."},
                    "parts": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string", "description": "Its name."}},
                            "required": ["name"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "parts"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn configured_keywords_land_on_their_property() {
        let schema = parameters::<Args>(vec![(
            "count",
            json!({"maximum": 4, "description": "How many (default 2)."}),
        )]);
        assert_eq!(
            schema["properties"]["count"],
            json!({"type": "integer", "minimum": 1, "maximum": 4, "description": "How many (default 2)."})
        );
        // A name no property has makes a property without a type.
        let schema = parameters::<Args>(vec![("cuont", json!({"maximum": 4}))]);
        assert_eq!(schema["properties"]["cuont"], json!({"maximum": 4}));
    }
}
