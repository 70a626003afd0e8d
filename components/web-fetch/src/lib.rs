//! The `web_fetch` tool: GET a public page and return it as Markdown when it is HTML. The host
//! enforces where it may go (HTTPS, public addresses, size caps); the conversion comes from the
//! `markdown` library component (`chitin:markdown/convert`), composed into this one at load.

use chitin_sdk::budget;
use chitin_sdk::http::{self, Request};
use chitin_sdk::prelude::*;

mod lib_markdown {
    wit_bindgen::generate!({
        path: "../markdown/wit",
        inline: "package chitin:web-fetch;
                 world imports { import chitin:markdown/convert@0.1.0; }",
        generate_all,
    });
}

use lib_markdown::chitin::markdown::convert;

/// Page bytes kept for conversion (the rest is read and counted; the host caps it at 5 MiB):
/// converting more would not fit a call's default 10 MiB of memory.
const KEEP_BODY: usize = 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The page's https:// URL
    url: String,
    /// Most characters of content to return (default 50000)
    max_chars: Option<u32>,
    /// Seconds to wait at most (the call's own deadline still applies)
    timeout_secs: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The HTTP status code
    status: u16,
    /// The response's Content-Type
    content_type: Option<String>,
    /// The URL fetched (redirects are not followed: see `location`)
    final_url: String,
    /// Where a redirect points, for a 3xx response
    location: Option<String>,
    /// Bytes of body received
    bytes: u64,
    /// The page title, when one was found
    title: Option<String>,
    /// The content: Markdown for HTML, the text itself for other text types
    content: String,
    /// Whether `content` was cut, to `max_chars` or to what the call's result may hold
    truncated: bool,
}

fn web_fetch(args: Args) -> Result<Output, ToolError> {
    let response = http::send(&Request {
        method: "GET".into(),
        url: args.url.clone(),
        headers: vec![(
            "accept".into(),
            "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5".into(),
        )],
        body: None,
        timeout_ms: args.timeout_secs.map(|s| u64::from(s) * 1000),
        max_body_bytes: KEEP_BODY,
    })?;
    let content_type = response.header("content-type").map(str::to_owned);
    let location = response.header("location").map(str::to_owned);
    let text = String::from_utf8_lossy(&response.body);
    let is_html = content_type
        .as_deref()
        .map(|t| t.contains("html"))
        .unwrap_or_else(|| text.trim_start().starts_with('<'));
    let (title, content) = if is_html && !text.trim().is_empty() {
        let converted = convert::html_to_markdown(&text, Some(&args.url))
            .map_err(ToolError::execution_failed)?;
        (converted.title, converted.markdown)
    } else {
        (None, text.into_owned())
    };
    let max = args.max_chars.unwrap_or(50_000) as usize;
    let truncated = content.chars().count() > max;
    let content = if truncated {
        content.chars().take(max).collect()
    } else {
        content
    };
    let mut out = Output {
        status: response.status,
        content_type,
        final_url: args.url,
        location,
        bytes: response.total_bytes,
        title,
        content,
        truncated: truncated || response.truncated,
    };
    if let Some(budget) = budget::output_bytes() {
        out.truncated |= budget::cut_text(&mut out, |o| &mut o.content, budget);
    }
    Ok(out)
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "web_fetch",
            "Fetches a public web page with GET over HTTPS and returns its main content as \
             Markdown (text types as they are), with status, content type and byte count. \
             Redirects are not followed: a 3xx comes back with its `location`.",
            web_fetch,
        )
        .read_only()
        .open_world()
        .output_schema::<Output>(),
    ]
}

chitin_sdk::export_tools!(tools);
