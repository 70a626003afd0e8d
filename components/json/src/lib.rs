//! The `json` tool: parse, query (JSONPath, RFC 9535), stringify and validate JSON.

use chitin_sdk::prelude::*;
use chitin_sdk::serde_json;
use serde::de::IgnoredAny;
use serde_json_path::JsonPath;

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Operation {
    Parse,
    Query,
    Stringify,
    Validate,
}

#[derive(Deserialize, JsonSchema)]
struct JsonArgs {
    /// What to do: 'parse' (JSON text to a value), 'query' (run a JSONPath query on data), 'stringify' (a value to JSON text), 'validate' (check JSON text)
    operation: Operation,
    /// JSON data to process (any value)
    data: Value,
    /// JSONPath query (RFC 9535) for 'query', e.g. "$.items[?@.price < 10].name"
    path: Option<String>,
    /// Indent the output of 'stringify'
    pretty: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
struct Parsed {
    /// The parsed value
    value: Value,
}

#[derive(Serialize, JsonSchema)]
struct Queried {
    /// The matching values, in document order
    matches: Vec<Value>,
    /// Where each match is, as a normalized path (RFC 9535), e.g. "$['items'][0]"
    paths: Vec<String>,
    /// How many values matched
    count: usize,
}

#[derive(Serialize, JsonSchema)]
struct Stringified {
    /// The data as JSON text
    json: String,
}

#[derive(Serialize, JsonSchema)]
struct Validated {
    /// Whether the text is valid JSON
    valid: bool,
    /// Why the text is not valid JSON
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Line of the first error (1-based)
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    /// Column of the first error (1-based)
    #[serde(skip_serializing_if = "Option::is_none")]
    column: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum JsonOutput {
    Parsed(Parsed),
    Queried(Queried),
    Stringified(Stringified),
    Validated(Validated),
}

fn json(args: JsonArgs) -> Result<JsonOutput, ToolError> {
    match args.operation {
        Operation::Parse => {
            let text = json_text(&args.data, "parse")?;
            Ok(JsonOutput::Parsed(Parsed {
                value: parse_text(text)?,
            }))
        }
        Operation::Query => {
            let path = args.path.ok_or_else(|| {
                ToolError::invalid_args("`path` is required for operation `query`")
            })?;
            let data = match &args.data {
                Value::String(text) => parse_text(text)?,
                _ => args.data,
            };
            Ok(JsonOutput::Queried(query(&data, &path)?))
        }
        Operation::Stringify => {
            let text = if args.pretty.unwrap_or(false) {
                serde_json::to_string_pretty(&args.data)
            } else {
                serde_json::to_string(&args.data)
            };
            let json = text.map_err(|e| ToolError::execution_failed(e.to_string()))?;
            Ok(JsonOutput::Stringified(Stringified { json }))
        }
        Operation::Validate => {
            let text = json_text(&args.data, "validate")?;
            Ok(JsonOutput::Validated(validate(text)))
        }
    }
}

/// The JSON text in `data`, which these operations need as a string.
fn json_text<'a>(data: &'a Value, operation: &str) -> Result<&'a str, ToolError> {
    data.as_str().ok_or_else(|| {
        ToolError::invalid_args(format!(
            "{operation} expects `data` to be a string of JSON text"
        ))
    })
}

fn parse_text(text: &str) -> Result<Value, ToolError> {
    serde_json::from_str(text)
        .map_err(|e| ToolError::invalid_args(format!("`data` is not valid JSON: {e}")))
}

fn query(data: &Value, path: &str) -> Result<Queried, ToolError> {
    let path = JsonPath::parse(path)
        .map_err(|e| ToolError::invalid_args(format!("invalid JSONPath `{path}`: {e}")))?;
    let nodes = path.query_located(data);
    let (paths, matches): (Vec<String>, Vec<Value>) = nodes
        .iter()
        .map(|node| (node.location().to_string(), node.node().clone()))
        .unzip();
    Ok(Queried {
        count: matches.len(),
        matches,
        paths,
    })
}

fn validate(text: &str) -> Validated {
    // Checking needs no tree: IgnoredAny walks the text without building values.
    match serde_json::from_str::<IgnoredAny>(text) {
        Ok(_) => Validated {
            valid: true,
            error: None,
            line: None,
            column: None,
        },
        Err(e) => Validated {
            valid: false,
            error: Some(e.to_string()),
            line: Some(e.line()),
            column: Some(e.column()),
        },
    }
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "json",
            "Parses, queries (JSONPath, RFC 9535), stringifies and validates JSON.",
            json,
        )
        .read_only()
        .idempotent()
        .output_schema::<JsonOutput>(),
    ]
}

chitin_sdk::export_tools!(tools);
