//! Base64 and hex streams wrapped into lines: `base64` and MIME wrap at 76 characters, PEM and
//! `openssl base64` at 64, `xxd -p` at 60. Each line is a run of its own to the run search, so a
//! credential encoded across a line break decodes in neither line; here the lines are joined
//! into the one stream they are.
//!
//! A stream's lines are runs of one width on consecutive lines (a line break, in the text or
//! as a JSON escape, then indentation), all but the last exactly that wide and without padding,
//! the last at most that wide. The width is a multiple of 4 (of 2 for hex), so each line is
//! whole groups and the stream decodes to what its lines decode to, joined: the lines of ordinary
//! text seldom agree so.

use std::ops::Range;

use super::runs::in_run;
use super::{MIN_ENCODED_RUN, unpadded};
use crate::secrets::is_hex;

/// The stream wrapped into lines whose first line is `run` of `bytes`, when at least one line
/// continues it: its span in `bytes` (from the first line's first character, after the letter of
/// an escape the run begins with, to the last line's last), with its characters, the line breaks and indentation left out, in `chars`.
pub(super) fn stream_from(
    bytes: &[u8],
    run: Range<usize>,
    chars: &mut Vec<u8>,
) -> Option<Range<usize>> {
    // A run after a JSON escape (`\n`, `\t`) begins with its letter, which is no character of
    // the stream.
    let first = if escaped_at(bytes, run.start) {
        run.start + 1..run.end
    } else {
        run.clone()
    };
    let line = &bytes[first.clone()];
    let width = line.len();
    if width < MIN_ENCODED_RUN || unpadded(line).len() != width {
        return None;
    }
    let mut end = first.end;
    let mut next = line_after(bytes, end)?;
    // A first line all hex makes a hex stream, whose every line is hex: the word after it
    // is no part of it.
    let hex = width.is_multiple_of(2) && is_hex(line);
    if !(width.is_multiple_of(4) || hex) {
        return None;
    }
    chars.clear();
    chars.extend_from_slice(line);
    loop {
        let len = bytes[next..].iter().take_while(|&&b| in_run(b)).count();
        let line = &bytes[next..next + len];
        let chars_len = unpadded(line).len();
        // Padding only ends a line, and only the last; a line with padding or shorter than the
        // width is the stream's last.
        let last = len < width || chars_len < len;
        if len == 0
            || len > width
            || line[..chars_len].contains(&b'=')
            || (hex && !is_hex(line))
            || (last && !ends_line(bytes, next + len))
        {
            break;
        }
        chars.extend_from_slice(line);
        end = next + len;
        if last {
            break;
        }
        match line_after(bytes, end) {
            Some(after) => next = after,
            None => break,
        }
    }
    (end > first.end).then_some(first.start..end)
}

/// Where the next line's characters begin, when `bytes` at `at` is a line break (`\n`, `\r\n`,
/// or either as JSON escapes) and indentation (spaces, tabs, `\t` escapes).
fn line_after(bytes: &[u8], mut at: usize) -> Option<usize> {
    let rest = |at: usize| bytes.get(at..).unwrap_or_default();
    if rest(at).starts_with(b"\r") {
        at += 1;
    } else if rest(at).starts_with(br"\r") {
        at += 2;
    }
    if rest(at).starts_with(b"\n") {
        at += 1;
    } else if rest(at).starts_with(br"\n") {
        at += 2;
    } else {
        return None;
    }
    loop {
        match rest(at) {
            [b' ' | b'\t', ..] => at += 1,
            [b'\\', b't', ..] => at += 2,
            _ => return Some(at),
        }
    }
}

/// Whether `bytes` at `at` ends a line: the end of the text, a line break (or its JSON escape),
/// or a quote closing a string. A short line followed by more of its line is a word, not the
/// stream's last line.
fn ends_line(bytes: &[u8], at: usize) -> bool {
    matches!(
        bytes.get(at..).unwrap_or_default(),
        [] | [b'\r' | b'\n' | b'"' | b'\'', ..] | [b'\\', b'r' | b'n' | b'"', ..]
    )
}

