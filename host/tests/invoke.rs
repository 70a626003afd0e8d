//! Tools calling tools through `chitin:host/invoke`: aliases from the caller's manifest, the
//! policy applied to the callee, each side under its own grant, and the depth and count caps.

use crate::common;

use std::path::Path;

use chitin_host::approver::CallContext;
use chitin_host::policy::{ApprovalRule, Policy};
use chitin_host::{Host, Limits, Runtime, ToolError};
use chitin_registry::manifest::ApprovalHint;
use common::{component, fixture, policy, services, test_engine};
use serde_json::{Value, json};

/// A workspace with `mine/` (the invoke fixture's grant), `theirs/` (the reader fixture's) and
/// `other/` (neither's), and a host over it under `policy` with echo, fs and both fixtures.
async fn host(data: &Path, policy: Policy) -> Host {
    let ws = data.join("workspace");
    for (dir, text) in [("mine", "mine"), ("theirs", "theirs"), ("other", "other")] {
        std::fs::create_dir_all(ws.join(dir)).expect("dir");
        std::fs::write(ws.join(dir).join("f.txt"), text).expect("file");
    }
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, policy, services(data, &ws));
    for c in [
        component("echo"),
        component("fs"),
        fixture("test-invoke"),
        fixture("test-reader"),
    ] {
        host.load_path(&c).await.expect("load");
    }
    host
}

async fn ok(host: &Host, tool: &str, args: Value) -> Value {
    match host.call(tool, &args.to_string()).await.result {
        Ok(out) => out.json().expect("JSON"),
        Err(e) => panic!("{tool} {args}: {e}"),
    }
}

async fn err(host: &Host, tool: &str, args: Value) -> ToolError {
    match host.call(tool, &args.to_string()).await.result {
        Ok(out) => panic!("{tool} {args} succeeded: {}", out.text),
        Err(e) => e,
    }
}

#[tokio::test]
async fn each_side_of_an_invocation_keeps_its_own_grant() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), policy(Limits::default())).await;

    let out = ok(
        &h,
        "relay",
        json!({"alias": "echo", "args": {"message": "hi"}}),
    )
    .await;
    assert_eq!(out["result"]["message"], "hi");

    // The callee reads with its own grant (the whole workspace)...
    let out = ok(
        &h,
        "relay",
        json!({"alias": "read", "args": {"path": "other/f.txt"}}),
    )
    .await;
    assert_eq!(out["result"]["content"], "other");
    // ...which never reaches the caller, before or after.
    let e = err(&h, "read_direct", json!({"path": "other/f.txt"})).await;
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");
    let out = ok(&h, "read_direct", json!({"path": "mine/f.txt"})).await;
    assert_eq!(out["content"], "mine");

    // The caller's grant does not reach the callee either.
    let e = err(
        &h,
        "relay",
        json!({"alias": "reader", "args": {"path": "mine/f.txt"}}),
    )
    .await;
    assert!(e.to_string().contains("try_read"), "{e}");
    let out = ok(
        &h,
        "relay",
        json!({"alias": "reader", "args": {"path": "theirs/f.txt"}}),
    )
    .await;
    assert_eq!(out["result"]["content"], "theirs");
}

#[tokio::test]
async fn undeclared_aliases_and_unknown_tools_are_refused_by_name() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), policy(Limits::default())).await;
    let e = err(&h, "relay", json!({"alias": "shell", "args": {}})).await;
    let ToolError::PermissionDenied(why) = &e else {
        panic!("{e:?}")
    };
    assert!(why.contains("alias `shell` is not declared"), "{why}");
    assert!(why.contains("again, echo, missing, read"), "{why}");
    let e = err(&h, "relay", json!({"alias": "missing", "args": {}})).await;
    assert!(
        e.to_string().contains("no tool named `no_such_tool`"),
        "{e}"
    );
    // The callee's arguments are checked against its own schema.
    let e = err(&h, "relay", json!({"alias": "echo", "args": {"nope": 1}})).await;
    assert!(e.to_string().contains("echo"), "{e}");
}

#[tokio::test]
async fn the_policy_applies_to_the_callee() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut denied = policy(Limits::default());
    denied.tools.deny.push("echo".into());
    let h = host(data.path(), denied).await;
    let e = err(
        &h,
        "relay",
        json!({"alias": "echo", "args": {"message": "x"}}),
    )
    .await;
    assert!(e.to_string().contains("no tool named `echo`"), "{e}");

    let data = tempfile::tempdir().expect("tempdir");
    let mut ask = policy(Limits::default());
    ask.approval.insert(
        0,
        ApprovalRule {
            tool: "echo".into(),
            arg: None,
            matches: Vec::new(),
            mode: ApprovalHint::Always,
        },
    );
    let h = host(data.path(), ask).await;
    // Nobody to ask: the callee's approval is refused, naming the tool.
    let report = h
        .call_in(
            "relay",
            &json!({"alias": "echo", "args": {"message": "x"}}).to_string(),
            &CallContext::default(),
        )
        .await;
    let e = report.result.expect_err("approval refused");
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");
    assert!(e.to_string().contains("echo"), "{e}");
}

#[tokio::test]
async fn a_call_loop_hits_the_depth_cap() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), policy(Limits::default())).await;
    let e = err(&h, "loop", json!({})).await;
    let text = e.to_string();
    assert!(text.contains("depth cap of 4"), "{text}");
    assert!(
        text.contains("loop → loop → loop → loop → loop → loop"),
        "{text}"
    );
    assert!(text.contains("a loop"), "{text}");
}

#[tokio::test]
async fn a_top_level_call_makes_at_most_twenty_invocations() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), policy(Limits::default())).await;
    let out = ok(
        &h,
        "fan",
        json!({"alias": "echo", "args": {"message": "x"}, "times": 20}),
    )
    .await;
    assert_eq!(out["done"], 20);
    let e = err(
        &h,
        "fan",
        json!({"alias": "echo", "args": {"message": "x"}, "times": 21}),
    )
    .await;
    let text = e.to_string();
    assert!(text.contains("call 21"), "{text}");
    assert!(text.contains("cap of 20 calls"), "{text}");
}
