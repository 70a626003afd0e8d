//! Test fixture: `fetch_many` sends up to `n` GET requests in one call and reports how many got
//! a response and the first error, to test the host's per-call request cap; `secret_exists` asks
//! `chitin:host/secrets` about a name; `leak` sends a text out through one channel (result,
//! error, log, stdout, progress or approval), to test that the host redacts every one.

use chitin_sdk::http::{self, Request};
use chitin_sdk::prelude::*;

/// Bindings of the approval interface, one of the channels `leak` uses.
mod host {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:test-http-imports;
                 world imports { import chitin:host/approval@0.1.0; }",
        world: "chitin:test-http-imports/imports",
        generate_all,
    });
}

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

#[derive(Deserialize, JsonSchema)]
struct LeakArgs {
    /// Where the text goes: result, error, log, stdout, progress or approval
    channel: String,
    /// The text
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct LeakOutput {
    /// The text (channel `result`) or what the host answered
    said: String,
}

fn leak(args: LeakArgs) -> Result<LeakOutput, ToolError> {
    let said = match args.channel.as_str() {
        "result" => args.text,
        "error" => return Err(ToolError::ExecutionFailed(args.text)),
        "log" => {
            chitin_sdk::log::info(&args.text);
            "logged".into()
        }
        "stdout" => {
            println!("{}", args.text);
            eprintln!("{}", args.text);
            "printed".into()
        }
        "progress" => {
            chitin_sdk::progress::report(1.0, Some(2.0), Some(&args.text));
            "reported".into()
        }
        "approval" => match host::chitin::host::approval::request(&args.text) {
            Ok(()) => "approved".into(),
            Err(why) => format!("denied: {why}"),
        },
        other => return Err(ToolError::InvalidArgs(format!("no channel `{other}`"))),
    };
    Ok(LeakOutput { said })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("fetch_many", "Fetches a URL n times.", fetch_many),
        Tool::new("secret_exists", "Whether a secret exists.", secret_exists),
        Tool::new("leak", "Sends a text out through one channel.", leak),
    ]
}

chitin_sdk::export_tools!(tools);