/// Whether the byte at `at` is the letter of a JSON escape: after a backslash that is not
/// itself escaped (an odd number of them before it).
fn escaped_at(bytes: &[u8], at: usize) -> bool {
    let backslashes = bytes[..at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count();
    backslashes % 2 == 1 && matches!(bytes.get(at), Some(b'n' | b'r' | b't' | b'b' | b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(text: &str) -> Option<(Range<usize>, String)> {
        let bytes = text.as_bytes();
        let mut first = None;
        super::super::runs::encoded_runs(bytes, |run| {
            first.get_or_insert(run);
        });
        let mut chars = Vec::new();
        let span = stream_from(bytes, first?, &mut chars)?;
        Some((span, String::from_utf8(chars).expect("ascii")))
    }

    #[test]
    fn lines_of_one_width_are_joined_through_every_kind_of_line_break() {
        let (a, b, c) = ("Q".repeat(20), "R".repeat(20), "CC==");
        let joined = format!("{a}{b}{c}");
        for text in [
            format!("{a}\n{b}\n{c}"),
            format!("{a}\r\n{b}\r\n{c}"),
            format!(r"{a}\n{b}\n{c}"),
            format!(r"{a}\r\n{b}\r\n{c}"),
            format!("{a}\n    {b}\n\t{c}"),
            format!(r"{a}\n\t\t{b}\n  {c}"),
        ] {
            let (span, chars) = stream(&text).expect("a stream");
            assert_eq!(chars, joined, "{text:?}");
            assert_eq!(span, 0..text.len(), "{text:?}");
        }
        // After a JSON line break, the escape's letter is not the stream's.
        let text = format!(r"x\n{a}\n{b}");
        let (span, chars) = stream(&text).expect("a stream");
        assert_eq!(chars, format!("{a}{b}"));
        assert_eq!(&text[span], format!(r"{a}\n{b}"));
        // Hex lines of an even width.
        let hex = "0a1b".repeat(7) + "2c";
        let (_, chars) = stream(&format!("{hex}\n{hex}\n0f")).expect("hex");
        assert_eq!(chars, format!("{hex}{hex}0f"));
        // A word on the line after a hex stream is not hex, so not the stream's.
        let (_, chars) = stream(&format!("{hex}\n{hex}\ndone")).expect("hex");
        assert_eq!(chars, format!("{hex}{hex}"));
    }

    #[test]
    fn the_stream_ends_at_a_short_padded_wider_or_missing_line() {
        let (a, b, p) = ("Q".repeat(20), "R".repeat(20), "R".repeat(18));
        let cases = [
            (format!("{a}\n{b}\nRRRR\n{b}"), format!("{a}{b}RRRR")),
            (format!("{a}\n{b}\nRRRR\"}}"), format!("{a}{b}RRRR")),
            (format!("{a}\n{p}==\n{b}"), format!("{a}{p}==")),
            (format!("{a}\n{b}\nRRRR and more"), format!("{a}{b}")),
            (format!("{a}\n{b}\n{b}BBBB"), format!("{a}{b}")),
            (format!("{a}\n{b}\n\n{b}"), format!("{a}{b}")),
            (format!("{a}\n{b}\nB=B\n"), format!("{a}{b}")),
            (format!("{a}\n{b}\n{b} word"), format!("{a}{b}{b}")),
        ];
        for (text, joined) in cases {
            assert_eq!(stream(&text).map(|s| s.1), Some(joined), "{text:?}");
        }
    }

    #[test]
    fn lines_that_cannot_be_one_stream_are_not_joined() {
        let a = "Q".repeat(20);
        for text in [
            // Nothing after the first line, or a blank line, or a line that begins with text.
            a.clone(),
            format!("{a}\n\n{a}"),
            format!("{a}\n- {a}"),
            // A first line padded (a whole stream), not whole groups, or too short to be a run.
            format!("{a}==\n{a}"),
            format!("{}\n{}", "Q".repeat(21), "Q".repeat(21)),
            format!("{}\n{}", "Q".repeat(18), "Q".repeat(18)),
            format!("{}\n{}", "a".repeat(19), "a".repeat(19)),
            // Two words apart.
            format!("{a} {a}"),
        ] {
            assert_eq!(stream(&text), None, "{text:?}");
        }
    }
}
