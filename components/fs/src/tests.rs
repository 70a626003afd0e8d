//! The tools natively, over a temporary directory standing in for the preopened workspace.

use std::fs;

use chitin_sdk::prelude::*;
use chitin_sdk::{ToolError, dispatch};

use crate::read::{MAX_READ_BYTES, Reader, Window, read_window};
use crate::tools_at;

struct Ws {
    dir: tempfile::TempDir,
    tools: Vec<Tool>,
}

impl Ws {
    fn new() -> Self {
        Self::within(None)
    }

    /// Tools whose results fit in `budget` bytes, as the host's `CHITIN_OUTPUT_BYTES` says.
    fn within(budget: Option<usize>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let tools = tools_at(dir.path(), budget);
        Self { dir, tools }
    }

    /// The result as written, checked to be JSON.
    fn raw(&self, tool: &str, args: Value) -> String {
        let out = dispatch(&self.tools, tool, &args.to_string())
            .unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
        serde_json::from_str::<Value>(&out).expect("JSON result");
        out
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
fn protected_files_are_refused_through_symlinks_inside_the_workspace() {
    let ws = Ws::new();
    ws.put("IDENTITY.md", "orig");
    ws.put("daily/today.md", "notes");
    let root = ws.dir.path();
    std::os::unix::fs::symlink("IDENTITY.md", root.join("notes.md")).unwrap();
    std::os::unix::fs::symlink("daily", root.join("dl")).unwrap();
    fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("../notes.md", root.join("sub/chain.md")).unwrap();
    std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "notes.md", "content": "PWNED"}),
        ),
        (
            "write_file",
            json!({"path": "sub/chain.md", "content": "PWNED"}),
        ),
        ("write_file", json!({"path": "dl/new.md", "content": "x"})),
        (
            "apply_patch",
            json!({"path": "dl/today.md", "old_string": "notes", "new_string": "P"}),
        ),
        (
            "apply_patch",
            json!({"path": "notes.md", "old_string": "orig", "new_string": "P"}),
        ),
        ("write_file", json!({"path": "loop", "content": "x"})),
    ] {
        let err = ws.call(tool, args.clone()).unwrap_err();
        assert!(
            matches!(err, ToolError::PermissionDenied(_)),
            "{tool} {args}: {err}"
        );
    }
    assert_eq!(
        fs::read_to_string(root.join("IDENTITY.md")).unwrap(),
        "orig"
    );
    assert_eq!(
        fs::read_to_string(root.join("daily/today.md")).unwrap(),
        "notes"
    );
    assert!(!root.join("daily/new.md").exists());
    // A link to an ordinary file is written through, as before.
    ws.put("plain.md", "a");
    std::os::unix::fs::symlink("plain.md", root.join("alias.md")).unwrap();
    ws.ok("write_file", json!({"path": "alias.md", "content": "b"}));
    assert_eq!(fs::read_to_string(root.join("plain.md")).unwrap(), "b");
}

#[test]
fn a_file_with_other_names_is_not_written_in_place() {
    let ws = Ws::new();
    ws.put("one.txt", "shared");
    fs::hard_link(ws.dir.path().join("one.txt"), ws.dir.path().join("two.txt")).unwrap();
    let err = ws
        .call("write_file", json!({"path": "two.txt", "content": "x"}))
        .unwrap_err();
    assert!(
        matches!(err, ToolError::PermissionDenied(_)) && err.to_string().contains("hard links"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(ws.dir.path().join("one.txt")).unwrap(),
        "shared"
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
    for tool in tools_at("/workspace", None) {
        assert!(tool.spec().output_schema.is_some(), "{}", tool.name());
    }
}

/// `read_file`'s window as it was computed before it read in place (a `BufReader` line by
/// line): the reference the in-place reader must equal.
fn reference_window(bytes: &[u8], offset: u64, limit: u64) -> Window {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(bytes);
    let (mut content, mut line) = (Vec::new(), Vec::new());
    let (mut index, mut lines, mut truncated) = (0u64, 0u64, false);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).expect("read") == 0 {
            break;
        }
        if index < offset {
            index += 1;
            continue;
        }
        if lines == limit {
            truncated = true;
            break;
        }
        if content.len() + line.len() > MAX_READ_BYTES {
            truncated = true;
            if lines == 0 {
                content.extend_from_slice(&line[..MAX_READ_BYTES]);
            }
            break;
        }
        content.extend_from_slice(&line);
        index += 1;
        lines += 1;
    }
    Window {
        bytes: content,
        counted: Some(lines),
        truncated,
    }
}

