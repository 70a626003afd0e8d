//! The tools natively, over a temporary directory standing in for the preopened workspace.

use std::fs;

use chitin_sdk::prelude::*;
use chitin_sdk::{ToolError, dispatch};

use crate::tools_at;

struct Ws {
    dir: tempfile::TempDir,
    tools: Vec<Tool>,
}

impl Ws {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let tools = tools_at(dir.path());
        Self { dir, tools }
    }

    fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError> {
        dispatch(&self.tools, tool, &args.to_string())
            .map(|out| serde_json::from_str(&out).expect("JSON result"))
    }

    fn ok(&self, tool: &str, args: Value) -> Value {
        self.call(tool, args.clone())
            .unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
    }

    fn put(&self, rel: &str, text: &str) {
        let path = self.dir.path().join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }
}

#[test]
fn write_creates_parents_then_read_windows_lines() {
    let ws = Ws::new();
    let out = ws.ok(
        "write_file",
        json!({"path": "a/b/c.txt", "content": "1\n2\n3\n4\n"}),
    );
    assert_eq!(
        out,
        json!({"path": "a/b/c.txt", "bytes": 8, "created": true})
    );
    let out = ws.ok(
        "read_file",
        json!({"path": "a/b/c.txt", "offset": 1, "limit": 2}),
    );
    assert_eq!(out["content"], "2\n3\n");
    assert_eq!(out["lines"], 2);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["next_offset"], 3);
    let out = ws.ok("read_file", json!({"path": "./a/b/c.txt"}));
    assert_eq!(out["content"], "1\n2\n3\n4\n");
    assert_eq!(out["truncated"], false);
    assert_eq!(out["next_offset"], Value::Null);
}

#[test]
fn read_stops_at_the_cap_on_a_line_boundary() {
    let ws = Ws::new();
    let line = format!("{}\n", "x".repeat(1023));
    ws.put("big.txt", &line.repeat(1500));
    let out = ws.ok("read_file", json!({"path": "big.txt"}));
    assert_eq!(out["lines"], 1024);
    assert_eq!(out["content"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["next_offset"], 1024);
}

#[test]
fn write_past_the_cap_is_refused_and_writes_nothing() {
    let ws = Ws::new();
    let content = "x".repeat(5 * 1024 * 1024 + 1);
    let err = ws
        .call("write_file", json!({"path": "big", "content": content}))
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArgs(ref m) if m.contains("write cap")),
        "{err}"
    );
    assert!(!ws.dir.path().join("big").exists());
}

#[test]
fn protected_files_are_refused_for_write_and_patch() {
    let ws = Ws::new();
    ws.put("SOUL.md", "be kind");
    for path in ["SOUL.md", "identity.md", "daily/x.md"] {
        let err = ws
            .call("write_file", json!({"path": path, "content": "evil"}))
            .unwrap_err();
        assert!(
            matches!(err, ToolError::PermissionDenied(_)),
            "{path}: {err}"
        );
    }
    let err = ws
        .call(
            "apply_patch",
            json!({"path": "SOUL.md", "old_string": "kind", "new_string": "evil"}),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::PermissionDenied(_)), "{err}");
    assert_eq!(
        fs::read_to_string(ws.dir.path().join("SOUL.md")).unwrap(),
        "be kind"
    );
}

#[test]
fn apply_patch_counts_matches() {
    let ws = Ws::new();
    ws.put("f.rs", "let a = 1;\nlet a = 1;\n");
    let err = ws
        .call(
            "apply_patch",
            json!({"path": "f.rs", "old_string": "let a", "new_string": "let b"}),
        )
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArgs(ref m) if m.contains("matches 2 times")),
        "{err}"
    );
    let err = ws
        .call(
            "apply_patch",
            json!({"path": "f.rs", "old_string": "nope", "new_string": "x"}),
        )
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArgs(ref m) if m.contains("0 matches")),
        "{err}"
    );
    let out = ws.ok(
        "apply_patch",
        json!({"path": "f.rs", "old_string": "let a", "new_string": "let b", "replace_all": true}),
    );
    assert_eq!(out["replacements"], 2);
    assert_eq!(
        fs::read_to_string(ws.dir.path().join("f.rs")).unwrap(),
        "let b = 1;\nlet b = 1;\n"
    );
}

