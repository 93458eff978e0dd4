//! The OpenAPI document (`schema/openapi.json`), generated: `paths` from
//! the description of each route (`operations`, one per entry of
//! `routes::table()`), `components.schemas` from the types the routes take
//! and answer (`views`, the request types), by `schemars`. A test
//! regenerates it and fails while the committed file differs;
//! `PINCER_UPDATE_OPENAPI=1 cargo test --lib openapi` rewrites it.

mod operations;
mod schemas;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

pub use operations::operations;

/// Where the generated document is kept, from the repository's top.
pub const FILE: &str = "schema/openapi.json";

/// A schema of `T`, as a reference to its component.
pub fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A schema, made when the document is built.
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// What one route takes and answers.
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    id: &'static str,
    summary: &'static str,
    /// No bearer token: the probes and the channels' own endpoints.
    public: bool,
    parameters: Option<Value>,
    body: Option<Body>,
    responses: Vec<(u16, Answer)>,
}

enum Body {
    /// A JSON body of this schema, required.
    Json(SchemaFn),
    /// A `requestBody` object as written.
    Raw(Value),
}

enum Answer {
    /// A JSON body of this schema.
    Json(&'static str, SchemaFn),
    /// The error body (`{"error": {"code", "message"}}`).
    Error(&'static str),
    /// A response object as written (no body, or another media type).
    Raw(Value),
}

impl Operation {
    pub fn new(
        method: &'static str,
        path: &'static str,
        id: &'static str,
        summary: &'static str,
    ) -> Self {
        Self {
            method,
            path,
            id,
            summary,
            public: false,
            parameters: None,
            body: None,
            responses: Vec::new(),
        }
    }

    pub fn public(mut self) -> Self {
        self.public = true;
        self
    }

    pub fn parameters(mut self, parameters: Value) -> Self {
        self.parameters = Some(parameters);
        self
    }

    pub fn body(mut self, schema: SchemaFn) -> Self {
        self.body = Some(Body::Json(schema));
        self
    }

    pub fn raw_body(mut self, body: Value) -> Self {
        self.body = Some(Body::Raw(body));
        self
    }

    pub fn answer(mut self, status: u16, description: &'static str, schema: SchemaFn) -> Self {
        self.responses
            .push((status, Answer::Json(description, schema)));
        self
    }

    pub fn error(mut self, status: u16, description: &'static str) -> Self {
        self.responses.push((status, Answer::Error(description)));
        self
    }

    pub fn raw(mut self, status: u16, response: Value) -> Self {
        self.responses.push((status, Answer::Raw(response)));
        self
    }

    /// The operation object: request schemas from `requests` (which
    /// describes what is read), answers' from `responses` (what is written).
    fn to_json(&self, requests: &mut SchemaGenerator, responses: &mut SchemaGenerator) -> Value {
        let mut op = Map::new();
        op.insert("operationId".into(), json!(self.id));
        op.insert("summary".into(), json!(self.summary));
        if self.public {
            op.insert("security".into(), json!([]));
        }
        if let Some(parameters) = &self.parameters {
            op.insert("parameters".into(), parameters.clone());
        }
        match &self.body {
            Some(Body::Json(schema)) => {
                op.insert(
                    "requestBody".into(),
                    json!({"required": true, "content": {"application/json": {"schema": schema(requests)}}}),
                );
            }
            Some(Body::Raw(body)) => {
                op.insert("requestBody".into(), body.clone());
            }
            None => {}
        }
        let generator = responses;
        let mut responses = Map::new();
        // Every route behind the token answers these, from the guard.
        let guarded = [
            (401, Answer::Error("Missing or invalid bearer token")),
            (
                429,
                Answer::Error("Rate limit exceeded; `Retry-After` says when to retry"),
            ),
        ];
        let guard = guarded.iter().filter(|_| !self.public);
        let mut answers: Vec<&(u16, Answer)> = self.responses.iter().chain(guard).collect();
        answers.sort_by_key(|(status, _)| *status);
        for (status, answer) in answers {
            let response = match answer {
                Answer::Json(description, schema) => json!({
                    "description": description,
                    "content": {"application/json": {"schema": schema(generator)}},
                }),
                Answer::Error(description) => {
                    let mut response = json!({
                        "description": description,
                        "content": {"application/json": {"schema": schema::<schemas::ErrorBody>(generator)}},
                    });
                    if *status == 429 {
                        response["headers"] = json!({"Retry-After": {
                            "description": "Seconds until a request would be accepted",
                            "schema": {"type": "integer", "minimum": 1},
                        }});
                    }
                    response
                }
                Answer::Raw(response) => response.clone(),
            };
            responses.insert(status.to_string(), response);
        }
        op.insert("responses".into(), Value::Object(responses));
        Value::Object(op)
    }
}

/// A generator of schemas that describe how values are read or written.
fn generator(serialize: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12().with(|settings| {
        settings.definitions_path = "/components/schemas".into();
        settings.meta_schema = None;
    });
    if serialize {
        settings.for_serialize().into_generator()
    } else {
        settings.for_deserialize().into_generator()
    }
}

/// The whole document.
///
/// # Panics
///
/// When a type read and a type written share a component name but not a
/// schema (a test builds the document).
pub fn document() -> Value {
    let mut requests = generator(false);
    let mut responses = generator(true);
    // Components the written-out parts refer to by name.
    schema::<schemas::ErrorBody>(&mut responses);
    schema::<schemas::ChannelError>(&mut responses);
    schema::<schemas::StreamEvent>(&mut responses);
    let mut paths = Map::new();
    for operation in operations() {
        let item = paths
            .entry(operation.path)
            .or_insert_with(|| Value::Object(Map::new()));
        item[operation.method] = operation.to_json(&mut requests, &mut responses);
    }
    let mut schemas = responses.take_definitions(true);
    for (name, schema) in requests.take_definitions(true) {
        let same = schemas.get(&name).is_none_or(|written| *written == schema);
        assert!(same, "the component {name} is read and written differently");
        schemas.insert(name, schema);
    }
    let mut schemas = Value::Object(schemas);
    unwrap_descriptions(&mut schemas);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Pincer HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP face of `pincer serve --http` (docs/http.md). Every route but the health probes and the channels' own endpoints (`/channels/…`, signed by their platforms) needs `Authorization: Bearer TOKEN`. Errors are `{\"error\": {\"code\", \"message\"}}`. Generated from the server's types (`PINCER_UPDATE_OPENAPI=1 cargo test --lib openapi`).",
        },
        "servers": [{"url": "http://127.0.0.1:8787"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        },
    })
}

