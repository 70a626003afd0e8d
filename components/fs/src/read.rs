//! `read_file`: a window of lines from a text file, capped at 1 MiB of content.

use std::fs::File;
use std::io::{BufRead, BufReader};

use chitin_sdk::prelude::*;

use crate::Workspace;
use crate::io::error;
use crate::path::RelPath;

/// Most content bytes one call returns (seed 000 §4.5 `MAX_READ_SIZE`).
pub const MAX_READ_BYTES: usize = 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File path relative to the workspace root
    pub path: String,
    /// Number of lines to skip from the start (default 0)
    pub offset: Option<u64>,
    /// Most lines to return (default: all, up to 1 MiB of content)
    pub limit: Option<u64>,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct ReadOutput {
    /// The path read, normalised
    pub path: String,
    /// The lines returned, with their line endings
    pub content: String,
    /// Zero-based index of the first line returned
    pub offset: u64,
    /// How many lines were returned
    pub lines: u64,
    /// Whether more of the file follows what was returned
    pub truncated: bool,
    /// The offset to pass to read on from here, when truncated
    pub next_offset: Option<u64>,
}

/// Bytes asked of the host per read.
const READ_CHUNK: usize = 64 * 1024;

/// Reads lines `offset..offset+limit` of the file, stopping at the size cap.
pub fn read_file(ws: &Workspace, args: ReadArgs) -> Result<ReadOutput, ToolError> {
    let path = RelPath::parse(&args.path)?;
    let file = File::open(path.under(&ws.root)).map_err(|e| error(&path, "read", e))?;
    let offset = args.offset.unwrap_or(0);
    let limit = args.limit.unwrap_or(u64::MAX);
    // Each refill is one host round trip (a blocking-pool read); 64 KiB is the most the host
    // hands back per read, so 8 times fewer trips than the default 8 KiB buffer.
    let mut reader = BufReader::with_capacity(READ_CHUNK, file);
    let mut content = Vec::new();
    let mut line = Vec::new();
    let mut index = 0u64;
    let mut lines = 0u64;
    let mut truncated = false;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| error(&path, "read", e))?;
        if n == 0 {
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
                // A single line longer than the cap: return its first part rather than nothing.
                content.extend_from_slice(&line[..MAX_READ_BYTES]);
            }
            break;
        }
        content.extend_from_slice(&line);
        index += 1;
        lines += 1;
    }
    let content = match String::from_utf8(content) {
        Ok(text) => text,
        Err(e) => {
            let bytes = e.into_bytes();
            match std::str::from_utf8(&bytes) {
                // Cut inside a character at the cap: drop the partial character.
                Err(err) if err.error_len().is_none() => {
                    String::from_utf8_lossy(&bytes[..err.valid_up_to()]).into_owned()
                }
                _ => {
                    return Err(ToolError::invalid_args(format!(
                        "`{}` is not UTF-8 text",
                        path.display()
                    )));
                }
            }
        }
    };
    Ok(ReadOutput {
        path: path.display(),
        content,
        offset,
        lines,
        truncated,
        next_offset: truncated.then_some(offset + lines.max(1)),
    })
}
