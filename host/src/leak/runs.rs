//! The search for base64/base64url/hex runs in a scanned text: what the regex
//! `[A-Za-z0-9+/_-]{16,}=*` finds, found 64 bytes at a time.
//!
//! Each 64-byte block becomes a bit mask (bit `i` set when byte `i` is in the alphabet; SSE2
//! compares on x86_64, a table elsewhere), and runs are read off the masks: a block entirely in
//! a run costs one compare, and the runs of at least 16 bits inside a block are found by
//! shifting the mask against itself (`x & x >> 1`, `>> 2`, `>> 4`, `>> 8`) rather than byte by
//! byte. A byte-at-a-time search cost 0.25 ms of every 1 MiB result (`docs/performance.md`).
//!
//! The same pass notes whether the text holds a `%` or a byte outside ASCII, where every
//! obfuscation the scanner looks through begins: text without one (most text) needs no
//! second pass to find out.

use std::ops::Range;

use super::MIN_ENCODED_RUN;

// The mask cascade in `block_runs` finds runs of exactly this many bits or more.
const _: () = assert!(MIN_ENCODED_RUN == 16);

/// Bytes per block: one bit of a `u64` each.
const BLOCK: usize = 64;

/// The base64/base64url/hex alphabet, as a byte table.
const ALPHABET: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'_' | b'-');
        b += 1;
    }
    table
};

/// Whether `b` can be part of a run or of the padding after one.
pub(super) fn in_run(b: u8) -> bool {
    ALPHABET[usize::from(b)] || b == b'='
}

/// Calls `each` with the span of every run of at least [`MIN_ENCODED_RUN`] alphabet bytes in
/// `bytes`, with the `=` padding after it, in order. Returns whether `bytes` hold a `%` or a
/// byte outside ASCII (see [`Classes::leads`]).
pub(super) fn encoded_runs(bytes: &[u8], mut each: impl FnMut(Range<usize>)) -> bool {
    let mut emit = |start: usize, end: usize| {
        if end - start >= MIN_ENCODED_RUN {
            let padding = bytes[end..].iter().take_while(|&&b| b == b'=').count();
            each(start..end + padding);
        }
    };
    // The start of a run reaching the end of the blocks read so far.
    let mut open: Option<usize> = None;
    let mut leads = false;
    let (blocks, tail) = bytes.as_chunks::<BLOCK>();
    for (i, block) in blocks.iter().enumerate() {
        let classes = classify(block);
        leads |= classes.leads;
        block_runs(classes.alphabet, i * BLOCK, &mut open, &mut emit);
    }
    if !tail.is_empty() {
        // Padded with zero bytes, which are neither in the alphabet nor leads, so the block's
        // bits past the text stay clear: one block's compares instead of a byte at a time, the
        // whole of a short result's pass.
        let mut padded = [0u8; BLOCK];
        padded[..tail.len()].copy_from_slice(tail);
        let classes = classify(&padded);
        leads |= classes.leads;
        block_runs(classes.alphabet, blocks.len() * BLOCK, &mut open, &mut emit);
    }
    if let Some(start) = open {
        emit(start, bytes.len());
    }
    leads
}

/// What the pass learns of up to 64 bytes.
#[derive(Debug, PartialEq, Eq)]
struct Classes {
    /// Bit `i` set when byte `i` is in the alphabet; bits past the bytes are clear.
    alphabet: u64,
    /// Whether a byte is `%` or outside ASCII: where a percent-escape or an invisible character
    /// (whose UTF-8 begins with a byte above 0x7F) may begin.
    leads: bool,
}

/// Whether `b` may begin an obfuscation (see [`Classes::leads`]).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn is_lead(b: u8) -> bool {
    b == b'%' || !b.is_ascii()
}

/// The runs of one block's `mask` (bits past the text are clear), the block starting at
/// `base`: a run `open` from earlier blocks is closed or carried on, runs inside the block are
/// emitted, and one reaching its last bit is left open.
fn block_runs(
    mask: u64,
    base: usize,
    open: &mut Option<usize>,
    emit: &mut impl FnMut(usize, usize),
) {
    let mut from = 0;
    if let Some(start) = *open {
        let ones = mask.trailing_ones();
        if ones == 64 {
            return;
        }
        emit(start, base + ones as usize);
        *open = None;
        from = ones;
    }
    let live = mask & (u64::MAX << from);
    // A run reaching the block's last bit may go on in the next block: kept apart.
    let top = live.leading_ones();
    if top > 0 {
        *open = Some(base + 64 - top as usize);
    }
    let inner = live & u64::MAX.checked_shr(top).unwrap_or(0);
    // Bit `i` of `long` is set when bits `i..i + 16` of `inner` all are: its lowest set bit in
    // each run of 16 or more is where that run starts.
    let mut long = inner & (inner >> 1);
    long &= long >> 2;
    long &= long >> 4;
    long &= long >> 8;
    while long != 0 {
        let start = long.trailing_zeros();
        // `inner` has a clear bit above every run it holds (its top run was taken out).
        let end = start + (inner >> start).trailing_ones();
        emit(base + start as usize, base + end as usize);
        long &= u64::MAX.checked_shl(end).unwrap_or(0);
    }
}

