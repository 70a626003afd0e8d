//! `read_file`: a window of lines from a text file, capped at 1 MiB of content and at the call's
//! output budget.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;

use chitin_sdk::json;
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
    /// Most lines to return (default: all, up to 1 MiB of content or what the call may return)
    pub limit: Option<u64>,
}

/// What `read_file` returns: its output schema ([`to_json`] writes it by hand).
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

/// The JSON result of a read of `window` from `path` (exactly what `serde_json` writes for the
/// [`ReadOutput`] of the same text), the content escaped by the SDK's word-at-a-time escaper: up
/// to a megabyte of text is most of a call's cost. The escaper checks that the bytes are UTF-8
/// in the same pass; a window cut inside a character at the cap drops the partial character.
pub fn to_json(path: &RelPath, window: &Window, offset: u64) -> Result<String, ToolError> {
    let shown = path.display();
    let truncated = window.truncated;
    // Room for the escapes of ordinary text (a newline per line) without growing.
    let content = window.bytes.len();
    let mut out = String::with_capacity(content + content / 8 + shown.len() + 128);
    out.push_str("{\"path\":");
    json::push_string(&mut out, &shown);
    out.push_str(",\"content\":");
    let not_utf8 = || ToolError::invalid_args(format!("`{shown}` is not UTF-8 text"));
    let newlines = match json::push_utf8(&mut out, &window.bytes) {
        Ok(newlines) => newlines,
        // Cut inside a character at the cap: the bytes before it are UTF-8. (A cut character
        // holds no line feed, so the count is the window's.)
        Err(e) if e.cut_off => {
            json::push_utf8(&mut out, &window.bytes[..e.valid_up_to]).map_err(|_| not_utf8())?
        }
        Err(_) => return Err(not_utf8()),
    };
    let lines = window.lines(newlines);
    let next = truncated.then_some(offset + lines.max(1));
    let next = next.map_or_else(|| "null".to_owned(), |n| n.to_string());
    out.push_str(&format!(
        ",\"offset\":{offset},\"lines\":{lines},\"truncated\":{truncated},\"next_offset\":{next}}}"
    ));
    Ok(out)
}

/// Bytes asked of the host per read: the most wasmtime-wasi hands back from one read.
const READ_CHUNK: usize = 64 * 1024;

/// Bytes asked of the host by a file's first read. Most files an agent reads are small: a
/// 64 KiB first read grew sixteen fresh pages of guest memory, ~25 µs of a small file's read
/// when they were zero-filled first. A larger file pays one more read.
const FIRST_READ: usize = 8 * 1024;

/// Where a window's bytes come from.
pub trait Source {
    /// Append at most `room` bytes to `buf`, whose spare capacity holds at least that many;
    /// how many were appended (0 at the end).
    fn append(&mut self, buf: &mut Vec<u8>, room: usize) -> io::Result<usize>;
}

/// A file reads straight into the buffer's spare room: zero-filling it first, as a `Read` into
/// a slice needs, was a pass over every byte read (4 % of a megabyte's read).
impl Source for File {
    fn append(&mut self, buf: &mut Vec<u8>, room: usize) -> io::Result<usize> {
        let spare = buf.spare_capacity_mut();
        let room = room.min(spare.len());
        let read = loop {
            // SAFETY: `read` writes at most `room` bytes to the spare capacity, which is
            // allocated and at least that long; it only writes, never reads, that memory.
            let read = unsafe { libc::read(self.as_raw_fd(), spare.as_mut_ptr().cast(), room) };
            match usize::try_from(read) {
                Ok(read) => break read.min(room),
                Err(_) => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
            }
        };
        // SAFETY: the first `read` bytes of the spare capacity were just written by `read`.
        unsafe { buf.set_len(buf.len() + read) };
        Ok(read)
    }
}

/// Any other reader, through a zero-filled slice.
pub struct Reader<R>(pub R);

