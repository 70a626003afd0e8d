//! Writing JSON by hand where a result is large: [`push_string`] escapes text exactly as
//! `serde_json` does, but skips runs that need no escape sixty-four bytes a step with wasm SIMD
//! (how chitin's components are built), eight bytes a step otherwise (serde_json looks at every
//! byte, which inside a sandbox is most of the cost of returning a megabyte). [`push_utf8`] does
//! the same for bytes not yet known to be UTF-8, checking them in the same pass while they are
//! ASCII.

/// Every byte of a word set to 1.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte of a word.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` that stops [`clean_prefix`]: a byte that needs escaping
/// in a JSON string (a control character below 0x20, `"` or `\`), and with `ASCII` a byte at or
/// above 0x80 too (without, such a byte never counts). Only the lowest bit set is exact (a
/// borrow can mark bytes above it), which is all [`clean_prefix`] reads.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn stops_in<const ASCII: bool>(word: u64) -> u64 {
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20);
    let control = if ASCII {
        (below_space | word) & HIGHS
    } else {
        below_space & !word & HIGHS
    };
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    control | quote | backslash
}

/// Whether `byte` needs escaping in a JSON string.
fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Whether `byte` stops [`clean_prefix`]: it needs escaping, or with `ASCII` is outside ASCII.
fn stops<const ASCII: bool>(byte: u8) -> bool {
    needs_escape(byte) || (ASCII && byte >= 0x80)
}

/// How many bytes at the start of `bytes` do not stop the escaper (see [`stops`]): the
/// position of the first that does, or the length. One sixteen-byte step first (text with short
/// lines stops there), then sixty-four bytes a step with wasm SIMD while none stops it (one test
/// for four vectors: the step's fuel and loop checks are paid once for the four, and a control
/// character is looked for in their bytewise minimum; with `ASCII` the minimum and the test are
/// signed, so a byte at or above 0x80 counts as below 0x20 at no extra cost), then sixteen a
/// step to read the first stop off its bit mask (a step's position is exact).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn clean_prefix<const ASCII: bool>(bytes: &[u8]) -> usize {
    use core::arch::wasm32::{
        i8x16_bitmask, i8x16_eq, i8x16_lt, i8x16_min, u8x16_lt, u8x16_min, u8x16_splat, v128,
        v128_any_true, v128_load, v128_or,
    };
    // SAFETY (every load below): the sixteen bytes at `at` are inside `bytes`, checked before
    // each load, and `v128.load` reads unaligned memory.
    let load = |at: usize| unsafe { v128_load(bytes.as_ptr().add(at).cast::<v128>()) };
    let below_space = |v: v128| {
        if ASCII {
            i8x16_lt(v, u8x16_splat(0x20))
        } else {
            u8x16_lt(v, u8x16_splat(0x20))
        }
    };
    let min = |a: v128, b: v128| {
        if ASCII {
            i8x16_min(a, b)
        } else {
            u8x16_min(a, b)
        }
    };
    let quote_or_backslash = |v: v128| {
        v128_or(
            i8x16_eq(v, u8x16_splat(b'"')),
            i8x16_eq(v, u8x16_splat(b'\\')),
        )
    };
    let stops = |v: v128| i8x16_bitmask(v128_or(below_space(v), quote_or_backslash(v)));
    let mut at = 0;
    if bytes.len() >= 16 {
        let found = stops(load(0));
        if found != 0 {
            return found.trailing_zeros() as usize;
        }
        at = 16;
    }
    while at + 64 <= bytes.len() {
        let (a, b, c, d) = (load(at), load(at + 16), load(at + 32), load(at + 48));
        let least = min(min(a, b), min(c, d));
        let marks = v128_or(
            v128_or(quote_or_backslash(a), quote_or_backslash(b)),
            v128_or(quote_or_backslash(c), quote_or_backslash(d)),
        );
        if v128_any_true(v128_or(below_space(least), marks)) {
            break;
        }
        at += 64;
    }
    while at + 16 <= bytes.len() {
        let found = stops(load(at));
        if found != 0 {
            return at + found.trailing_zeros() as usize;
        }
        at += 16;
    }
    at + clean_tail::<ASCII>(&bytes[at..])
}

/// How many bytes at the start of `bytes` do not stop the escaper, eight bytes a step.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn clean_prefix<const ASCII: bool>(bytes: &[u8]) -> usize {
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let found = stops_in::<ASCII>(u64::from_le_bytes(le));
        if found != 0 {
            return at + found.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    at + clean_tail::<ASCII>(&bytes[at..])
}