#[test]
fn list_dir_sorts_skips_heavy_dirs_and_caps() {
    let ws = Ws::new();
    ws.put("b.txt", "b");
    ws.put("a/x.txt", "xx");
    ws.put("node_modules/pkg/index.js", "");
    ws.put(".git/HEAD", "");
    let out = ws.ok("list_dir", json!({}));
    let names: Vec<&str> = out["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(names, [".git", "a", "b.txt", "node_modules"]);
    let out = ws.ok("list_dir", json!({"recursive": true}));
    let names: Vec<&str> = out["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(names, [".git", "a", "a/x.txt", "b.txt", "node_modules"]);
    assert_eq!(
        out["entries"][2],
        json!({"path": "a/x.txt", "type": "file", "size": 2})
    );

    for i in 0..510 {
        ws.put(&format!("many/{i:04}"), "");
    }
    let out = ws.ok("list_dir", json!({"path": "many"}));
    assert_eq!(out["entries"].as_array().unwrap().len(), 500);
    assert_eq!(out["truncated"], true);
}

#[test]
fn glob_and_grep_find_what_they_should() {
    let ws = Ws::new();
    ws.put("src/main.rs", "fn main() {\n    todo!()\n}\n");
    ws.put("src/deep/lib.rs", "// TODO: later\npub fn f() {}\n");
    ws.put("README.md", "todo list\n");
    ws.put("target/debug/gen.rs", "todo\n");
    let out = ws.ok("glob", json!({"pattern": "**/*.rs"}));
    assert_eq!(out["paths"], json!(["src/deep/lib.rs", "src/main.rs"]));
    let out = ws.ok("glob", json!({"pattern": "*.rs", "path": "src"}));
    assert_eq!(out["paths"], json!(["src/main.rs"]));

    let out = ws.ok(
        "grep",
        json!({"pattern": "todo", "case_insensitive": true, "glob": "**/*.rs"}),
    );
    assert_eq!(
        out["matches"],
        json!([
            {"path": "src/deep/lib.rs", "line_number": 1, "line": "// TODO: later"},
            {"path": "src/main.rs", "line_number": 2, "line": "    todo!()"},
        ])
    );
    let out = ws.ok("grep", json!({"pattern": ".", "max_results": 2}));
    assert_eq!(out["matches"].as_array().unwrap().len(), 2);
    assert_eq!(out["truncated"], true);
    let err = ws.call("grep", json!({"pattern": "("})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArgs(_)), "{err}");
}

#[test]
fn escaping_paths_are_invalid_path_for_every_tool() {
    let ws = Ws::new();
    for path in ["/etc/passwd", "../x", "a/../../x", "C:/x", "a\u{0}b"] {
        for (tool, args) in [
            ("read_file", json!({"path": path})),
            ("write_file", json!({"path": path, "content": "x"})),
            ("list_dir", json!({"path": path})),
            (
                "apply_patch",
                json!({"path": path, "old_string": "a", "new_string": "b"}),
            ),
            ("grep", json!({"pattern": "x", "path": path})),
            ("glob", json!({"pattern": "*", "path": path})),
        ] {
            let err = ws.call(tool, args).unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidPath(_)),
                "{tool} {path:?}: {err}"
            );
        }
    }
    for pattern in ["/etc/*", "../*", "a/../../*"] {
        let err = ws.call("glob", json!({"pattern": pattern})).unwrap_err();
        assert!(matches!(err, ToolError::InvalidPath(_)), "{pattern}: {err}");
    }
}

#[test]
fn every_tool_declares_an_output_schema() {
    for tool in tools_at("/workspace") {
        assert!(tool.spec().output_schema.is_some(), "{}", tool.name());
    }
}