impl<R: Read> Source for Reader<R> {
    fn append(&mut self, buf: &mut Vec<u8>, room: usize) -> io::Result<usize> {
        let filled = buf.len();
        buf.resize(filled + room, 0);
        let read = loop {
            match self.0.read(&mut buf[filled..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                read => break read,
            }
        };
        let read = read.map(|n| n.min(room));
        buf.truncate(filled + read.as_ref().map_or(0, |n| *n));
        read
    }
}

/// Reads lines `offset..offset+limit` of the file, stopping at the size cap and at the call's
/// output budget; the result as JSON.
pub fn read_file(ws: &Workspace, args: ReadArgs) -> Result<String, ToolError> {
    let path = RelPath::parse(&args.path)?;
    let file = File::open(path.under(&ws.root)).map_err(|e| error(&path, "read", e))?;
    let offset = args.offset.unwrap_or(0);
    let limit = args.limit.unwrap_or(u64::MAX);
    // The content is never longer than its JSON, so no more than the budget is read.
    let cap = ws.budget.map_or(MAX_READ_BYTES, |b| b.min(MAX_READ_BYTES));
    let window = read_window(file, offset, limit, cap).map_err(|e| error(&path, "read", e))?;
    within_budget(&path, window, offset, ws.budget)
}

/// Bytes the fields after the content may grow by when the window is cut: `next_offset` turns
/// from `null` into a number.
const TAIL_GROWTH: usize = 16;

/// The result of `window` as JSON, the window cut (at a line's end where one falls within) until
/// the result fits in `budget` bytes: escapes make the result longer than the content.
pub fn within_budget(
    path: &RelPath,
    mut window: Window,
    offset: u64,
    budget: Option<usize>,
) -> Result<String, ToolError> {
    loop {
        let out = to_json(path, &window, offset)?;
        let Some(budget) = budget else {
            return Ok(out);
        };
        if out.len() <= budget || window.bytes.is_empty() {
            return Ok(out);
        }
        // Keep the share of the content the budget holds (escapes make some bytes longer than
        // others, so this may take another turn), and always less than before.
        let len = window.bytes.len();
        let share = len.saturating_mul(budget.saturating_sub(TAIL_GROWTH)) / out.len();
        window.shrink(share.min(len - 1));
    }
}

/// Lines `offset..offset+limit` of a file, cut at a cap of at most [`MAX_READ_BYTES`].
#[derive(Debug, PartialEq, Eq)]
pub struct Window {
    /// The lines' bytes, with their line endings.
    pub bytes: Vec<u8>,
    /// How many lines `bytes` holds (a first line longer than the cap counts as none), or
    /// `None` when they are whole lines, the last perhaps without its ending, to be counted from
    /// the line feeds the result's escaper meets anyway (see [`Window::lines`]).
    pub counted: Option<u64>,
    /// Whether more of the file follows.
    pub truncated: bool,
}

impl Window {
    /// Cut the window to at most `keep` bytes: the whole lines among them, or the first part
    /// of the first line when none ends within them (counted as none, as at the cap).
    pub fn shrink(&mut self, keep: usize) {
        let keep = keep.min(self.bytes.len());
        match memchr::memrchr(b'\n', &self.bytes[..keep]) {
            Some(end) => {
                self.bytes.truncate(end + 1);
                self.counted = None;
            }
            None => {
                self.bytes.truncate(keep);
                self.counted = Some(0);
            }
        }
        self.truncated = true;
    }

