//! Writing JSON by hand where a result is large: [`push_string`] escapes text exactly as
//! `serde_json` does, but skips runs that need no escape sixty-four bytes a step with wasm SIMD
//! (how chitin's components are built), eight bytes a step otherwise (serde_json looks at every
//! byte, which inside a sandbox is most of the cost of returning a megabyte).

/// Every byte of a word set to 1.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte of a word.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` that needs escaping in a JSON string (a control
/// character below 0x20, `"` or `\`); a byte at or above 0x80 (inside a UTF-8 character) never
/// counts. Only the lowest bit set is exact (a borrow can mark bytes above it), which is all
/// [`clean_prefix`] reads.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn escapes_in(word: u64) -> u64 {
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    control | quote | backslash
}

/// Whether `byte` needs escaping in a JSON string.
fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// How many bytes at the start of `bytes` need no escaping: the position of the first that
/// does, or the length. One sixteen-byte step first (text with short lines stops there), then
/// sixty-four bytes a step with wasm SIMD while none needs escaping (one test for four vectors:
/// the step's fuel and loop checks are paid once for the four, and a control character is
/// looked for in their bytewise minimum), then sixteen a step to read the first escape off its
/// bit mask (a step's position is exact).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn clean_prefix(bytes: &[u8]) -> usize {
    use core::arch::wasm32::{
        i8x16_bitmask, i8x16_eq, u8x16_lt, u8x16_min, u8x16_splat, v128, v128_any_true, v128_load,
        v128_or,
    };
    // SAFETY (every load below): the sixteen bytes at `at` are inside `bytes`, checked before
    // each load, and `v128.load` reads unaligned memory.
    let load = |at: usize| unsafe { v128_load(bytes.as_ptr().add(at).cast::<v128>()) };
    let quote_or_backslash = |v: v128| {
        v128_or(
            i8x16_eq(v, u8x16_splat(b'"')),
            i8x16_eq(v, u8x16_splat(b'\\')),
        )
    };
    let escapes = |v: v128| {
        i8x16_bitmask(v128_or(
            u8x16_lt(v, u8x16_splat(0x20)),
            quote_or_backslash(v),
        ))
    };
    let mut at = 0;
    if bytes.len() >= 16 {
        let found = escapes(load(0));
        if found != 0 {
            return found.trailing_zeros() as usize;
        }
        at = 16;
    }
    while at + 64 <= bytes.len() {
        let (a, b, c, d) = (load(at), load(at + 16), load(at + 32), load(at + 48));
        let least = u8x16_min(u8x16_min(a, b), u8x16_min(c, d));
        let marks = v128_or(
            v128_or(quote_or_backslash(a), quote_or_backslash(b)),
            v128_or(quote_or_backslash(c), quote_or_backslash(d)),
        );
        if v128_any_true(v128_or(u8x16_lt(least, u8x16_splat(0x20)), marks)) {
            break;
        }
        at += 64;
    }
    while at + 16 <= bytes.len() {
        let found = escapes(load(at));
        if found != 0 {
            return at + found.trailing_zeros() as usize;
        }
        at += 16;
    }
    at + clean_tail(&bytes[at..])
}

/// How many bytes at the start of `bytes` need no escaping, eight bytes a step.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn clean_prefix(bytes: &[u8]) -> usize {
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let found = escapes_in(u64::from_le_bytes(le));
        if found != 0 {
            return at + found.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    at + clean_tail(&bytes[at..])
}

/// [`clean_prefix`] of the last few bytes, one at a time.
fn clean_tail(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| needs_escape(b))
        .unwrap_or(bytes.len())
}

/// Append `text` to `out` as a JSON string literal, quotes included, escaped byte for byte as
/// `serde_json::to_string` escapes it.
pub fn push_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push('"');
    // Bytes before `run` are written; `at` is the byte looked at.
    let (mut run, mut at) = (0, 0);
    while at < bytes.len() {
        // Every stop is at a byte that needs escaping, or at the end.
        at += clean_prefix(&bytes[at..]);
        let Some(&byte) = bytes.get(at) else {
            break;
        };
        let escape: Option<&str> = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\x08' => Some("\\b"),
            b'\t' => Some("\\t"),
            b'\n' => Some("\\n"),
            b'\x0c' => Some("\\f"),
            b'\r' => Some("\\r"),
            0..0x20 => Some(""),
            _ => None,
        };
        if let Some(escape) = escape {
            // `at` is an ASCII byte, so both cuts fall on character boundaries.
            out.push_str(&text[run..at]);
            if escape.is_empty() {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            } else {
                out.push_str(escape);
            }
            run = at + 1;
        }
        at += 1;
    }
    out.push_str(&text[run..]);
    out.push('"');
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
                    clean_prefix(&bytes[start..]),
                    first,
                    "{text:?} from {start}"
                );
            }
        }
    }
}
