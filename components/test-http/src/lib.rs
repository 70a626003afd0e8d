//! Test fixture: `fetch_many` sends up to `n` GET requests in one call and reports how many got
//! a response and the first error, to test the host's per-call request cap; `secret_exists` asks
//! `chitin:host/secrets` about a name.

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

#[derive(Deserialize, JsonSchema)]
struct SecretArgs {
    /// The secret's name
    name: String,
}

#[derive(Serialize, JsonSchema)]
struct SecretOutput {
    /// Whether it exists
    exists: bool,
}

fn secret_exists(args: SecretArgs) -> Result<SecretOutput, ToolError> {
    chitin_sdk::secrets::exists(&args.name).map(|exists| SecretOutput { exists })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("fetch_many", "Fetches a URL n times.", fetch_many),
        Tool::new("secret_exists", "Whether a secret exists.", secret_exists),
    ]
}

chitin_sdk::export_tools!(tools);
