//! The search for base64/base64url/hex runs in a scanned text: what the regex
//! `[A-Za-z0-9+/_-]{16,}=*` finds, found 64 bytes at a time.
//!
//! Each 64-byte block becomes a bit mask (bit `i` set when byte `i` is in the alphabet: AVX2
//! nibble lookups where the CPU has them, else SSE2 compares on x86_64, a table elsewhere), and
//! runs are read off the masks: a block entirely in a run costs one compare, and the runs of at
//! least 16 bits inside a block are found by shifting the mask against itself (`x & x >> 1`,
//! `>> 2`, `>> 4`, `>> 8`) rather than byte by byte. A byte-at-a-time search cost 0.25 ms of
//! every 1 MiB result (`docs/performance-log.md`).
//!
//! The same pass notes where the text holds a `%` or a `\` and whether it holds a byte outside
//! ASCII: every obfuscation and escape the scanner looks through begins at one, so text without
//! one needs no second pass to find out, and the escapes of text with them are found from the
//! masks rather than by another search of the whole text.

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

/// Where an obfuscation may begin in a text: each `%` and `\`, and whether any byte is
/// outside ASCII (where an invisible character's UTF-8 begins).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Leads {
    /// Each block holding a `%` or `\`: its offset and the mask of them (bit `i` for the byte
    /// at offset + `i`), in order.
    escapes: Vec<(usize, u64)>,
    /// Whether a byte is outside ASCII.
    pub(super) non_ascii: bool,
}

impl Leads {
    /// Whether the text holds any lead at all.
    pub(super) fn any(&self) -> bool {
        self.non_ascii || !self.escapes.is_empty()
    }

    /// The offsets of the text's `%` and `\` bytes, in order.
    pub(super) fn escapes(&self) -> impl Iterator<Item = usize> + '_ {
        self.escapes.iter().flat_map(|&(base, mask)| {
            let mut rest = mask;
            std::iter::from_fn(move || {
                let bit = rest.trailing_zeros();
                (rest != 0).then(|| {
                    rest &= rest - 1;
                    base + bit as usize
                })
            })
        })
    }
}

/// Calls `each` with the span of every run of at least [`MIN_ENCODED_RUN`] alphabet bytes in
/// `bytes`, with the `=` padding after it, in order. Returns where obfuscations may begin.
pub(super) fn encoded_runs(bytes: &[u8], each: impl FnMut(Range<usize>)) -> Leads {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { avx2::encoded_runs(bytes, each) };
    }
    runs_with(bytes, each, classify)
}

/// [`encoded_runs`] with the blocks classified by `classify`; inlined into each caller, so
/// that a caller compiled for AVX2 runs the whole pass with it.
#[inline(always)]
fn runs_with(
    bytes: &[u8],
    mut each: impl FnMut(Range<usize>),
    classify: impl Fn(&[u8; BLOCK]) -> Classes,
) -> Leads {
    let mut emit = |start: usize, end: usize| {
        if end - start >= MIN_ENCODED_RUN {
            let padding = bytes[end..].iter().take_while(|&&b| b == b'=').count();
            each(start..end + padding);
        }
    };
    // The start of a run reaching the end of the blocks read so far.
    let mut open: Option<usize> = None;
    let mut leads = Leads::default();
    let mut note = |classes: &Classes, base: usize| {
        leads.non_ascii |= classes.non_ascii;
        if classes.escapes != 0 {
            leads.escapes.push((base, classes.escapes));
        }
    };
    let (blocks, tail) = bytes.as_chunks::<BLOCK>();
    for (i, block) in blocks.iter().enumerate() {
        let classes = classify(block);
        note(&classes, i * BLOCK);
        block_runs(classes.alphabet, i * BLOCK, &mut open, &mut emit);
    }
    if !tail.is_empty() {
        // Padded with zero bytes, which are neither in the alphabet nor leads, so the block's
        // bits past the text stay clear: one block's compares instead of a byte at a time, the
        // whole of a short result's pass.
        let mut padded = [0u8; BLOCK];
        padded[..tail.len()].copy_from_slice(tail);
        let classes = classify(&padded);
        note(&classes, blocks.len() * BLOCK);
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
    /// Bit `i` set when byte `i` is `%` or `\`, where a percent-escape or a JSON string escape
    /// begins.
    escapes: u64,
    /// Whether a byte is outside ASCII, where an invisible character's UTF-8 begins.
    non_ascii: bool,
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
        escapes: bytes.iter().enumerate().fold(0, |mask, (i, &b)| {
            mask | (u64::from(b == b'%' || b == b'\\') << i)
        }),
        non_ascii: !bytes.is_ascii(),
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
    let mut escapes_mask = 0u64;
    // A lane's byte with its top bit set is outside ASCII.
    let mut top_bits = _mm_set1_epi8(0);
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
        let escapes = _mm_or_si128(equal(v, b'%'), equal(v, b'\\'));
        escapes_mask |= u64::from(_mm_movemask_epi8(escapes) as u16) << (16 * i);
        top_bits = _mm_or_si128(top_bits, v);
    }
    Classes {
        alphabet: mask,
        escapes: escapes_mask,
        non_ascii: _mm_movemask_epi8(top_bits) != 0,
    }
}