    /// How many lines the window holds, given how many line feeds `bytes` holds.
    pub fn lines(&self, newlines: u64) -> u64 {
        self.counted
            .unwrap_or_else(|| newlines + u64::from(self.bytes.last().is_some_and(|&b| b != b'\n')))
    }
}

/// Read the window of lines `offset..offset+limit` from `reader` in one buffer, cut at `cap`
/// bytes: lines are found in place, so each byte is copied once, and skipped lines are dropped
/// as they pass. Reading stops as soon as the window is decided (the limit reached with more to
/// come, or the cap passed), so a huge file or a huge line is never held whole.
pub fn read_window(
    mut reader: impl Source,
    offset: u64,
    limit: u64,
    cap: usize,
) -> io::Result<Window> {
    let mut buf: Vec<u8> = Vec::new();
    // Lines still to skip; the window starts after the `offset`-th line ending.
    let mut skip = offset;
    // Where the current, not yet ended, line starts in `buf`; newlines before `scanned` are
    // accounted for.
    let mut line_start = 0;
    let mut scanned = 0;
    let mut lines = 0u64;
    let mut eof = false;
    loop {
        if !eof {
            eof = read_more(&mut reader, &mut buf, cap)?;
        }
        if skip > 0 {
            // Count line endings among the new bytes and drop what was skipped.
            for at in memchr::memchr_iter(b'\n', &buf[scanned..]) {
                skip -= 1;
                if skip == 0 {
                    line_start = scanned + at + 1;
                    break;
                }
            }
            if skip > 0 {
                // Still inside skipped lines: nothing read so far is kept.
                buf.clear();
                scanned = 0;
                if eof {
                    return Ok(Window {
                        bytes: Vec::new(),
                        counted: Some(0),
                        truncated: false,
                    });
                }
                continue;
            }
            buf.drain(..line_start);
            line_start = 0;
            scanned = 0;
        }
        if limit == u64::MAX {
            // No limit: the window is every line to the end of the file or to the last line
            // that ends within the cap. Nothing needs them one by one, and the escaper counts
            // them (a megabyte's search for each line's end was ~5 % of its read).
            if buf.len() > cap {
                return Ok(cut_at_cap(buf, cap));
            }
            if eof {
                return Ok(Window {
                    bytes: buf,
                    counted: None,
                    truncated: false,
                });
            }
            continue;
        }
        // Complete the lines that end among the new bytes (and, at the end of the file, the
        // last one without an ending).
        while line_start < buf.len() {
            let end = match memchr::memchr(b'\n', &buf[scanned..]) {
                Some(at) => scanned + at + 1,
                None if eof => buf.len(),
                None => {
                    scanned = buf.len();
                    break;
                }
            };
            scanned = end;
            if lines == limit {
                buf.truncate(line_start);
                return Ok(Window {
                    bytes: buf,
                    counted: Some(lines),
                    truncated: true,
                });
            }
            if end > cap {
                return Ok(over_cap(buf, line_start, lines, cap));
            }
            lines += 1;
            line_start = end;
        }
        if line_start < buf.len() && lines == limit {
            // A line follows the last one asked for.
            buf.truncate(line_start);
            return Ok(Window {
                bytes: buf,
                counted: Some(lines),
                truncated: true,
            });
        }
        if buf.len() > cap {
            // The line being read already passes the cap, wherever it ends.
            return Ok(over_cap(buf, line_start, lines, cap));
        }
        if eof {
            return Ok(Window {
                bytes: buf,
                counted: Some(lines),
                truncated: false,
            });
        }
    }
}

/// Append one read's bytes to `buf`, whose window is cut at `cap`; whether the file has ended.
fn read_more(reader: &mut impl Source, buf: &mut Vec<u8>, cap: usize) -> io::Result<bool> {
    let filled = buf.len();
    if buf.capacity() == 0 {
        buf.reserve_exact(FIRST_READ);
    } else if filled >= READ_CHUNK && buf.capacity() < cap + READ_CHUNK {
        // More than one read's worth: room for the whole window at once, since growing by
        // doubling copies it and touches twice the memory.
        buf.reserve_exact((cap + READ_CHUNK).saturating_sub(filled));
    } else if buf.capacity() - filled < READ_CHUNK / 16 {
        buf.reserve(READ_CHUNK);
    }
    // Read into the room there is (a small file's closing read needs no more memory).
    let room = (buf.capacity() - filled).min(READ_CHUNK);
    Ok(reader.append(buf, room)? == 0)
}

/// The window of every line from the start of `buf`, which passes the cap: the lines that end
/// within it, or the first part of the first when none does.
fn cut_at_cap(mut buf: Vec<u8>, cap: usize) -> Window {
    match memchr::memrchr(b'\n', &buf[..cap]) {
        Some(end) => {
            buf.truncate(end + 1);
            Window {
                bytes: buf,
                counted: None,
                truncated: true,
            }
        }
        None => over_cap(buf, 0, 0, cap),
    }
}

/// The window when the line starting at `line_start` does not fit under the cap: the lines
/// before it, or the first part of it when it is the first.
fn over_cap(mut buf: Vec<u8>, line_start: usize, lines: u64, cap: usize) -> Window {
    buf.truncate(if lines == 0 { cap } else { line_start });
    Window {
        bytes: buf,
        counted: Some(lines),
        truncated: true,
    }
}
