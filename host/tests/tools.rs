//! Every first-party tool's normal path and invalid-args path, through the host.

use crate::common;

use chitin_host::ToolError;
use common::{TestEnv, component};
use serde_json::json;

async fn env() -> TestEnv {
    TestEnv::with(&[component("echo"), component("time"), component("json")]).await
}

fn invalid_args(report: &chitin_host::CallReport) -> String {
    match &report.result {
        Err(ToolError::InvalidArgs(m)) => m.clone(),
        other => panic!("expected invalid-args, got {other:?}"),
    }
}

#[tokio::test]
async fn lists_the_builtin_tools_in_name_order() {
    let env = env().await;
    let names: Vec<_> = env.host.tools().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["echo", "json", "time"]);
}

#[tokio::test]
async fn echo_returns_its_message() {
    let env = env().await;
    let out = env.ok("echo", json!({"message": "hi ✓"})).await;
    assert_eq!(out, json!({"message": "hi ✓"}));
}

#[tokio::test]
async fn echo_without_a_message_is_invalid_args_naming_the_field() {
    let env = env().await;
    let msg = invalid_args(&env.call("echo", json!({})).await);
    assert!(msg.contains("message"), "{msg}");
    let msg = invalid_args(&env.call("echo", json!({"message": 5})).await);
    assert!(msg.contains("/message"), "{msg}");
}

#[tokio::test]
async fn time_now_parse_format_and_diff() {
    let env = env().await;
    let now = env.ok("time", json!({"operation": "now"})).await;
    assert!(now["unix"].as_i64().unwrap() > 1_700_000_000, "{now}");
    assert!(now["iso"].as_str().unwrap().contains('T'), "{now}");

    let parsed = env
        .ok(
            "time",
            json!({"operation": "parse", "timestamp": "2024-02-29T12:00:00Z"}),
        )
        .await;
    assert_eq!(parsed["unix"], json!(1_709_208_000));
    assert_eq!(parsed["unix_millis"], json!(1_709_208_000_000i64));

    let unix = env
        .ok(
            "time",
            json!({"operation": "parse", "timestamp": "1709208000"}),
        )
        .await;
    assert_eq!(unix["unix"], json!(1_709_208_000));

    let formatted = env
        .ok(
            "time",
            json!({"operation": "format", "timestamp": "2024-02-29T12:00:00Z", "format": "%Y/%m/%d %H:%M"}),
        )
        .await;
    assert_eq!(formatted["formatted"], json!("2024/02/29 12:00"));

    let diff = env
        .ok(
            "time",
            json!({"operation": "diff", "timestamp": "2024-01-01T00:00:00Z", "timestamp2": "2024-01-01T01:00:30Z"}),
        )
        .await;
    assert_eq!(diff["seconds"].as_f64(), Some(3630.0), "{diff}");
}

#[tokio::test]
async fn time_rejects_bad_operations_timestamps_and_formats() {
    let env = env().await;
    let msg = invalid_args(&env.call("time", json!({"operation": "tomorrow"})).await);
    assert!(msg.contains("/operation"), "{msg}");
    let msg = invalid_args(&env.call("time", json!({"operation": "parse"})).await);
    assert!(msg.contains("timestamp"), "{msg}");
    let msg = invalid_args(
        &env.call(
            "time",
            json!({"operation": "parse", "timestamp": "not a time"}),
        )
        .await,
    );
    assert!(msg.contains("not a time"), "{msg}");
    let msg = invalid_args(
        &env.call(
            "time",
            json!({"operation": "format", "timestamp": "2024-01-01T00:00:00Z", "format": "%Q%"}),
        )
        .await,
    );
    assert!(msg.to_lowercase().contains("format"), "{msg}");
}

#[tokio::test]
async fn json_parse_query_stringify_validate() {
    let env = env().await;
    let parsed = env
        .ok(
            "json",
            json!({"operation": "parse", "data": "{\"a\": [1, 2]}"}),
        )
        .await;
    assert_eq!(parsed["value"], json!({"a": [1, 2]}));

    let queried = env
        .ok(
            "json",
            json!({"operation": "query", "data": {"books": [{"t": "A", "p": 5}, {"t": "B", "p": 15}]}, "path": "$.books[?@.p > 10].t"}),
        )
        .await;
    assert_eq!(queried["matches"], json!(["B"]));
    assert_eq!(queried["count"], json!(1));

    let text = env
        .ok(
            "json",
            json!({"operation": "stringify", "data": {"k": [true, null]}}),
        )
        .await;
    assert_eq!(text["json"], json!("{\"k\":[true,null]}"));

    let valid = env
        .ok("json", json!({"operation": "validate", "data": "[1, 2"}))
        .await;
    assert_eq!(valid["valid"], json!(false));
    assert!(valid["error"].is_string(), "{valid}");
    let valid = env
        .ok("json", json!({"operation": "validate", "data": "[1, 2]"}))
        .await;
    assert_eq!(valid["valid"], json!(true));
}

#[tokio::test]
async fn json_rejects_missing_data_bad_paths_and_bad_text() {
    let env = env().await;
    let msg = invalid_args(&env.call("json", json!({"operation": "parse"})).await);
    assert!(msg.contains("data"), "{msg}");
    let msg = invalid_args(
        &env.call(
            "json",
            json!({"operation": "query", "data": {}, "path": "$[?"}),
        )
        .await,
    );
    assert!(!msg.is_empty());
    let msg = invalid_args(
        &env.call("json", json!({"operation": "parse", "data": "{oops"}))
            .await,
    );
    assert!(msg.contains("line"), "{msg}");
}

#[tokio::test]
async fn json_schema_of_data_accepts_any_value_and_has_no_type() {
    let env = env().await;
    let spec = env.host.tool("json").expect("json tool");
    let data = &spec.input_schema["properties"]["data"];
    assert!(data.is_object(), "{data}");
    assert!(data.get("type").is_none(), "{data}");
    let text = spec.input_schema.to_string();
    assert!(
        !text.contains("\"type\":["),
        "type arrays are not OpenAI-compatible: {text}"
    );
}