/// A window as the tool reports it: its bytes, how many lines (counted from its line feeds
/// where the reader left that to the escaper), and whether more follows.
fn reported(window: Window) -> (Vec<u8>, u64, bool) {
    let newlines = window.bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let lines = window.lines(newlines);
    (window.bytes, lines, window.truncated)
}

/// A reader handing out a file in pieces of pseudo-random size, sometimes interrupted, as a
/// host may.
struct Pieces<'a> {
    bytes: &'a [u8],
    state: u64,
}

impl std::io::Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        if self.state.is_multiple_of(11) {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = buf
            .len()
            .min(self.bytes.len())
            .min(1 + (self.state % 70_000) as usize);
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

#[test]
fn the_in_place_window_equals_the_line_by_line_one() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut files: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\n".to_vec(),
        b"no ending".to_vec(),
        b"a\nb".to_vec(),
        b"a\nb\n".to_vec(),
        b"\n\n\n".to_vec(),
        // Exactly the cap, one byte over, a line over it alone, a line ending at the cap.
        format!("{}\n", "x".repeat(1023)).repeat(1024).into_bytes(),
        format!("{}\n", "x".repeat(1023))
            .repeat(1024)
            .into_bytes()
            .into_iter()
            .chain([b'y'])
            .collect(),
        vec![b'z'; MAX_READ_BYTES + 5],
        [vec![b'a'; MAX_READ_BYTES - 1], b"\nrest\n".to_vec()].concat(),
        [
            b"short\n".to_vec(),
            vec![b'b'; MAX_READ_BYTES + 1],
            b"\nafter\n".to_vec(),
        ]
        .concat(),
    ];
    // Files of random lines, short and long, some beyond the cap.
    for size in [10, 300, 5_000, 70_000, 200_000, MAX_READ_BYTES + 70_000] {
        let mut file = Vec::with_capacity(size);
        while file.len() < size {
            let len = match next(10) {
                0 => next(200_000) as usize,
                1 => 0,
                _ => next(120) as usize,
            };
            file.extend(std::iter::repeat_n(b'a' + next(26) as u8, len));
            if next(20) != 0 {
                file.push(b'\n');
            }
        }
        files.push(file);
    }
    for file in &files {
        let total = file.iter().filter(|&&b| b == b'\n').count() as u64;
        let mut windows = vec![(0, u64::MAX), (0, 0), (total, u64::MAX), (total + 3, 2)];
        for _ in 0..6 {
            windows.push((
                next(total + 2),
                if next(3) == 0 {
                    u64::MAX
                } else {
                    next(total + 2)
                },
            ));
        }
        for (offset, limit) in windows {
            let expected = reference_window(file, offset, limit);
            let reader = Pieces {
                bytes: file,
                state: 0x9E37_79B9_7F4A_7C15 ^ offset,
            };
            let (bytes, lines, truncated) = reported(expected);
            let found =
                reported(read_window(Reader(reader), offset, limit, MAX_READ_BYTES).expect("read"));
            assert_eq!(
                (found.0.len(), found.1, found.2),
                (bytes.len(), lines, truncated),
                "file of {} bytes, offset {offset}, limit {limit}",
                file.len()
            );
            assert!(found.0 == bytes);
            assert!(
                reported(
                    read_window(Reader(file.as_slice()), offset, limit, MAX_READ_BYTES)
                        .expect("read")
                ) == (bytes, lines, truncated)
            );
        }
    }
}

