//! The `shell` and `spawn` tools. Before anything runs, the command passes the screening layers
//! ([`screen`]); commands matching a never-auto-approve pattern ask the host for a person's
//! approval; then `/bin/sh` runs it through `chitin:host/process`, which the host confines.

pub mod lex;
pub mod screen;

use chitin_sdk::budget;
use chitin_sdk::prelude::*;

use screen::{Layer, Verdict};

/// Bindings of the host interfaces this component imports.
mod host {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:shell-imports;
                 world imports {
                     import chitin:host/process@0.1.0;
                     import chitin:host/approval@0.1.0;
                 }",
        world: "chitin:shell-imports/imports",
        generate_all,
    });
}

use host::chitin::host::{approval, process};

/// Default command timeout (seconds).
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest command timeout (seconds).
pub const MAX_TIMEOUT_SECS: u64 = 300;
/// Bytes of stdout and of stderr kept in the result, so that ordinary text stays within the
/// default 64 KiB output budget (the process capability itself keeps 64 KiB of each); the result
/// is then cut to the call's own budget (`chitin_sdk::budget`), stdout first.
pub const STDOUT_BYTES: usize = 40 * 1024;
/// See [`STDOUT_BYTES`].
pub const STDERR_BYTES: usize = 16 * 1024;

#[derive(Deserialize, JsonSchema)]
struct ShellArgs {
    /// The shell command to run (`sh -c`)
    command: String,
    /// Working directory, relative to the workspace (default: its root)
    workdir: Option<String>,
    /// Timeout in seconds (default 120, at most 300)
    timeout: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
struct SpawnArgs {
    /// The program to run
    command: String,
    /// Its arguments, passed as they are (no shell parsing)
    #[serde(default)]
    args: Vec<String>,
    /// What the process is for, shown to the person approving it
    description: Option<String>,
    /// Timeout in seconds (default 120, at most 300)
    timeout: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct RunOutput {
    /// The exit code (-1 when a signal ended the process)
    exit_code: i32,
    /// Standard output (its first 40 KiB at most, less when the call's output budget needs)
    stdout: String,
    /// Standard error (its first 16 KiB at most, less when the call's output budget needs)
    stderr: String,
    /// Whether stdout or stderr was cut
    truncated: bool,
    /// Wall-clock time in milliseconds
    duration_ms: u64,
    /// The command that ran
    command: String,
    /// The description given, if any
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

/// Check `command` through every layer; ask for approval when a pattern requires it.
fn admit(command: &str) -> Result<(), ToolError> {
    match screen::screen(command) {
        Verdict::Refused(layer, reason) => {
            let layer = match layer {
                Layer::Blocked => "blocked command",
                Layer::Dangerous => "dangerous pattern",
                Layer::Injection => "command injection",
            };
            Err(ToolError::PermissionDenied(format!(
                "refused before running ({layer}): {reason}"
            )))
        }
        Verdict::Allowed(approvals) if approvals.is_empty() => Ok(()),
        Verdict::Allowed(approvals) => {
            let reason = format!(
                "`{command}` is irreversible ({}), so it always needs a person's approval",
                approvals.join("; ")
            );
            approval::request(&reason).map_err(ToolError::PermissionDenied)
        }
    }
}

fn timeout_ms(timeout: Option<u64>) -> u64 {
    timeout
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .clamp(1, MAX_TIMEOUT_SECS)
        * 1000
}

fn run(
    program: &str,
    args: Vec<String>,
    cwd: Option<String>,
    timeout: Option<u64>,
    shown: String,
    description: Option<String>,
) -> Result<RunOutput, ToolError> {
    let out = process::run(&process::Command {
        program: program.to_owned(),
        args,
        cwd,
        stdin: None,
        timeout_ms: Some(timeout_ms(timeout)),
        env: Vec::new(),
    })
    .map_err(from_process)?;
    let (stdout, stdout_cut) = text(&out.stdout, STDOUT_BYTES);
    let (stderr, stderr_cut) = text(&out.stderr, STDERR_BYTES);
    if out.timed_out {
        return Err(ToolError::Timeout);
    }
    let mut out = RunOutput {
        exit_code: out.exit_code.unwrap_or(-1),
        stdout,
        stderr,
        truncated: out.stdout_truncated || out.stderr_truncated || stdout_cut || stderr_cut,
        duration_ms: out.duration_ms,
        command: shown,
        description,
    };
    if let Some(budget) = budget::output_bytes() {
        fit(&mut out, budget);
    }
    Ok(out)
}

/// Cut stdout, then stderr (where errors are told), until `out` fits `budget` bytes.
fn fit(out: &mut RunOutput, budget: usize) {
    let cut = budget::cut_text(out, |o| &mut o.stdout, budget)
        | budget::cut_text(out, |o| &mut o.stderr, budget);
    out.truncated |= cut;
}

/// The first `max` bytes of `bytes` as text (invalid UTF-8 replaced), and whether it was cut.
fn text(bytes: &[u8], max: usize) -> (String, bool) {
    let cut = bytes.len() > max;
    let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned();
    if cut {
        // A character split at the cut shows as one replacement character at the end.
        while text.ends_with('\u{FFFD}') {
            text.pop();
        }
    }
    (text, cut)
}

fn from_process(e: process::Error) -> ToolError {
    match e {
        process::Error::NotGranted(m)
        | process::Error::EnvNotAllowed(m)
        | process::Error::Unconfined(m) => ToolError::PermissionDenied(m),
        process::Error::InvalidCwd(m) => ToolError::InvalidPath(m),
        process::Error::Busy(m) => ToolError::RateLimited(m),
        process::Error::SpawnFailed(m) => ToolError::ExecutionFailed(m),
    }
}

fn shell(args: ShellArgs) -> Result<RunOutput, ToolError> {
    admit(&args.command)?;
    run(
        "/bin/sh",
        vec!["-c".into(), args.command.clone()],
        args.workdir,
        args.timeout,
        args.command,
        None,
    )
}

/// Quote `word` for display and screening as the shell would read it.
fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn spawn(args: SpawnArgs) -> Result<RunOutput, ToolError> {
    let shown = std::iter::once(&args.command)
        .chain(&args.args)
        .map(|w| quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    admit(&shown)?;
    // `exec "$0" "$@"` runs the program with its arguments exactly as given: no shell parsing.
    let mut argv = vec!["-c".into(), "exec \"$0\" \"$@\"".into(), args.command];
    argv.extend(args.args);
    run(
        "/bin/sh",
        argv,
        None,
        args.timeout,
        shown,
        Some(
            args.description
                .unwrap_or_else(|| "(no description)".into()),
        ),
    )
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "shell",
            "Runs a shell command (`sh -c`) in the workspace and returns its exit code, stdout and \
             stderr (64 KiB each). Destructive, privilege-escalating and obfuscated commands are \
             refused; irreversible ones need a person's approval. The process cannot write \
             outside the workspace or use the network.",
            shell,
        )
        .destructive()
        .output_schema::<RunOutput>(),
        Tool::new(
            "spawn",
            "Runs a program with arguments (no shell parsing) in the workspace and returns its \
             exit code, stdout and stderr. Screened and confined like `shell`.",
            spawn,
        )
        .destructive()
        .output_schema::<RunOutput>(),
    ]
}

chitin_sdk::export_tools!(tools);

#[cfg(test)]
mod tests;
