//! Tools as plain functions: the [`Tool`] builder and dispatch by name.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ToolError;
use crate::schema;

/// Behaviour hints an agent uses to decide how carefully to call a tool (MCP tool annotations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    /// The tool does not change anything outside its own result.
    pub read_only: bool,
    /// The tool may destroy or overwrite data.
    pub destructive: bool,
    /// Calling the tool twice with the same arguments has the effect of calling it once.
    pub idempotent: bool,
    /// The tool reaches an open world (the internet, other people's systems).
    pub open_world: bool,
}

/// Everything the host learns about a tool at load, with the schemas as JSON values.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Unique within the component; 1-64 characters of `[A-Za-z0-9_-]`.
    pub name: String,
    /// Plain-language description for the agent.
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// JSON Schema of a successful result, when declared.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
}

type Handler = Box<dyn Fn(&str) -> Result<String, ToolError>>;

/// One tool: a name, a description, and a handler from typed arguments to a serialisable result.
pub struct Tool {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    annotations: Annotations,
    input_schema: fn() -> Value,
    output_schema: Option<fn() -> Value>,
    handler: Handler,
}

impl Tool {
    /// A tool named `name` whose arguments are `A` (deserialised from the call's JSON) and whose
    /// result `O` is serialised back to JSON; `O` should serialise as a JSON object.
    pub fn new<A, O, F>(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        O: Serialize,
        F: Fn(A) -> Result<O, ToolError> + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            annotations: Annotations::default(),
            input_schema: schema::input_schema::<A>,
            output_schema: None,
            handler: Box::new(move |args_json| {
                let result = handler(parse_args(args_json)?)?;
                serde_json::to_string(&result).map_err(|e| {
                    ToolError::ExecutionFailed(format!("result does not serialise to JSON: {e}"))
                })
            }),
        }
    }

    /// A tool whose handler writes its result's JSON text itself (with [`crate::json`]), for a
    /// result too large to pass through `serde_json` cheaply; declare its shape with
    /// [`Tool::output_schema`].
    pub fn new_json<A, F>(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        F: Fn(A) -> Result<String, ToolError> + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            annotations: Annotations::default(),
            input_schema: schema::input_schema::<A>,
            output_schema: None,
            handler: Box::new(move |args_json| handler(parse_args(args_json)?)),
        }
    }

    /// Marks the tool read-only: it changes nothing outside its result.
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = true;
        self
    }

    /// Marks the tool destructive: it may destroy or overwrite data.
    pub fn destructive(mut self) -> Self {
        self.annotations.destructive = true;
        self
    }

    /// Marks the tool idempotent: repeating a call with the same arguments changes nothing more.
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = true;
        self
    }

    /// Marks the tool open-world: it reaches the internet or other people's systems.
    pub fn open_world(mut self) -> Self {
        self.annotations.open_world = true;
        self
    }

    /// Declares the schema of a successful result, generated from `T` (normally the handler's
    /// result type).
    pub fn output_schema<T: JsonSchema>(mut self) -> Self {
        self.output_schema = Some(schema::output_schema::<T>);
        self
    }

    /// Replaces the input schema generated from the argument type with `schema`, for schemas the
    /// generator does not write (JSON Schema 2020-12 keywords such as `$anchor` or `if`/`then`);
    /// the host still validates every call against it.
    pub fn input_schema(mut self, schema: fn() -> Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description, annotations and generated schemas.
    pub fn spec(&self) -> Spec {
        Spec {
            name: self.name.to_string(),
            description: self.description.to_string(),
            input_schema: (self.input_schema)(),
            output_schema: self.output_schema.map(|schema| schema()),
            annotations: self.annotations,
        }
    }

    /// Runs the tool on arguments given as JSON text; the result is JSON text.
    pub fn call(&self, args_json: &str) -> Result<String, ToolError> {
        (self.handler)(args_json)
    }
}

/// Runs the tool called `name` among `tools`; an unknown name is a [`ToolError::NotFound`] that
/// lists the tools there are.
pub fn dispatch(tools: &[Tool], name: &str, args_json: &str) -> Result<String, ToolError> {
    match tools.iter().find(|tool| tool.name == name) {
        Some(tool) => tool.call(args_json),
        None => {
            let names: Vec<&str> = tools.iter().map(Tool::name).collect();
            Err(ToolError::NotFound(format!(
                "unknown tool `{name}`; this component carries: {}",
                names.join(", ")
            )))
        }
    }
}

/// Deserialises arguments, naming the offending field in the error.
fn parse_args<A: DeserializeOwned>(args_json: &str) -> Result<A, ToolError> {
    // MCP lets a client omit `arguments`; that means an empty object, not a missing value.
    let text = match args_json.trim() {
        "" | "null" => "{}",
        text => text,
    };
    // Parsed plainly first: tracking the path costs a fifth of a small call's instructions, and
    // only an error needs it, so the text is parsed again with tracking to name the field.
    if let Ok(args) = serde_json::from_str(text) {
        return Ok(args);
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let args = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ToolError::InvalidArgs(inner.to_string())
        } else {
            ToolError::InvalidArgs(format!("`{path}`: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
    Ok(args)
}
