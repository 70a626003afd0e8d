//! The `http` tool: an outbound HTTPS request an agent writes. The host decides what leaves
//! (allowlist, SSRF, size and rate caps, leak scan, credential injection); this component only
//! shapes the request and the result.

use chitin_sdk::budget;
use chitin_sdk::http::{self, Request};
use chitin_sdk::prelude::*;

/// Body bytes kept for the result: four bytes per character of the largest `max_chars` the
/// result can show by default. The rest is read and counted (the host caps it at 5 MiB).
const KEEP_BODY: usize = 1024 * 1024;

#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "UPPERCASE")]
enum Method {
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct Header {
    /// Header name
    name: String,
    /// Header value
    value: String,
}

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The HTTP method
    method: Method,
    /// The https:// URL to request
    url: String,
    /// Request headers
    #[serde(default)]
    headers: Vec<Header>,
    /// The request body: a string is sent as is, any other value as JSON
    body: Option<Value>,
    /// Seconds to wait at most (the call's own deadline still applies)
    timeout_secs: Option<u32>,
    /// Most characters of the response body to return (default 50000)
    max_chars: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct ResponseHeader {
    /// Header name
    name: String,
    /// Header value
    value: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The HTTP status code (3xx included: redirects are not followed)
    status: u16,
    /// Response headers
    headers: Vec<ResponseHeader>,
    /// The response body as text (invalid UTF-8 replaced); parsed JSON when it is JSON
    body: Value,
    /// Bytes of body received
    bytes: u64,
    /// Whether the body was cut (at `max_chars`, past the first MiB kept, or to what the call's
    /// result may hold; a JSON body cut is returned as text)
    truncated: bool,
}

fn request(args: Args) -> Result<Output, ToolError> {
    let mut headers: Vec<(String, String)> = args
        .headers
        .into_iter()
        .map(|h| (h.name, h.value))
        .collect();
    let body = match args.body {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.into_bytes()),
        Some(value) => {
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                headers.push(("content-type".into(), "application/json".into()));
            }
            Some(value.to_string().into_bytes())
        }
    };
    let response = http::send(&Request {
        method: args.method.as_str().into(),
        url: args.url,
        headers,
        body,
        timeout_ms: args.timeout_secs.map(|s| u64::from(s) * 1000),
        max_body_bytes: KEEP_BODY,
    })?;
    let max = args.max_chars.unwrap_or(50_000) as usize;
    let text = String::from_utf8_lossy(&response.body);
    let cut = text.chars().count() > max;
    let is_json = response
        .header("content-type")
        .is_some_and(|t| t.contains("json"));
    let body = match chitin_sdk::serde_json::from_str::<Value>(&text) {
        Ok(json) if is_json && !cut => json,
        _ if cut => Value::String(text.chars().take(max).collect()),
        _ => Value::String(text.into_owned()),
    };
    let mut out = Output {
        status: response.status,
        bytes: response.total_bytes,
        headers: response
            .headers
            .into_iter()
            .map(|(name, value)| ResponseHeader { name, value })
            .collect(),
        body,
        truncated: cut || response.truncated,
    };
    if let Some(budget) = budget::output_bytes() {
        fit(&mut out, budget);
    }
    Ok(out)
}

/// Cut the body until `out` fits `budget` bytes; parsed JSON that does not fit is cut as text.
fn fit(out: &mut Output, budget: usize) {
    if budget::json_len(out) <= budget {
        return;
    }
    let mut text = match std::mem::take(&mut out.body) {
        Value::String(text) => text,
        json => json.to_string(),
    };
    // What the rest of the result takes: all of it with an empty body, less that body's quotes.
    out.body = Value::String(String::new());
    let rest = budget::json_len(out).saturating_sub(2);
    budget::cut_text(&mut text, |t| t, budget.saturating_sub(rest));
    out.body = Value::String(text);
    out.truncated = true;
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "http",
            "Sends an HTTPS request (GET, HEAD, POST, PUT, PATCH, DELETE) to a public host and \
             returns status, headers and body. Redirects are not followed; private and local \
             addresses are refused; bodies are capped (1 MiB out, 5 MiB in).",
            request,
        )
        .open_world()
        .output_schema::<Output>(),
    ]
}

chitin_sdk::export_tools!(tools);