/// Descriptions from doc comments as one line each, without the period a
/// Rust comment ends with.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                match inner {
                    Value::String(text) if key == "description" => {
                        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
                        *text = joined.strip_suffix('.').unwrap_or(&joined).to_owned();
                    }
                    Value::Null
                    | Value::Bool(_)
                    | Value::Number(_)
                    | Value::String(_)
                    | Value::Array(_)
                    | Value::Object(_) => unwrap_descriptions(inner),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// The document as the committed file holds it: two-space indents, a
/// final newline.
pub fn text() -> String {
    let mut text = serde_json::to_string_pretty(&document()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The committed document is what the types and descriptions make.
    #[test]
    fn the_committed_openapi_document_is_generated() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
        let generated = text();
        if std::env::var_os("PINCER_UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == generated,
            "{FILE} is not what the server's types make; regenerate it with\n  \
             PINCER_UPDATE_OPENAPI=1 cargo test --lib openapi\nand commit it"
        );
    }

    /// Every route served is described, once, and nothing else.
    #[test]
    fn every_route_has_a_description() {
        let served: BTreeSet<(String, String)> = crate::http::routes::paths()
            .into_iter()
            .map(|(method, path)| (method, path.to_owned()))
            .collect();
        let described: Vec<(String, String)> = operations()
            .iter()
            .map(|op| (op.method.to_owned(), op.path.to_owned()))
            .collect();
        let unique: BTreeSet<_> = described.iter().cloned().collect();
        assert_eq!(unique.len(), described.len(), "a route described twice");
        assert_eq!(served, unique);
    }

    /// Every `$ref` names a component the document has.
    #[test]
    fn every_reference_resolves() {
        fn walk(value: &Value, refs: &mut BTreeSet<String>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(target)) = map.get("$ref") {
                        refs.insert(target.clone());
                    }
                    map.values().for_each(|v| walk(v, refs));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, refs)),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
            }
        }
        let document = document();
        let mut refs = BTreeSet::new();
        walk(&document, &mut refs);
        for target in refs {
            let name = target.strip_prefix("#/components/schemas/").unwrap();
            assert!(
                document["components"]["schemas"][name].is_object(),
                "{target} is no component"
            );
        }
    }
}
