//! The `chitin` CLI end to end: a real process over the built components.

use std::path::{Path, PathBuf};
use std::process::Output;

use chitin_e2e::{built_dir, cached_files, chitin, stderr, stdout};
use serde_json::{Value, json};

/// The built-in components plus the loadable fixtures (not the future-contract one, which the
/// host refuses by design).
fn sources() -> Vec<PathBuf> {
    let fixtures = built_dir("fixtures");
    vec![
        built_dir("components"),
        fixtures.join("test-counter.wasm"),
        fixtures.join("test-hostile.wasm"),
    ]
}

/// One data directory for this test process, so its compile cache is shared across tests.
fn shared_data() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

fn run(args: &[&str]) -> Output {
    chitin(shared_data(), &sources())
        .args(args)
        .output()
        .expect("run chitin")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

#[test]
fn list_shows_every_tool_with_its_description() {
    let out = run(&["list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for tool in ["echo", "time", "json", "count", "spin"] {
        assert!(
            text.lines().any(|l| l.starts_with(tool)),
            "{tool} missing:\n{text}"
        );
    }
    assert!(text.contains("Returns its input unchanged"), "{text}");
}

#[test]
fn output_to_a_reader_that_has_gone_ends_quietly() {
    // `chitin list | head -1`, with `head` already gone: the write fails with EPIPE.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = chitin(shared_data(), &sources())
        .arg("list")
        .stdout(writer)
        .output()
        .expect("run chitin");
    assert_eq!(code(&out), 141, "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn diagnostics_to_a_reader_that_has_gone_cost_nothing_but_themselves() {
    // `chitin … 2>&1 | true`, or a client that closed the server's stderr: the diagnostics
    // (here `-vv`'s and a secret's confirmation) cannot be written, and the work is done anyway.
    let data = tempfile::tempdir().expect("data dir");
    let closed = || {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        writer
    };
    let set = chitin(data.path(), &sources())
        .args(["-vv", "secret", "set", "epipe_token"])
        .stdin(std::process::Stdio::piped())
        .stderr(closed())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(b"the value")?;
            child.wait()
        })
        .expect("run chitin secret set");
    assert_eq!(set.code(), Some(0));
    let out = chitin(data.path(), &sources())
        .args(["-vv", "call", "echo", r#"{"message": "still here"}"#])
        .stderr(closed())
        .output()
        .expect("run chitin call");
    assert_eq!(code(&out), 0);
    let result: Value = serde_json::from_str(&stdout(&out)).expect("the result");
    assert_eq!(result["message"], "still here");
    let listed = chitin(data.path(), &sources())
        .args(["secret", "list"])
        .output()
        .expect("run chitin secret list");
    assert!(
        stdout(&listed).contains("epipe_token"),
        "{}",
        stderr(&listed)
    );
}

#[test]
fn a_call_with_no_component_found_says_where_it_looked_and_what_to_do() {
    let data = tempfile::tempdir().expect("data dir");
    let out = chitin(data.path(), &[])
        .args(["call", "echo", r#"{"message": "hi"}"#])
        .output()
        .expect("run chitin call");
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no component was found in")
            && err.contains("components")
            && err.contains("there is no ./build/components here")
            && err.contains("just build-components"),
        "{err}"
    );
}

#[test]
fn list_json_gives_full_specs() {
    let out = run(&["list", "--json"]);
    let specs: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let echo = specs
        .as_array()
        .expect("array")
        .iter()
        .find(|s| s["name"] == "echo")
        .expect("echo");
    assert_eq!(echo["input_schema"]["required"], json!(["message"]));
    assert_eq!(echo["annotations"]["read_only"], json!(true));
}

#[test]
fn call_prints_the_result_json_on_stdout() {
    let out = run(&["call", "echo", r#"{"message":"hello"}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let value: Value = serde_json::from_str(&stdout(&out)).expect("JSON result");
    assert_eq!(value, json!({"message": "hello"}));
}

#[test]
fn call_exit_codes_distinguish_invalid_args_failed_timeout_and_unknown() {
    let out = run(&["call", "echo", "{not json"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("invalid arguments"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());

    let out = run(&["call", "echo", r#"{"message": 1}"#]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));

    let out = run(&["call", "panic"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("execution failed"),
        "{}",
        stderr(&out)
    );

    let out = run(&["call", "nope"]);
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no tool named `nope`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_timeout_from_the_policy_gives_the_timeout_exit_code() {
    let data = tempfile::tempdir().expect("tempdir");
    let policy = data.path().join("fast.toml");
    let text = std::fs::read_to_string(chitin_e2e::repo().join("policies/default.toml"))
        .expect("default policy")
        .replace("timeout_ms = 30000", "timeout_ms = 200");
    std::fs::write(&policy, text).expect("write policy");
    let out = chitin(data.path(), &sources())
        .arg("--policy")
        .arg(&policy)
        .args(["call", "spin"])
        .output()
        .expect("run");
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(stderr(&out).contains("200 ms deadline"), "{}", stderr(&out));
}

#[test]
fn a_bad_policy_is_refused_naming_the_key() {
    let data = tempfile::tempdir().expect("tempdir");
    let policy = data.path().join("bad.toml");
    std::fs::write(&policy, "schema = 1\n[limits]\nmemory = 5\n").expect("write");
    let out = chitin(data.path(), &[built_dir("components")])
        .arg("--policy")
        .arg(&policy)
        .arg("list")
        .output()
        .expect("run");
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("memory"), "{}", stderr(&out));
}

#[test]
fn a_stdout_flood_never_reaches_the_hosts_stdout() {
    let out = run(&["call", "stdout_flood", r#"{"lines": 5000}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let value: Value = serde_json::from_str(&stdout(&out)).expect("stdout is only the result");
    assert_eq!(value, json!({"printed": 5000}));
    assert!(
        stderr(&out).len() < 1000,
        "the log stays off the terminal unless asked"
    );
    assert!(
        stderr(&out).contains("dropped over the cap"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn call_log_shows_the_tools_log_on_stderr_only() {
    let out = run(&["call", "--log", "log_flood", r#"{"count": 3}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("[log info]"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("[log"), "{}", stdout(&out));
}

#[test]
fn schema_openai_has_function_definitions_without_type_arrays() {
    let out = run(&["schema", "--format", "openai"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let tools: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let json_tool = tools
        .as_array()
        .expect("array")
        .iter()
        .find(|t| t["function"]["name"] == "json")
        .expect("json tool");
    assert_eq!(json_tool["type"], "function");
    assert_eq!(json_tool["function"]["parameters"]["type"], "object");
    assert!(!stdout(&out).contains("\"type\": ["), "no type arrays");
}

#[test]
fn schema_mcp_has_annotations_and_output_schemas() {
    let out = run(&["schema", "--format", "mcp"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let echo = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo");
    assert_eq!(echo["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(echo["inputSchema"]["type"], "object");
    assert_eq!(echo["outputSchema"]["type"], "object");
}

#[test]
fn inspect_shows_imports_exports_hash_and_tools() {
    let echo = built_dir("components").join("echo.wasm");
    let out = run(&["inspect", echo.to_str().expect("utf-8 path"), "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert!(doc["hash"].as_str().expect("hash").starts_with("blake3:"));
    let exports = doc["exports"].to_string();
    assert!(exports.contains("chitin:tool/tool@0.1.0"), "{exports}");
    let imports = doc["imports"].to_string();
    assert!(imports.contains("wasi:"), "{imports}");
    assert_eq!(doc["tools"][0]["name"], "echo");
}

#[test]
fn inspect_refuses_a_future_contract_with_a_reason() {
    let file = built_dir("fixtures").join("test-future-contract.wasm");
    let out = run(&["inspect", file.to_str().expect("utf-8 path")]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(text.contains("chitin:tool/tool@0.2.0"), "{text}");
    assert!(text.contains("REFUSED"), "{text}");
}

#[test]
fn inspect_refuses_a_core_module() {
    let data = tempfile::tempdir().expect("tempdir");
    let core = data.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").expect("write");
    let out = chitin(data.path(), &[])
        .args(["inspect", core.to_str().expect("utf-8 path")])
        .output()
        .expect("run");
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("not a component"), "{}", stderr(&out));
}

#[test]
fn a_directory_holding_a_refused_component_fails_to_load_naming_it() {
    let data = tempfile::tempdir().expect("tempdir");
    // The workspace holds what the other fixtures' grants name.
    for dir in ["libdir", "rootdir", "mine", "theirs"] {
        std::fs::create_dir_all(chitin_e2e::workspace(data.path()).join(dir)).expect("dir");
    }
    let out = chitin(data.path(), &[built_dir("fixtures")])
        .arg("list")
        .output()
        .expect("run");
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("test-future-contract.wasm"), "{err}");
    assert!(err.contains("0.2.0") && err.contains("^0.1"), "{err}");
}

#[test]
fn a_cache_dir_holds_the_compiled_code_and_a_workspace_holding_it_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().expect("tempdir");
    let cache = data.path().join("shared-cache");
    let echo = [built_dir("components").join("echo.wasm")];
    let out = chitin(data.path(), &echo)
        .arg("--cache-dir")
        .arg(&cache)
        .arg("list")
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let compiled: Vec<_> = std::fs::read_dir(&cache)
        .expect("the cache directory")
        .flatten()
        .flat_map(|engine| std::fs::read_dir(engine.path()).expect("engine folder"))
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(compiled.len(), 1, "{compiled:?}");
    assert!(
        cached_files(data.path()).is_empty(),
        "the data directory's cache was used"
    );
    let mode = std::fs::metadata(&cache)
        .expect("cache")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    // A tool that could write the cache would write machine code the host runs.
    let workspace = data.path().join("project");
    let inside = workspace.join(".cache");
    std::fs::create_dir_all(&inside).expect("workspace");
    let out = chitin(data.path(), &echo)
        .arg("--cache-dir")
        .arg(&inside)
        .arg("--workspace")
        .arg(&workspace)
        .arg("list")
        .output()
        .expect("run");
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let inside = inside.canonicalize().expect("canonical");
    assert!(
        err.contains(&format!("compile cache {}", inside.display())),
        "{err}"
    );
    assert!(err.contains("--cache-dir DIR"), "{err}");

    // Embedding a manifest grants the component nothing, so no workspace is resolved for it;
    // it compiles into the cache named.
    let unsigned = data.path().join("echo-unsigned.wasm");
    let out = chitin(data.path(), &[])
        .arg("--cache-dir")
        .arg(&inside)
        .arg("--workspace")
        .arg(&workspace)
        .args(["manifest", "embed"])
        .arg(&echo[0])
        .arg(chitin_e2e::repo().join("components/echo/manifest.toml"))
        .arg("-o")
        .arg(&unsigned)
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(unsigned.is_file());
    let entries = std::fs::read_dir(&inside).expect("the cache").count();
    assert_eq!(entries, 1, "one engine folder");
}

/// `chitin list` of `echo` on the data directory `dir`, with the compile cache inside it.
fn list_echo_in(data: &Path, dir: &Path) -> Output {
    chitin(data, &[built_dir("components").join("echo.wasm")])
        .env_remove("CHITIN_DATA_DIR")
        .env_remove("CHITIN_CACHE_DIR")
        .arg("--data-dir")
        .arg(dir)
        .arg("list")
        .output()
        .expect("run")
}

#[test]
fn data_dir_flag_holds_the_compile_cache_and_is_private() {
    let data = tempfile::tempdir().expect("tempdir");
    let dir = data.path().join("chitin-data");
    let out = list_echo_in(data.path(), &dir);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let entries: Vec<_> = cached_files(&dir)
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    assert!(entries.iter().any(|n| n.ends_with(".cwasm")), "{entries:?}");
    assert!(
        entries.iter().any(|n| n.ends_with(".cwasm.b3")),
        "{entries:?}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir)
        .expect("data dir")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn a_start_that_compiles_says_so_and_a_start_from_the_cache_does_not() {
    let data = tempfile::tempdir().expect("tempdir");
    let dir = data.path().join("chitin-data");
    let first = list_echo_in(data.path(), &dir);
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let echo = built_dir("components").join("echo.wasm");
    let said = format!("compiling {} for this machine", echo.display());
    assert!(stderr(&first).contains(&said), "{}", stderr(&first));
    let second = list_echo_in(data.path(), &dir);
    assert_eq!(code(&second), 0, "{}", stderr(&second));
    assert!(
        !stderr(&second).contains("compiling"),
        "{}",
        stderr(&second)
    );
}

#[test]
fn version_states_the_accepted_contracts() {
    let data = tempfile::tempdir().expect("tempdir");
    let out = chitin(data.path(), &[])
        .arg("--version")
        .output()
        .expect("run");
    assert_eq!(code(&out), 0);
    assert!(
        stdout(&out).contains("chitin:tool@^0.1"),
        "{}",
        stdout(&out)
    );
}

/// A workspace for shell calls, apart from the data directory (a workspace holding the data
/// directory refuses processes).
fn shell_workspace() -> tempfile::TempDir {
    tempfile::tempdir().expect("workspace")
}

/// `chitin … call shell ARGS` as one shell-quoted line, for running under a terminal.
fn shell_line(workspace: &std::path::Path, args: &str) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let components = built_dir("components");
    [
        chitin_e2e::chitin_bin().to_string_lossy().as_ref(),
        "--data-dir",
        &shared_data().to_string_lossy(),
        "--components",
        &components.to_string_lossy(),
        "--workspace",
        &workspace.to_string_lossy(),
        "call",
        "shell",
        args,
    ]
    .iter()
    .map(|s| quote(s))
    .collect::<Vec<_>>()
    .join(" ")
}

/// Run `line` under a pseudo-terminal (`script`), typing `typed` at it; returns the exit code
/// and everything the terminal showed. The run's shared compile cache is named, as `chitin()`
/// does: else each of these commands compiled every built-in into the data directory's cache.
fn on_terminal(line: &str, typed: &str) -> (i32, String) {
    use std::io::Write;
    let mut child = std::process::Command::new("script")
        .args(["-qec", line, "/dev/null"])
        .env(
            "CHITIN_TRUSTED_KEYS",
            chitin_e2e::repo().join("build/trusted_keys"),
        )
        .env("CHITIN_CACHE_DIR", chitin_e2e::shared_cache())
        .env_remove("CHITIN_COMPONENTS")
        .env_remove("CHITIN_POLICY")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(typed.as_bytes())
        .expect("type");
    let out = child.wait_with_output().expect("wait");
    (code(&out), stdout(&out) + &stderr(&out))
}

#[test]
fn approval_is_asked_on_the_terminal_and_yes_runs_the_call() {
    let ws = shell_workspace();
    let (code, screen) = on_terminal(
        &shell_line(ws.path(), r#"{"command": "echo approved > proof.txt"}"#),
        "y\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("needs your approval"), "{screen}");
    assert!(screen.contains("echo approved"), "{screen}");
    assert!(ws.path().join("proof.txt").is_file());
}

#[test]
fn declining_on_the_terminal_refuses_the_call() {
    let ws = shell_workspace();
    let (code, screen) = on_terminal(
        &shell_line(ws.path(), r#"{"command": "echo no > proof.txt"}"#),
        "n\n",
    );
    assert_eq!(code, 4, "{screen}");
    assert!(screen.contains("declined"), "{screen}");
    assert!(!ws.path().join("proof.txt").exists());
}

#[test]
fn irreversible_commands_ask_twice_on_the_terminal() {
    let ws = shell_workspace();
    std::fs::create_dir(ws.path().join("build")).expect("mkdir");
    let (code, screen) = on_terminal(
        &shell_line(ws.path(), r#"{"command": "rm -rf build"}"#),
        "y\nn\n",
    );
    assert_eq!(code, 4, "{screen}");
    assert!(screen.contains("irreversible"), "{screen}");
    assert!(ws.path().join("build").is_dir());
}

#[test]
fn without_a_terminal_approval_is_refused_with_how_to_approve() {
    let ws = shell_workspace();
    let out = chitin(shared_data(), &[built_dir("components")])
        .args(["--workspace", &ws.path().to_string_lossy()])
        .args(["call", "shell", r#"{"command": "echo x > proof.txt"}"#])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run chitin");
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert!(!ws.path().join("proof.txt").exists());
}

#[test]
fn yes_pre_approves_without_a_terminal() {
    let ws = shell_workspace();
    let out = chitin(shared_data(), &[built_dir("components")])
        .args(["--workspace", &ws.path().to_string_lossy()])
        .args([
            "call",
            "--yes",
            "shell",
            r#"{"command": "rm -rf gone && echo done"}"#,
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run chitin");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(result["stdout"], "done\n");
}