/// The pass on CPUs with AVX2, where a block is classified by two nibble lookups per 32 bytes
/// (`vpshufb`) instead of SSE2's range and equality compares per 16: about a quarter of the
/// instructions, and the classification was most of a long text's pass.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
        _mm256_srli_epi16,
    };
    use std::ops::Range;

    use super::{BLOCK, Classes};

    /// For each high nibble, the bit of the row of the alphabet it begins: `+ - /` (0x2_),
    /// digits (0x3_), `A-O` and `a-o` (0x4_, 0x6_: the same low nibbles), `P-Z _` (0x5_),
    /// `p-z` (0x7_). Bytes from 0x80 up have none. Twice, for each 128-bit lane.
    const HIGH: [u8; 32] = {
        let row = [0, 0, 1, 2, 4, 8, 4, 16, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut table = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            table[i] = row[i % 16];
            i += 1;
        }
        table
    };

    /// For each low nibble, the rows in which it completes a byte of the alphabet.
    const LOW: [u8; 32] = {
        let mut table = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            let low = (i % 16) as u8;
            let mut rows = 0;
            if matches!(low, 0xb | 0xd | 0xf) {
                rows |= 1;
            }
            if low <= 9 {
                rows |= 2;
            }
            if low >= 1 {
                rows |= 4;
            }
            if low <= 0xa || low == 0xf {
                rows |= 8;
            }
            if low <= 0xa {
                rows |= 16;
            }
            table[i] = rows;
            i += 1;
        }
        table
    };

    /// [`super::encoded_runs`], compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn encoded_runs(bytes: &[u8], each: impl FnMut(Range<usize>)) -> super::Leads {
        super::runs_with(bytes, each, |block| classify(block))
    }

    /// The classes of a block: a byte is in the alphabet when the rows of its high nibble and
    /// of its low nibble meet; an escape is `%` or `\`.
    #[target_feature(enable = "avx2")]
    pub(super) fn classify(block: &[u8; BLOCK]) -> Classes {
        // SAFETY: `HIGH` and `LOW` are 32 readable bytes; `_mm256_loadu_si256` takes any
        // alignment.
        let (high, low) = unsafe {
            (
                _mm256_loadu_si256(HIGH.as_ptr().cast()),
                _mm256_loadu_si256(LOW.as_ptr().cast()),
            )
        };
        let nibble = _mm256_set1_epi8(0x0f);
        let mut alphabet = 0u64;
        let mut escapes_mask = 0u64;
        let mut top_bits = 0u32;
        for (i, half) in block.chunks_exact(32).enumerate() {
            // SAFETY: `half` is 32 readable bytes; `_mm256_loadu_si256` takes any alignment.
            let v = unsafe { _mm256_loadu_si256(half.as_ptr().cast()) };
            let rows = _mm256_and_si256(
                _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble)),
                _mm256_shuffle_epi8(low, _mm256_and_si256(v, nibble)),
            );
            let outside = _mm256_movemask_epi8(_mm256_cmpeq_epi8(rows, _mm256_setzero_si256()));
            alphabet |= u64::from(!(outside as u32)) << (32 * i);
            let escapes = _mm256_or_si256(
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'%' as i8)),
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)),
            );
            escapes_mask |= u64::from(_mm256_movemask_epi8(escapes) as u32) << (32 * i);
            top_bits |= _mm256_movemask_epi8(v) as u32;
        }
        Classes {
            alphabet,
            escapes: escapes_mask,
            non_ascii: top_bits != 0,
        }
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

    /// A block classifier and its name.
    type Classifier = (&'static str, Box<dyn Fn(&[u8; BLOCK]) -> Classes>);

    /// A whole pass and its name.
    type Pass = (
        &'static str,
        Box<dyn Fn(&[u8], &mut dyn FnMut(Range<usize>)) -> Leads>,
    );

    /// Every block classifier this CPU can run: the baseline one always, AVX2's where the CPU
    /// has it (the machines the tests run on do).
    fn classifiers() -> Vec<Classifier> {
        let mut all: Vec<Classifier> = vec![("baseline", Box::new(classify))];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            all.push(("avx2", Box::new(|block| unsafe { avx2::classify(block) })));
        }
        all
    }

    /// Every whole pass this CPU can run, as [`classifiers`].
    fn passes() -> Vec<Pass> {
        let mut all: Vec<Pass> = vec![(
            "baseline",
            Box::new(|bytes, each| runs_with(bytes, each, classify)),
        )];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            all.push((
                "avx2",
                Box::new(|bytes, each| unsafe { avx2::encoded_runs(bytes, each) }),
            ));
        }
        all
    }

    /// The runs `pass` finds in `text`, and the leads it saw.
    fn runs_of(pass: &Pass, text: &[u8]) -> (Vec<Range<usize>>, Leads) {
        let mut found = Vec::new();
        let leads = (pass.1)(text, &mut |run| found.push(run));
        (found, leads)
    }

    #[test]
    fn the_block_classes_are_the_tables_for_every_byte_at_every_position() {
        for (name, classify) in classifiers() {
            for byte in 0..=255u8 {
                for at in 0..BLOCK {
                    let mut block = [b' '; BLOCK];
                    block[at] = byte;
                    let classes = classify(&block);
                    assert_eq!(classes, table_classes(&block), "{name}: {byte:#x} at {at}");
                    let escape = byte == b'%' || byte == b'\\';
                    assert_eq!(
                        classes.escapes,
                        u64::from(escape) << at,
                        "{name}: {byte:#x} at {at}"
                    );
                    assert_eq!(classes.non_ascii, byte >= 0x80, "{name}: {byte:#x} at {at}");
                }
            }
            // Blocks of mixed bytes, every value beside every other (a xorshift sequence).
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..4096 {
                let mut block = [0u8; BLOCK];
                for byte in &mut block {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    *byte = (state >> 24) as u8;
                }
                assert_eq!(classify(&block), table_classes(&block), "{name}: {block:?}");
            }
        }
    }

    #[test]
    fn leads_are_reported_at_every_position_and_only_where_they_are() {
        for pass in passes() {
            // Every length up to past two blocks, so the padded last block is checked at each
            // size.
            for len in 0..=130 {
                let plain = vec![b'a'; len];
                assert!(
                    !runs_of(&pass, &plain).1.any(),
                    "{}: no lead in {len} bytes",
                    pass.0
                );
                for at in 0..len {
                    for lead in [b'%', b'\\', 0x80, 0xff] {
                        let mut text = plain.clone();
                        text[at] = lead;
                        let leads = runs_of(&pass, &text).1;
                        let escapes: Vec<usize> = leads.escapes().collect();
                        let what = format!("{}: {lead:#x} at {at} of {len}", pass.0);
                        assert!(leads.any(), "{what}");
                        assert_eq!(leads.non_ascii, lead >= 0x80, "{what}");
                        let expected = if lead < 0x80 { vec![at] } else { vec![] };
                        assert_eq!(escapes, expected, "{what}");
                    }
                }
            }
            // Escapes dense across several blocks, every one reported, in order.
            let mut state = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..200 {
                let text: Vec<u8> = (0..300)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        b"a%\\ \xc3"[(state % 5) as usize]
                    })
                    .collect();
                let leads = runs_of(&pass, &text).1;
                let expected: Vec<usize> = (0..text.len())
                    .filter(|&i| text[i] == b'%' || text[i] == b'\\')
                    .collect();
                assert_eq!(leads.escapes().collect::<Vec<_>>(), expected, "{}", pass.0);
                assert_eq!(leads.non_ascii, !text.is_ascii(), "{}", pass.0);
            }
        }
    }

    #[test]
    fn runs_at_every_length_and_offset_across_block_edges() {
        // A run of `len` alphabet bytes at `at`, `=` after it, in spaces: every position relative
        // to the 64-byte blocks, runs just under, at and over the minimum, and runs spanning one
        // to three block edges.
        for pass in passes() {
            for len in [1, 15, 16, 17, 63, 64, 65, 128, 150] {
                for at in 0..130 {
                    let mut text = vec![b' '; at + len + 70];
                    text[at..at + len].fill(b'Q');
                    text[at + len] = b'=';
                    let expected: Vec<Range<usize>> = Some(at..at + len + 1)
                        .filter(|_| len >= MIN_ENCODED_RUN)
                        .into_iter()
                        .collect();
                    assert_eq!(
                        runs_of(&pass, &text).0,
                        expected,
                        "{}: len {len} at {at}",
                        pass.0
                    );
                    // The same run at the very end of the text, without padding.
                    let expected: Vec<Range<usize>> = Some(at..at + len)
                        .filter(|_| len >= MIN_ENCODED_RUN)
                        .into_iter()
                        .collect();
                    assert_eq!(
                        runs_of(&pass, &text[..at + len]).0,
                        expected,
                        "{}: len {len} at {at}, at the end",
                        pass.0
                    );
                }
            }
        }
    }
}
