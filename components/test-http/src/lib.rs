//! Test fixture: `fetch_many` sends up to `n` GET requests in one call and reports how many got
//! a response and the first error, to test the host's per-call request cap.

use chitin_sdk::http::{self, Request};
use chitin_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The URL to fetch
    url: String,
    /// How many times
    n: u32,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// Requests that got a response
    sent: u32,
    /// The first error, if any
    first_error: Option<String>,
}

fn fetch_many(args: Args) -> Result<Output, ToolError> {
    let mut sent = 0;
    for _ in 0..args.n {
        let request = Request {
            method: "GET".into(),
            url: args.url.clone(),
            headers: Vec::new(),
            body: None,
            timeout_ms: None,
            max_body_bytes: 64 * 1024,
        };
        match http::send(&request) {
            Ok(_) => sent += 1,
            Err(e) => {
                return Ok(Output {
                    sent,
                    first_error: Some(format!("{e:?}")),
                });
            }
        }
    }
    Ok(Output {
        sent,
        first_error: None,
    })
}

fn tools() -> Vec<Tool> {
    vec![Tool::new(
        "fetch_many",
        "Fetches a URL n times.",
        fetch_many,
    )]
}

chitin_sdk::export_tools!(tools);
