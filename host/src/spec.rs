//! Tool specs as the host keeps them: checked once at load, with the argument validator compiled.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::bindings::exports::chitin::tool::tool::ToolSpec as WitToolSpec;
use crate::error::ToolError;

/// Behaviour hints of a tool (MCP tool annotations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Annotations {
    /// Changes nothing outside its result.
    pub read_only: bool,
    /// May destroy or overwrite data.
    pub destructive: bool,
    /// Repeating a call has no further effect.
    pub idempotent: bool,
    /// Reaches an open world (internet, other systems).
    pub open_world: bool,
}

/// A tool as an agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Unique name.
    pub name: String,
    /// Description for the agent.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of a successful result, when declared.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
}

/// A call's arguments: the JSON text the component is given, and the value read from it once
/// for the policy's rules and the schema (large arguments are not parsed again for each).
pub struct CallArgs<'a> {
    json: &'a str,
    value: Result<Value, serde_json::Error>,
}

/// What a rule sees of arguments that are not JSON; the schema check refuses them.
static NOT_JSON: Value = Value::Null;

impl<'a> CallArgs<'a> {
    /// Read `json` once.
    pub fn parse(json: &'a str) -> Self {
        Self {
            json,
            value: serde_json::from_str(json),
        }
    }

    /// The arguments as the caller wrote them.
    pub fn json(&self) -> &'a str {
        self.json
    }

    /// The arguments' value; null when they are not JSON.
    pub fn value(&self) -> &Value {
        self.value.as_ref().unwrap_or(&NOT_JSON)
    }
}

/// A spec together with its compiled argument validator.
pub struct CheckedSpec {
    /// The spec, named as agents see the tool.
    pub spec: ToolSpec,
    /// `spec.name` shared, so a call's state refers to it without a copy.
    pub name: Arc<str>,
    /// The name the component itself gives the tool (what its manifest and `call` use).
    pub own_name: String,
    /// Whether the input schema names `x-mcp-header` anywhere, so the MCP HTTP transport
    /// checks `Mcp-Param-*` headers against it; found once here rather than on every request.
    pub names_param_headers: bool,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CheckedSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.spec.fmt(f)
    }
}

/// The name agents see for tool `tool` of a component in `namespace`: a third party's tools
/// carry their namespace (`acme__word_count`), the first party's do not.
pub fn exposed_name(namespace: &str, tool: &str) -> String {
    if namespace == crate::policy::FIRST_PARTY {
        tool.to_owned()
    } else {
        format!(
            "{namespace}{}{tool}",
            chitin_registry::manifest::NAME_SEPARATOR
        )
    }
}

pub use chitin_registry::manifest::MAX_TOOL_NAME;

/// The schema keyword that asks for an argument to be repeated in an `Mcp-Param-*` header.
const PARAM_HEADER_KEYWORD: &str = "x-mcp-header";

/// Whether `key` is a member name of any object in `value`, at any depth.
fn names_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.contains_key(key) || map.values().any(|v| names_key(v, key)),
        Value::Array(items) => items.iter().any(|v| names_key(v, key)),
        _ => false,
    }
}

/// A spec as the component returned it, in the form the signed manifest records.
pub fn recorded(wit: &WitToolSpec) -> chitin_registry::manifest::ToolSpec {
    let a = &wit.annotations;
    chitin_registry::manifest::ToolSpec {
        name: wit.name.clone(),
        description: wit.description.clone(),
        input_schema: wit.input_schema.clone(),
        output_schema: wit.output_schema.clone(),
        annotations: chitin_registry::manifest::ToolAnnotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        },
    }
}

impl CheckedSpec {
    /// Check a spec a component returned and compile its schema; the error says what is wrong.
    pub fn from_wit(wit: WitToolSpec) -> Result<Self, (String, String)> {
        Self::from_recorded(recorded(&wit))
    }

    /// Check a spec in the form the manifest records it and compile its schema; the error
    /// says what is wrong.
    pub fn from_recorded(
        spec: chitin_registry::manifest::ToolSpec,
    ) -> Result<Self, (String, String)> {
        let name = spec.name;
        let fail = |reason: String| (name.clone(), reason);
        if let Some(problem) = chitin_registry::manifest::tool_name_problem(&name) {
            return Err(fail(problem));
        }
        let input_schema: Value = serde_json::from_str(&spec.input_schema)
            .map_err(|e| fail(format!("input schema is not JSON: {e}")))?;
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(fail(
                "input schema must be an object schema (`\"type\": \"object\"`)".into(),
            ));
        }
        let validator = jsonschema::validator_for(&input_schema)
            .map_err(|e| fail(format!("input schema is not a valid JSON Schema: {e}")))?;
        let output_schema = match spec.output_schema {
            Some(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| fail(format!("output schema is not JSON: {e}")))?,
            ),
            None => None,
        };
        let a = spec.annotations;
        Ok(Self {
            own_name: name.clone(),
            name: Arc::from(name.as_str()),
            names_param_headers: names_key(&input_schema, PARAM_HEADER_KEYWORD),
            spec: ToolSpec {
                name: name.clone(),
                description: spec.description,
                input_schema,
                output_schema,
                annotations: Annotations {
                    read_only: a.read_only,
                    destructive: a.destructive,
                    idempotent: a.idempotent,
                    open_world: a.open_world,
                },
            },
            validator,
        })
    }

    /// Expose the tool as `<namespace>__<own name>`, so a third party's tools never collide
    /// with the built-ins or with another publisher's.
    pub fn namespace(&mut self, namespace: &str) -> Result<(), (String, String)> {
        let name = exposed_name(namespace, &self.own_name);
        if name.len() > MAX_TOOL_NAME {
            return Err((
                self.own_name.clone(),
                format!("its namespaced name `{name}` is longer than {MAX_TOOL_NAME} characters"),
            ));
        }
        self.name = Arc::from(name.as_str());
        self.spec.name = name;
        Ok(())
    }

    /// Validate call arguments against the input schema. The error names each offending field
    /// (by JSON pointer) and what is wrong with it.
    pub fn validate_args(&self, args: &CallArgs<'_>) -> Result<(), ToolError> {
        let value = args
            .value
            .as_ref()
            .map_err(|e| ToolError::InvalidArgs(format!("arguments are not valid JSON: {e}")))?;
        // The common case answers without building error reports.
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let problems: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("`{at}`: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ToolError::InvalidArgs(format!(
                "arguments do not match the schema of `{}`: {}",
                self.spec.name,
                problems.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(input_schema: &str) -> CheckedSpec {
        CheckedSpec::from_recorded(chitin_registry::manifest::ToolSpec {
            name: "t".into(),
            description: String::new(),
            input_schema: input_schema.into(),
            output_schema: None,
            annotations: Default::default(),
        })
        .expect("a valid spec")
    }

    #[test]
    fn a_header_keyword_is_found_at_any_depth_once_at_load() {
        let nested = r#"{"type": "object", "properties": {"a": {"type": "object",
            "properties": {"b": {"type": "string", "x-mcp-header": "B"}}}}}"#;
        assert!(checked(nested).names_param_headers);
        let listed = r#"{"type": "object", "anyOf": [{"x-mcp-header": "B"}]}"#;
        assert!(checked(listed).names_param_headers);
        let plain = r#"{"type": "object", "properties": {"a": {"type": "string"}}}"#;
        assert!(!checked(plain).names_param_headers);
    }
}