#[test]
fn a_file_near_the_cap_reads_whole_and_one_over_is_cut_at_a_line() {
    let ws = Ws::new();
    let line = format!("{}\n", "y".repeat(4095));
    ws.put("at_cap.txt", &line.repeat(256));
    let out = ws.ok("read_file", json!({"path": "at_cap.txt"}));
    assert_eq!(out["lines"], 256);
    assert_eq!(out["truncated"], false);
    assert_eq!(out["content"].as_str().unwrap().len(), MAX_READ_BYTES);
    ws.put("over_cap.txt", &format!("{}z", line.repeat(256)));
    let out = ws.ok("read_file", json!({"path": "over_cap.txt"}));
    assert_eq!(out["lines"], 256);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["next_offset"], 256);
    let rest = ws.ok("read_file", json!({"path": "over_cap.txt", "offset": 256}));
    assert_eq!(rest["content"], "z");
    assert_eq!(rest["truncated"], false);
}

#[test]
fn non_utf8_is_refused_and_a_character_cut_at_the_cap_is_dropped() {
    let ws = Ws::new();
    fs::write(ws.dir.path().join("bin.dat"), b"ok\n\xff\xfe\n").expect("write");
    let err = ws
        .call("read_file", json!({"path": "bin.dat"}))
        .expect_err("binary");
    assert!(
        matches!(err, ToolError::InvalidArgs(ref m) if m.contains("not UTF-8")),
        "{err:?}"
    );
    // One line of `é` (two bytes each) one byte over the cap: cut inside a character.
    let text = "é".repeat(MAX_READ_BYTES / 2 + 1);
    ws.put("long.txt", &format!("a{text}"));
    let out = ws.ok("read_file", json!({"path": "long.txt"}));
    assert_eq!(out["truncated"], true);
    assert_eq!(out["content"].as_str().unwrap().len(), MAX_READ_BYTES - 1);
}

#[test]
fn the_hand_written_result_is_what_serde_json_writes() {
    use crate::path::RelPath;
    use crate::read::{ReadOutput, to_json};
    for (content, truncated) in [
        ("", false),
        ("plain\n", true),
        (
            "quote \" backslash \\ tab \t cr \r nul \u{0} del \u{7f} é🦀\n",
            false,
        ),
    ] {
        let path = "dir/\"odd\" name.txt";
        let window = Window {
            bytes: content.repeat(50).into_bytes(),
            counted: Some(2),
            truncated,
        };
        let expected = ReadOutput {
            path: path.into(),
            content: content.repeat(50),
            offset: 3,
            lines: 2,
            truncated,
            next_offset: truncated.then_some(5),
        };
        let path = RelPath::parse(path).expect("path");
        assert_eq!(
            to_json(&path, &window, 3).expect("UTF-8"),
            serde_json::to_string(&expected).expect("serialise")
        );
    }
}

#[test]
fn the_lines_of_a_window_left_to_the_escaper_are_counted_as_the_reader_counts_them() {
    use crate::path::RelPath;
    use crate::read::to_json;
    let path = RelPath::parse("f.txt").expect("path");
    // (bytes, truncated, lines): a last line without its ending counts; a character cut off at
    // the end is dropped from the content but its line still counts, as the line-by-line
    // reader counted it.
    for (bytes, truncated, lines) in [
        (&b""[..], false, 0),
        (b"\n", false, 1),
        (b"a", false, 1),
        (b"a\nb", false, 2),
        (b"a\nb\n", false, 2),
        (b"a\n\n", true, 2),
        ("é\n✓ and \"quotes\"\n🦀".as_bytes(), false, 3),
        (b"abc\n\xc3", false, 2),
    ] {
        let window = Window {
            bytes: bytes.to_vec(),
            counted: None,
            truncated,
        };
        let out: serde_json::Value =
            serde_json::from_str(&to_json(&path, &window, 0).expect("UTF-8")).expect("JSON");
        assert_eq!(out["lines"], lines, "{bytes:?}");
        assert_eq!(out["truncated"], truncated, "{bytes:?}");
    }
}

