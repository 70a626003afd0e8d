//! JSON Schemas for tool arguments and results.
//!
//! Input schemas are shaped for the strictest consumer, OpenAI-style function calling: no type
//! arrays (`"type": ["string", "null"]` is rejected there), "any value" written as a schema with no
//! `type`, subschemas inlined, and an object at the top with `properties` and `required`.

use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// The input schema for an argument type `T`, in the OpenAI-compatible form.
pub fn input_schema<T: JsonSchema>() -> Value {
    let settings = base_settings()
        .for_deserialize()
        .with_transform(OpenAiCompat);
    object_root(settings.into_generator().into_root_schema_for::<T>())
}

/// The output schema for a result type `T`: exact for what `T` serialises to (nullable fields keep
/// their `null`, since clients validate structured results against it), inlined, an object at the
/// top.
pub fn output_schema<T: JsonSchema>() -> Value {
    let settings = base_settings()
        .for_serialize()
        .with_transform(ReplaceTrueSchema);
    object_root(settings.into_generator().into_root_schema_for::<T>())
}

fn base_settings() -> SchemaSettings {
    SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    })
}

/// Makes the root `{"type": "object", "properties": {..}, "required": [..]}`, whatever `T` is:
/// tool arguments and results are always JSON objects.
fn object_root(mut schema: Schema) -> Value {
    let root = schema.ensure_object();
    // The title is the Rust type's name and the description its doc comment, written for Rust
    // readers; the agent reads the tool's own description instead.
    root.remove("title");
    root.remove("description");
    root.insert("type".into(), "object".into());
    root.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    root.entry("required").or_insert_with(|| json!([]));
    schema.to_value()
}

/// Turns the `true` schema ("any value") into `{}` everywhere, keeping any description.
#[derive(Clone)]
struct ReplaceTrueSchema;

impl Transform for ReplaceTrueSchema {
    fn transform(&mut self, schema: &mut Schema) {
        if schema.as_bool() == Some(true) {
            schema.ensure_object();
        }
        transform_subschemas(self, schema);
    }
}

/// Rewrites a schema into the subset OpenAI-style function calling accepts.
#[derive(Clone)]
struct OpenAiCompat;

impl Transform for OpenAiCompat {
    fn transform(&mut self, schema: &mut Schema) {
        // Children first, so a branch merged into its parent below is already rewritten.
        transform_subschemas(self, schema);
        if schema.as_bool() == Some(true) {
            schema.ensure_object();
        }
        let Some(object) = schema.as_object_mut() else {
            return;
        };
        drop_null_from_type(object);
        drop_null_branches(object, "anyOf");
        drop_null_branches(object, "oneOf");
        drop_numeric_format(object);
        // `#[serde(default)]` on an `Option` documents `"default": null`, which the now
        // non-nullable type contradicts.
        if object.get("default").is_some_and(Value::is_null) {
            object.remove("default");
        }
    }
}

/// `"type": [T, "null"]` becomes `"type": T`; several non-null types become an `anyOf`.
fn drop_null_from_type(object: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = object.get("type") else {
        return;
    };
    let had_null = types.iter().any(is_null_str);
    let mut kept: Vec<Value> = types.iter().filter(|t| !is_null_str(t)).cloned().collect();
    if had_null {
        // An optional enum also lists `null` among its values.
        if let Some(Value::Array(values)) = object.get_mut("enum") {
            values.retain(|v| !v.is_null());
        }
    }
    match kept.len() {
        0 => {
            object.insert("type".into(), "null".into());
        }
        1 => {
            object.insert("type".into(), kept.remove(0));
        }
        _ => {
            object.remove("type");
            let branches = kept.into_iter().map(|t| json!({ "type": t })).collect();
            add_any_of(object, branches);
        }
    }
}

/// Adds an `anyOf`; when one is already there both must hold, so they go under `allOf`.
fn add_any_of(object: &mut Map<String, Value>, branches: Vec<Value>) {
    match object.remove("anyOf") {
        None => {
            object.insert("anyOf".into(), Value::Array(branches));
        }
        Some(existing) => {
            let all_of = object.entry("allOf").or_insert_with(|| json!([]));
            if let Value::Array(all_of) = all_of {
                all_of.push(json!({ "anyOf": existing }));
                all_of.push(json!({ "anyOf": branches }));
            }
        }
    }
}

/// Removes `{"type": "null"}` branches of an `anyOf`/`oneOf`; a lone remaining branch is merged
/// into the parent (the parent's own keys, such as the field's description, win).
fn drop_null_branches(object: &mut Map<String, Value>, key: &str) {
    let Some(Value::Array(branches)) = object.get_mut(key) else {
        return;
    };
    let before = branches.len();
    branches.retain(|b| !is_null_schema(b));
    match branches.len() {
        n if n == before || n > 1 => {}
        0 => {
            object.remove(key);
            object.insert("type".into(), "null".into());
        }
        _ => {
            if let Some(Value::Object(only)) = branches.pop() {
                object.remove(key);
                for (k, v) in only {
                    object.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// schemars marks integer widths with formats such as `uint32` that no JSON Schema consumer knows
/// (some reject them); `minimum` already carries the sign.
fn drop_numeric_format(object: &mut Map<String, Value>) {
    let numeric = matches!(
        object.get("type").and_then(Value::as_str),
        Some("integer" | "number")
    );
    if numeric {
        object.remove("format");
    }
}

fn is_null_str(value: &Value) -> bool {
    value.as_str() == Some("null")
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").is_some_and(is_null_str) || schema.get("const").is_some_and(Value::is_null)
}
