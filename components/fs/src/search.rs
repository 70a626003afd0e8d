//! `glob` (file names by pattern) and `grep` (lines by regular expression), both over a bounded
//! walk of the workspace.

use std::fs;

use chitin_sdk::prelude::*;
use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

use crate::Workspace;
use crate::io::error;
use crate::list::MAX_DEPTH;
use crate::path::RelPath;
use crate::tree;
use crate::walk::{Kind, walk};

/// Most paths `glob` returns.
pub const MAX_GLOB_RESULTS: usize = 1000;
/// Most entries one search walks, so a huge tree cannot make a call run unbounded.
pub const MAX_WALKED: usize = 100_000;
/// Default and largest number of matching lines `grep` returns.
pub const DEFAULT_GREP_RESULTS: usize = 100;
/// The largest `max_results` accepted.
pub const MAX_GREP_RESULTS: usize = 1000;
/// Files larger than this are not searched by `grep`.
pub const MAX_GREP_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// A matching line longer than this is cut (in characters).
pub const MAX_LINE_CHARS: usize = 500;
/// Compiled-regex size limit: keeps a pathological pattern from eating the memory cap.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern relative to `path`: `*` stays within a directory, `**` crosses them,
    /// e.g. `src/**/*.rs`
    pub pattern: String,
    /// Directory to search from, relative to the workspace root (default: the root)
    pub path: Option<String>,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct GlobOutput {
    /// Matching paths relative to the workspace root, in walk order
    pub paths: Vec<String>,
    /// Whether a cap or the call's output budget cut the results short
    pub truncated: bool,
}

/// Finds paths matching a glob pattern.
pub fn glob(ws: &Workspace, args: GlobArgs) -> Result<GlobOutput, ToolError> {
    let base = RelPath::parse(args.path.as_deref().unwrap_or("."))?;
    let matcher = compile_glob(&args.pattern)?;
    let skip = prefix_len(&base);
    let mut paths = Vec::new();
    let mut walked = 0usize;
    let mut truncated = false;
    // Names only: no file's size is read.
    walk(&ws.root, &base, MAX_DEPTH, false, &mut |entry| {
        walked += 1;
        if walked > MAX_WALKED || paths.len() == MAX_GLOB_RESULTS {
            truncated = true;
            return false;
        }
        if matcher.is_match(&entry.path[skip..]) {
            paths.push(entry.path.clone());
        }
        true
    })?;
    let mut out = GlobOutput { paths, truncated };
    out.truncated |= ws.fit(&mut out, |o| &mut o.paths);
    Ok(out)
}

/// Compiles a glob, refusing patterns that point outside the workspace.
fn compile_glob(pattern: &str) -> Result<GlobMatcher, ToolError> {
    let refuse = |why: &str| ToolError::invalid_path(format!("glob `{pattern}`: {why}"));
    if pattern.contains('\0') {
        return Err(refuse("contains a NUL byte"));
    }
    if pattern.starts_with('/') {
        return Err(refuse(
            "is absolute; give a pattern relative to the workspace",
        ));
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err(refuse(
            "uses `..`; search from a `path` inside the workspace instead",
        ));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| ToolError::invalid_args(format!("glob `{pattern}`: {e}")))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax) matched against each line
    pub pattern: String,
    /// File or directory to search, relative to the workspace root (default: the root)
    pub path: Option<String>,
    /// Only search files whose path (relative to `path`) matches this glob, e.g. `**/*.rs`
    pub glob: Option<String>,
    /// Match without regard to case (default false)
    #[serde(default)]
    pub case_insensitive: bool,
    /// Most matching lines to return (default 100, at most 1000)
    pub max_results: Option<usize>,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct GrepMatch {
    /// File path relative to the workspace root
    pub path: String,
    /// One-based line number
    pub line_number: u64,
    /// The matching line, without its line ending, cut at 500 characters
    pub line: String,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct GrepOutput {
    /// Matches in walk order, then line order
    pub matches: Vec<GrepMatch>,
    /// How many files were searched
    pub files_searched: u64,
    /// Whether a cap or the call's output budget cut the results short
    pub truncated: bool,
}

/// Searches file contents for lines matching a regular expression.
pub fn grep(ws: &Workspace, args: GrepArgs) -> Result<GrepOutput, ToolError> {
    let base = RelPath::parse(args.path.as_deref().unwrap_or("."))?;
    let regex = RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| ToolError::invalid_args(format!("pattern: {e}")))?;
    let filter = args.glob.as_deref().map(compile_glob).transpose()?;
    let cap = args
        .max_results
        .unwrap_or(DEFAULT_GREP_RESULTS)
        .clamp(1, MAX_GREP_RESULTS);
    let mut out = GrepOutput {
        matches: Vec::new(),
        files_searched: 0,
        truncated: false,
    };
    let target = base.under(&ws.root);
    let meta = fs::metadata(&target).map_err(|e| error(&base, "search", e))?;
    if meta.is_file() {
        if meta.len() <= MAX_GREP_FILE_BYTES {
            grep_file(ws, &base.display(), meta.len(), &regex, cap, &mut out);
        }
        out.truncated |= ws.fit(&mut out, |o| &mut o.matches);
        return Ok(out);
    }
    let skip = prefix_len(&base);
    let mut walked = 0usize;
    walk(&ws.root, &base, MAX_DEPTH, true, &mut |entry| {
        walked += 1;
        if walked > MAX_WALKED {
            out.truncated = true;
            return false;
        }
        let wanted = entry.kind == Kind::File
            && entry.size <= MAX_GREP_FILE_BYTES
            && filter
                .as_ref()
                .is_none_or(|f| f.is_match(&entry.path[skip..]));
        if wanted {
            grep_file(ws, &entry.path, entry.size, &regex, cap, &mut out);
        }
        !out.truncated
    })?;
    out.truncated |= ws.fit(&mut out, |o| &mut o.matches);
    Ok(out)
}

/// Searches one file of `size` bytes (as found before); unreadable, binary and non-UTF-8 files
/// are passed over.
fn grep_file(
    ws: &Workspace,
    rel: &str,
    size: u64,
    regex: &Regex,
    cap: usize,
    out: &mut GrepOutput,
) {
    let Ok(bytes) = tree::read(&ws.root.join(rel), size, MAX_GREP_FILE_BYTES) else {
        return;
    };
    if bytes.len() as u64 > MAX_GREP_FILE_BYTES || bytes[..bytes.len().min(8192)].contains(&0) {
        return;
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return;
    };
    out.files_searched += 1;
    for (index, line) in text.lines().enumerate() {
        if regex.is_match(line) {
            if out.matches.len() == cap {
                out.truncated = true;
                return;
            }
            out.matches.push(GrepMatch {
                path: rel.to_owned(),
                line_number: index as u64 + 1,
                line: cut(line),
            });
        }
    }
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// Length of `base/` in an entry path, so patterns match relative to the search base.
fn prefix_len(base: &RelPath) -> usize {
    if base.is_root() {
        0
    } else {
        base.display().len() + 1
    }
}