/// Text whose JSON is longer than itself: quotes, backslashes, tabs, control characters and
/// short lines, in lines of varied length.
fn escape_heavy(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "{i}: \"quoted\"\t\\path\\{}\u{1}é{}\n",
                "x".repeat(i % 97),
                "\"".repeat(i % 13)
            )
        })
        .collect()
}

#[test]
fn a_read_past_the_output_budget_is_whole_json_within_it_and_pages_to_the_end() {
    for budget in [4096, 65_536] {
        let ws = Ws::within(Some(budget));
        let text = escape_heavy(6000);
        ws.put("big.txt", &text);
        let mut read = String::new();
        let mut offset = 0u64;
        let mut pages = 0;
        loop {
            let out = ws.raw("read_file", json!({"path": "big.txt", "offset": offset}));
            assert!(
                out.len() <= budget,
                "{} bytes over a budget of {budget}",
                out.len()
            );
            let out: Value = serde_json::from_str(&out).expect("JSON");
            read.push_str(out["content"].as_str().expect("content"));
            pages += 1;
            if out["truncated"] == false {
                break;
            }
            offset = out["next_offset"].as_u64().expect("next offset");
            assert!(
                out["lines"].as_u64().expect("lines") > 0,
                "page {pages} made no progress"
            );
        }
        assert!(
            read == text,
            "the pages put together are the file (budget {budget})"
        );
        assert!(
            pages > text.len() / budget,
            "{pages} pages for a budget of {budget}"
        );
    }
}

#[test]
fn a_line_longer_than_the_output_budget_is_cut_and_counted_as_none() {
    let ws = Ws::within(Some(2048));
    ws.put("one.txt", &format!("{}\nnext\n", "\"".repeat(5000)));
    let out = ws.raw("read_file", json!({"path": "one.txt"}));
    assert!(out.len() <= 2048, "{}", out.len());
    let out: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(out["lines"], 0);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["next_offset"], 1);
    assert!(out["content"].as_str().expect("content").len() > 500);
    let rest = ws.ok("read_file", json!({"path": "one.txt", "offset": 1}));
    assert_eq!(rest["content"], "next\n");
}

#[test]
fn listings_and_searches_past_the_output_budget_keep_what_fits_and_say_so() {
    let budget = 8192;
    let ws = Ws::within(Some(budget));
    for i in 0..600 {
        ws.put(
            &format!("dir/file-{i:03}.txt"),
            &"needle \"here\"\n".repeat(3),
        );
    }
    for (tool, args, list) in [
        ("glob", json!({"pattern": "**/*.txt"}), "paths"),
        (
            "grep",
            json!({"pattern": "needle", "max_results": 1000}),
            "matches",
        ),
        ("list_dir", json!({"path": "dir"}), "entries"),
    ] {
        let out = ws.raw(tool, args.clone());
        assert!(out.len() <= budget, "{tool}: {} bytes", out.len());
        let out: Value = serde_json::from_str(&out).expect("JSON");
        let kept = out[list].as_array().expect("list").len();
        assert!(kept > 20, "{tool} kept {kept}");
        assert_eq!(out["truncated"], true, "{tool}");
        // Without a budget the same call returns more.
        let unbounded = ws_unbounded(&ws).call(tool, args).expect(tool);
        assert!(
            unbounded[list].as_array().expect("list").len() > kept,
            "{tool}"
        );
    }
}

/// The tools over `ws`'s directory with no output budget.
fn ws_unbounded(ws: &Ws) -> Ws {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = tools_at(ws.dir.path(), None);
    Ws { dir, tools }
}

#[test]
fn a_read_within_the_output_budget_is_the_read_without_one() {
    let text = escape_heavy(300);
    let bounded = Ws::within(Some(1 << 20));
    bounded.put("f.txt", &text);
    let unbounded = ws_unbounded(&bounded);
    for args in [
        json!({"path": "f.txt"}),
        json!({"path": "f.txt", "offset": 7, "limit": 9}),
    ] {
        assert_eq!(
            bounded.raw("read_file", args.clone()),
            unbounded.raw("read_file", args)
        );
    }
}