/// [`clean_prefix`] of the last few bytes, one at a time.
fn clean_tail<const ASCII: bool>(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| stops::<ASCII>(b))
        .unwrap_or(bytes.len())
}

/// Append the escape of `byte`, which [`needs_escape`], to `out`.
fn push_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let escape = match byte {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        b'\x08' => "\\b",
        b'\t' => "\\t",
        b'\n' => "\\n",
        b'\x0c' => "\\f",
        b'\r' => "\\r",
        0..0x20 => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
            return;
        }
        // Callers hand over only bytes that need escaping; any other ASCII byte is itself.
        _ => {
            debug_assert!(byte.is_ascii(), "push_escape({byte:#x})");
            out.push(char::from(byte));
            return;
        }
    };
    out.push_str(escape);
}

/// Append `text` to `out` escaped, without quotes; how many line feeds it held.
fn push_escaped(out: &mut String, text: &str) -> u64 {
    let bytes = text.as_bytes();
    // Bytes before `run` are written; `at` is the byte looked at.
    let (mut run, mut at, mut newlines) = (0, 0, 0);
    while at < bytes.len() {
        // Every stop is at a byte that needs escaping, or at the end.
        at += clean_prefix::<false>(&bytes[at..]);
        let Some(&byte) = bytes.get(at) else {
            break;
        };
        // `at` is an ASCII byte, so the cut falls on a character boundary.
        out.push_str(&text[run..at]);
        push_escape(out, byte);
        newlines += u64::from(byte == b'\n');
        run = at + 1;
        at += 1;
    }
    out.push_str(&text[run..]);
    newlines
}

/// Append `text` to `out` as a JSON string literal, quotes included, escaped byte for byte as
/// `serde_json::to_string` escapes it.
pub fn push_string(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    push_escaped(out, text);
    out.push('"');
}

/// Bytes that are not UTF-8 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUtf8 {
    /// How many bytes at the start are UTF-8.
    pub valid_up_to: usize,
    /// Whether what follows them is the start of a character cut off by the end of the bytes
    /// (not a byte that can never be UTF-8).
    pub cut_off: bool,
}

impl core::fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let what = if self.cut_off {
            "a character cut off by the end"
        } else {
            "a byte that is not UTF-8"
        };
        write!(f, "not UTF-8 text: {what} at byte {}", self.valid_up_to)
    }
}

impl std::error::Error for NotUtf8 {}

/// Append `bytes` to `out` as [`push_string`] appends the same text, when they are UTF-8;
/// otherwise leave `out` as it was and say where they stop being UTF-8. The pass that looks for
/// escapes also looks for the first byte outside ASCII; only the bytes from there on are checked
/// apart, so ASCII text (most files an agent reads) is looked at once, not twice. Returns how
/// many line feeds the bytes held, which a caller returning lines would otherwise count in a
/// pass of its own.
pub fn push_utf8(out: &mut String, bytes: &[u8]) -> Result<u64, NotUtf8> {
    let start = out.len();
    out.reserve(bytes.len() + 2);
    out.push('"');
    let (mut run, mut at, mut newlines) = (0, 0, 0);
    while at < bytes.len() {
        at += clean_prefix::<true>(&bytes[at..]);
        let Some(&byte) = bytes.get(at) else {
            break;
        };
        if byte >= 0x80 {
            // The first byte outside ASCII: check the rest once and escape it as text.
            let Ok(rest) = simdutf8::basic::from_utf8(&bytes[run..]) else {
                out.truncate(start);
                return Err(match simdutf8::compat::from_utf8(&bytes[run..]) {
                    Err(e) => NotUtf8 {
                        valid_up_to: run + e.valid_up_to(),
                        cut_off: e.error_len().is_none(),
                    },
                    // The two checks disagree: refuse from here rather than guess.
                    Ok(_) => NotUtf8 {
                        valid_up_to: run,
                        cut_off: false,
                    },
                });
            };
            newlines += push_escaped(out, rest);
            out.push('"');
            return Ok(newlines);
        }
        out.push_str(ascii(&bytes[run..at]));
        push_escape(out, byte);
        newlines += u64::from(byte == b'\n');
        run = at + 1;
        at += 1;
    }
    out.push_str(ascii(&bytes[run..]));
    out.push('"');
    Ok(newlines)
}