/// The classes of up to 64 bytes, a byte at a time through the table.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn table_classes(bytes: &[u8]) -> Classes {
    Classes {
        alphabet: bytes.iter().enumerate().fold(0, |mask, (i, &b)| {
            mask | (u64::from(ALPHABET[usize::from(b)]) << i)
        }),
        leads: bytes.iter().any(|&b| is_lead(b)),
    }
}

/// The classes of a block: four sixteen-byte SSE2 classifications.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn classify(block: &[u8; BLOCK]) -> Classes {
    // SAFETY: the build targets SSE2 (`cfg` above), which every x86_64 CPU has.
    unsafe { sse2_classes(block) }
}

/// [`classify`] in SSE2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn sse2_classes(block: &[u8; BLOCK]) -> Classes {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_sub_epi8,
    };
    /// Lanes of `v` within `lo..=hi` (unsigned): `v - lo <= hi - lo`, as `min(d, k) == d`.
    #[target_feature(enable = "sse2")]
    fn within(v: __m128i, lo: u8, hi: u8) -> __m128i {
        let d = _mm_sub_epi8(v, _mm_set1_epi8(lo as i8));
        _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8((hi - lo) as i8)), d)
    }
    /// Lanes of `v` equal to `c`.
    #[target_feature(enable = "sse2")]
    fn equal(v: __m128i, c: u8) -> __m128i {
        _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8))
    }
    let mut mask = 0u64;
    // A lane's byte with its top bit set is outside ASCII; `%` lanes are set by the compare.
    let mut leads = _mm_set1_epi8(0);
    for (i, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: `lane` is 16 readable bytes, and `_mm_loadu_si128` takes any alignment.
        let v = unsafe { _mm_loadu_si128(lane.as_ptr().cast()) };
        // Setting 0x20 turns `A-Z` into `a-z` and moves nothing else into `a-z`.
        let letters = within(_mm_or_si128(v, _mm_set1_epi8(0x20)), b'a', b'z');
        let digits = within(v, b'0', b'9');
        let signs = _mm_or_si128(
            _mm_or_si128(equal(v, b'+'), equal(v, b'/')),
            _mm_or_si128(equal(v, b'_'), equal(v, b'-')),
        );
        let bits = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letters, digits), signs));
        mask |= u64::from(bits as u16) << (16 * i);
        leads = _mm_or_si128(leads, _mm_or_si128(v, equal(v, b'%')));
    }
    Classes {
        alphabet: mask,
        leads: _mm_movemask_epi8(leads) != 0,
    }
}

/// The classes of a block, through the table.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn classify(block: &[u8; BLOCK]) -> Classes {
    table_classes(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_classes_are_the_tables_for_every_byte_at_every_position() {
        for byte in 0..=255u8 {
            for at in 0..BLOCK {
                let mut block = [b' '; BLOCK];
                block[at] = byte;
                let classes = classify(&block);
                assert_eq!(classes, table_classes(&block), "{byte:#x} at {at}");
                assert_eq!(
                    classes.leads,
                    byte == b'%' || byte >= 0x80,
                    "{byte:#x} at {at}"
                );
            }
        }
        let mixed: Vec<u8> = (0..BLOCK).map(|i| (i * 37 + 11) as u8).collect();
        let block: [u8; BLOCK] = mixed.as_slice().try_into().expect("64 bytes");
        assert_eq!(classify(&block), table_classes(&block));
    }

    #[test]
    fn leads_are_reported_at_every_position_and_only_where_they_are() {
        // Every length up to past two blocks, so the padded last block is checked at each size.
        for len in 0..=130 {
            let plain = vec![b'a'; len];
            assert!(!encoded_runs(&plain, |_| {}), "no lead in {len} bytes");
            for at in 0..len {
                for lead in [b'%', 0x80, 0xff] {
                    let mut text = plain.clone();
                    text[at] = lead;
                    assert!(encoded_runs(&text, |_| {}), "{lead:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn runs_at_every_length_and_offset_across_block_edges() {
        // A run of `len` alphabet bytes at `at`, `=` after it, in spaces: every position relative
        // to the 64-byte blocks, runs just under, at and over the minimum, and runs spanning one
        // to three block edges.
        for len in [1, 15, 16, 17, 63, 64, 65, 128, 150] {
            for at in 0..130 {
                let mut text = vec![b' '; at + len + 70];
                text[at..at + len].fill(b'Q');
                text[at + len] = b'=';
                let mut found = Vec::new();
                encoded_runs(&text, |run| found.push(run));
                let expected: Vec<Range<usize>> = Some(at..at + len + 1)
                    .filter(|_| len >= MIN_ENCODED_RUN)
                    .into_iter()
                    .collect();
                assert_eq!(found, expected, "len {len} at {at}");
                // The same run at the very end of the text, without padding.
                let mut found = Vec::new();
                encoded_runs(&text[..at + len], |run| found.push(run));
                let expected: Vec<Range<usize>> = Some(at..at + len)
                    .filter(|_| len >= MIN_ENCODED_RUN)
                    .into_iter()
                    .collect();
                assert_eq!(found, expected, "len {len} at {at}, at the end");
            }
        }
    }
}