/// `bytes` as text, which [`clean_prefix`] in its ASCII mode has passed whole.
fn ascii(bytes: &[u8]) -> &str {
    debug_assert!(bytes.is_ascii());
    // SAFETY: every byte is below 0x80 (the ASCII mode of `clean_prefix` stops at any other and
    // the caller never hands one over), and ASCII is UTF-8.
    unsafe { core::str::from_utf8_unchecked(bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        push_string(&mut out, text);
        out
    }

    #[test]
    fn escapes_as_serde_json_does() {
        let mut cases: Vec<String> = [
            "",
            "plain",
            "\"",
            "\\",
            "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{0}i\u{1f}j\u{7f}k",
            "é✓ 日本語 \u{2028} 🦀 and / slashes",
            "exactly8",
            "sixteen bytes!!!",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // Pseudo-random strings over escapes, ASCII and multi-byte characters, at every length
        // around the eight-byte steps.
        let alphabet: Vec<char> = "ab\"\\\n\r\t\u{0}\u{1}\u{1f} ~\u{7f}é✓🦀".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in 0..200 {
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let pick = (state % 64) as usize;
                    if pick < 40 {
                        'x'
                    } else {
                        alphabet[pick % alphabet.len()]
                    }
                })
                .collect();
            cases.push(text);
        }
        for byte in 0..=0x7fu8 {
            cases.push(format!("0123456{}89abcdef", char::from(byte)));
            cases.push(format!(
                "0123456789abcde{}ghijklmnopqrstuvwxyz",
                char::from(byte)
            ));
        }
        for text in &cases {
            let expected = serde_json::to_string(text).expect("serialise");
            assert_eq!(escaped(text), expected, "{text:?}");
            // Each step stops exactly at the first byte that needs escaping.
            let bytes = text.as_bytes();
            for start in 0..bytes.len() {
                let first = bytes[start..]
                    .iter()
                    .position(|&b| needs_escape(b))
                    .unwrap_or(bytes.len() - start);
                assert_eq!(
                    clean_prefix::<false>(&bytes[start..]),
                    first,
                    "{text:?} from {start}"
                );
                let first_ascii_stop = bytes[start..]
                    .iter()
                    .position(|&b| needs_escape(b) || b >= 0x80)
                    .unwrap_or(bytes.len() - start);
                assert_eq!(
                    clean_prefix::<true>(&bytes[start..]),
                    first_ascii_stop,
                    "{text:?} from {start}, ASCII"
                );
            }
            // As bytes, checked on the way, the same text and nothing else.
            let mut out = String::from("[");
            let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(push_utf8(&mut out, bytes), Ok(newlines), "{text:?}");
            assert_eq!(out, format!("[{expected}"), "{text:?}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_where_core_refuses_them_and_add_nothing() {
        let mut cases: Vec<Vec<u8>> = vec![
            vec![0x80],
            vec![b'a', 0xff],
            b"ok \"quoted\" then \xc3".to_vec(),
            b"cut at the end \xe2\x9c".to_vec(),
            b"\xed\xa0\x80 a surrogate".to_vec(),
            b"\xc0\xaf overlong".to_vec(),
        ];
        // Invalid bytes at every place around the 16- and 64-byte steps, after ASCII and after
        // valid multi-byte characters, and characters cut off at the end.
        for at in 0..140 {
            for bad in [&[0x80u8][..], &[0xc3, b'('], &[0xf0, 0x9f, 0xa6]] {
                let mut ascii = vec![b'x'; at];
                ascii.extend_from_slice(bad);
                ascii.extend_from_slice(b"tail\n");
                let mut wide = "é".repeat(at / 2).into_bytes();
                wide.extend_from_slice(bad);
                cases.push(ascii.clone());
                cases.push(wide);
                ascii.truncate(at + 1);
                cases.push(ascii);
            }
        }
        for bytes in &cases {
            let Err(expected) = core::str::from_utf8(bytes) else {
                panic!("{bytes:?} is UTF-8");
            };
            let mut out = String::from("kept");
            assert_eq!(
                push_utf8(&mut out, bytes),
                Err(NotUtf8 {
                    valid_up_to: expected.valid_up_to(),
                    cut_off: expected.error_len().is_none(),
                }),
                "{bytes:?}"
            );
            assert_eq!(out, "kept");
        }
        let cut = push_utf8(&mut String::new(), b"ab\xe2\x9c").expect_err("cut");
        assert_eq!(
            cut.to_string(),
            "not UTF-8 text: a character cut off by the end at byte 2"
        );
        let bad = push_utf8(&mut String::new(), b"abc\xff").expect_err("bad");
        assert_eq!(
            bad.to_string(),
            "not UTF-8 text: a byte that is not UTF-8 at byte 3"
        );
    }
}
