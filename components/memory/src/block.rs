//! The binary form of a folded span (a block of [`BLOCK`] entries, or a group of [`GROUP`]
//! blocks): its record (the entries it holds, each with its document, kind and length) and its
//! per-term posting lists. A search reads every record, so the record is laid out to be read
//! without JSON and without an allocation per entry, and groups keep the number of keys a
//! search reads small: 10,000 documents are 9 group records and 13 block records.
//!
//! Record: a version byte, then the block's distinct document paths (`u32` count, then per
//! path a `u32` byte length and the UTF-8 bytes, in order of first use), then the entries
//! (`u32` count, then per entry its `u64` number, `u32` length in terms, `u32` path index and
//! a `u8` replace flag). Posting list: per entry holding the term, its `u16` offset in the
//! span and the `u32` count. Integers are little-endian. The encoding is a function of the
//! entries alone, so two writers folding the same block write the same bytes.

use std::ops::{Range, RangeInclusive};

use crate::index::{BLOCK, BlockRecord, Entry, Postings, Terms, block_range};

/// Blocks per group.
pub const GROUP: u64 = 16;

/// The record format's version (its first byte).
const VERSION: u8 = 1;
/// Bytes of one entry row.
const ROW: usize = 8 + 4 + 4 + 1;
/// Bytes of one posting.
const POSTING: usize = 2 + 4;

/// A run of entry numbers folded together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Block `n`: entries `n * BLOCK + 1 ..= (n + 1) * BLOCK`.
    Block(u64),
    /// Group `n`: blocks `n * GROUP .. (n + 1) * GROUP`.
    Group(u64),
}

impl Span {
    /// The entry numbers it covers.
    pub fn range(self) -> RangeInclusive<u64> {
        match self {
            Span::Block(n) => block_range(n),
            Span::Group(n) => {
                *block_range(n * GROUP).start()..=*block_range((n + 1) * GROUP - 1).end()
            }
        }
    }

    /// How many entry numbers it covers.
    pub fn len(self) -> u64 {
        match self {
            Span::Block(_) => BLOCK,
            Span::Group(_) => BLOCK * GROUP,
        }
    }

    /// The key of its record.
    pub fn record_key(self) -> String {
        match self {
            Span::Block(n) => format!("k:{n:010}"),
            Span::Group(n) => format!("K:{n:010}"),
        }
    }

    /// The key of `term`'s posting list in it.
    pub fn postings_key(self, term: &str) -> String {
        match self {
            Span::Block(n) => format!("y:{n:010}:{term}"),
            Span::Group(n) => format!("Y:{n:010}:{term}"),
        }
    }
}

/// One entry of a decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The entry's number.
    pub seq: u64,
    /// Its length in terms.
    pub len: u32,
    /// Index of its document in [`Record::paths`].
    pub path: u32,
    /// Whether it replaced its document.
    pub replace: bool,
}

/// A decoded record: its rows, and where in the stored bytes each document path is.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    /// The span's distinct documents, as byte ranges of the record.
    paths: Vec<Range<usize>>,
    /// Its entries, in order.
    pub rows: Vec<Row>,
}

impl Record {
    /// The path of `row` in `bytes` (the record this was decoded from), as stored: UTF-8 is
    /// checked where a path is shown, not for each of the thousands a search only groups by.
    pub fn path<'b>(&self, bytes: &'b [u8], row: &Row) -> &'b [u8] {
        // Both were checked when the record was decoded from these bytes.
        &bytes[self.paths[row.path as usize].clone()]
    }
}

/// Why stored bytes are not a block record or posting list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorruptBlock {
    /// The bytes end inside a field.
    #[error("it ends early")]
    Truncated,
    /// A version this component does not read.
    #[error("format version {0} is unknown")]
    Version(u8),
    /// An entry outside the block, out of order, or naming a missing path.
    #[error("entry {0} does not belong where it is")]
    Entry(u64),
    /// Bytes after the last field.
    #[error("{0} bytes follow the last field")]
    Trailing(usize),
    /// A document path that is not UTF-8.
    #[error("a document path is not UTF-8")]
    Path,
    /// A replace flag other than 0 or 1.
    #[error("a replace flag is neither 0 nor 1")]
    Flag,
}

/// The record of `block` holding `record`'s entries.
pub fn encode_record(record: &BlockRecord) -> Vec<u8> {
    let mut paths: Vec<&str> = Vec::new();
    let mut rows = Vec::with_capacity(record.entries.len());
    for (seq, entry) in &record.entries {
        let at = match paths.iter().position(|p| *p == entry.path) {
            Some(at) => at,
            None => {
                paths.push(&entry.path);
                paths.len() - 1
            }
        };
        rows.push((*seq, entry.len, at as u32, entry.replace));
    }
    let mut out = vec![VERSION];
    put_u32(&mut out, paths.len());
    for path in paths {
        put_u32(&mut out, path.len());
        out.extend_from_slice(path.as_bytes());
    }
    put_u32(&mut out, rows.len());
    for (seq, len, path, replace) in rows {
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&path.to_le_bytes());
        out.push(u8::from(replace));
    }
    out
}

/// Decodes the record of `span`, checking that its entries are the span's, in order.
pub fn decode_record(span: Span, bytes: &[u8]) -> Result<Record, CorruptBlock> {
    let mut r = Reader(bytes);
    let version = r.take(1)?[0];
    if version != VERSION {
        return Err(CorruptBlock::Version(version));
    }
    let n = r.u32()? as usize;
    let mut paths = Vec::with_capacity(n.min(span.len() as usize));
    for _ in 0..n {
        let len = r.u32()? as usize;
        let start = bytes.len() - r.0.len();
        r.take(len)?;
        paths.push(start..start + len);
    }
    let n = r.u32()? as usize;
    let bytes = r.take(n.checked_mul(ROW).ok_or(CorruptBlock::Truncated)?)?;
    let range = span.range();
    let mut rows = Vec::with_capacity(n.min(span.len() as usize));
    let mut last = 0;
    for row in bytes.chunks_exact(ROW) {
        let word = |at: usize| [row[at], row[at + 1], row[at + 2], row[at + 3]];
        let seq =
            u64::from(u32::from_le_bytes(word(0))) | u64::from(u32::from_le_bytes(word(4))) << 32;
        let len = u32::from_le_bytes(word(8));
        let path = u32::from_le_bytes(word(12));
        if !range.contains(&seq) || seq <= last || path as usize >= paths.len() || row[16] > 1 {
            return Err(CorruptBlock::Entry(seq));
        }
        last = seq;
        rows.push(Row {
            seq,
            len,
            path,
            replace: row[16] == 1,
        });
    }
    r.end()?;
    Ok(Record { paths, rows })
}

/// The posting list of one term in `span`.
pub fn encode_postings(span: Span, list: &Postings) -> Vec<u8> {
    let first = *span.range().start();
    let mut out = Vec::with_capacity(list.len() * POSTING);
    for (seq, count) in list {
        // Every posting of a span is one of its entries: the offset is below its length, which
        // fits a u16.
        out.extend_from_slice(&((seq - first) as u16).to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
    }
    out
}

/// Calls `each(offset, count)` for every posting of one term in `span`; offsets are below
/// its length.
pub fn decode_postings(
    span: Span,
    bytes: &[u8],
    mut each: impl FnMut(usize, u32),
) -> Result<(), CorruptBlock> {
    if !bytes.len().is_multiple_of(POSTING) {
        return Err(CorruptBlock::Truncated);
    }
    for posting in bytes.chunks_exact(POSTING) {
        let offset = u16::from_le_bytes([posting[0], posting[1]]);
        if u64::from(offset) >= span.len() {
            return Err(CorruptBlock::Entry(u64::from(offset)));
        }
        let count = u32::from_le_bytes(
            posting[2..]
                .try_into()
                .map_err(|_| CorruptBlock::Truncated)?,
        );
        each(usize::from(offset), count);
    }
    Ok(())
}

/// The first byte of term counts in binary form, as writes before the entry was carried in
/// them stored them (a JSON object, as still earlier versions stored them, starts with `{`).
const TERMS_VERSION: u8 = 1;
/// The first byte of term counts that carry their write's entry too.
const TERMS_WITH_ENTRY: u8 = 2;

/// One write's term counts in binary form, with its entry: the version byte, the entry (a
/// `u16` path byte length, the UTF-8 path, a `u8` replace flag and a `u32` length in terms),
/// then a `u32` count and per term a `u16` byte length, the UTF-8 bytes and a `u32` count. A
/// search reads these for the writes not yet folded, so it reads one key per write, without
/// JSON.
pub fn encode_terms(entry: &Entry, terms: &Terms) -> Vec<u8> {
    let mut out = vec![TERMS_WITH_ENTRY];
    // Paths are at most 512 bytes (`target::MAX_PATH_BYTES`): the length fits a u16.
    out.extend_from_slice(&(entry.path.len() as u16).to_le_bytes());
    out.extend_from_slice(entry.path.as_bytes());
    out.push(u8::from(entry.replace));
    out.extend_from_slice(&entry.len.to_le_bytes());
    put_terms(&mut out, terms);
    out
}

/// The term counts' part of both binary forms: a `u32` count, then per term a `u16` byte
/// length, the UTF-8 bytes and a `u32` count.
fn put_terms(out: &mut Vec<u8>, terms: &Terms) {
    put_u32(out, terms.len());
    for (term, count) in terms {
        // Terms are cut to 48 characters when counted: their length fits a u16.
        out.extend_from_slice(&(term.len() as u16).to_le_bytes());
        out.extend_from_slice(term.as_bytes());
        out.extend_from_slice(&count.to_le_bytes());
    }
}

/// Whether stored term counts are in binary form (else JSON).
pub fn is_binary_terms(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(&(TERMS_VERSION | TERMS_WITH_ENTRY)))
}

/// The entry carried in binary term counts, if they carry it (`None` for the form before).
pub fn terms_entry(bytes: &[u8]) -> Result<Option<Entry>, CorruptBlock> {
    let mut r = Reader(bytes);
    match r.take(1)?[0] {
        TERMS_WITH_ENTRY => r.entry().map(Some),
        TERMS_VERSION => Ok(None),
        version => Err(CorruptBlock::Version(version)),
    }
}

/// Calls `each(term, count)` for every term of term counts in binary form.
pub fn each_term(bytes: &[u8], mut each: impl FnMut(&[u8], u32)) -> Result<(), CorruptBlock> {
    let mut r = Reader(bytes);
    match r.take(1)?[0] {
        TERMS_WITH_ENTRY => {
            r.entry()?;
        }
        TERMS_VERSION => {}
        version => return Err(CorruptBlock::Version(version)),
    }
    for _ in 0..r.u32()? {
        let len = r.take(2)?;
        let term = r.take(usize::from(u16::from_le_bytes([len[0], len[1]])))?;
        let count = r.u32()?;
        each(term, count);
    }
    r.end()
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    // A block holds at most BLOCK entries and paths of bounded length: always fits.
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CorruptBlock> {
        if self.0.len() < n {
            return Err(CorruptBlock::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, CorruptBlock> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(
            bytes.try_into().map_err(|_| CorruptBlock::Truncated)?,
        ))
    }

    /// An entry as term counts carry it.
    fn entry(&mut self) -> Result<Entry, CorruptBlock> {
        let len = self.take(2)?;
        let path = self.take(usize::from(u16::from_le_bytes([len[0], len[1]])))?;
        let path = std::str::from_utf8(path)
            .map_err(|_| CorruptBlock::Path)?
            .to_owned();
        let replace = match self.take(1)?[0] {
            0 => false,
            1 => true,
            _ => return Err(CorruptBlock::Flag),
        };
        let len = self.u32()?;
        Ok(Entry { path, replace, len })
    }

    fn end(&self) -> Result<(), CorruptBlock> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(CorruptBlock::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Entry;

    fn record(block: u64, docs: &[(u64, &str, bool, u32)]) -> BlockRecord {
        let first = *block_range(block).start();
        BlockRecord {
            entries: docs
                .iter()
                .map(|(off, path, replace, len)| {
                    (
                        first + off,
                        Entry {
                            path: (*path).to_owned(),
                            replace: *replace,
                            len: *len,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn a_record_round_trips_with_shared_paths() {
        let rec = record(
            3,
            &[
                (0, "a.md", true, 4),
                (1, "dir/ü.md", false, 0),
                (5, "a.md", false, 9),
                (63, "b", true, u32::MAX),
            ],
        );
        let bytes = encode_record(&rec);
        assert_eq!(bytes, encode_record(&rec), "deterministic");
        let decoded = decode_record(Span::Block(3), &bytes).expect("decodes");
        let paths: Vec<&str> = decoded
            .paths
            .iter()
            .map(|p| std::str::from_utf8(&bytes[p.clone()]).expect("UTF-8"))
            .collect();
        assert_eq!(paths, ["a.md", "dir/ü.md", "b"]);
        let back: Vec<(u64, Entry)> = decoded
            .rows
            .iter()
            .map(|r| {
                (
                    r.seq,
                    Entry {
                        path: String::from_utf8(decoded.path(&bytes, r).to_vec()).expect("UTF-8"),
                        replace: r.replace,
                        len: r.len,
                    },
                )
            })
            .collect();
        assert_eq!(back, rec.entries);
        let empty = encode_record(&BlockRecord::default());
        assert_eq!(
            decode_record(Span::Block(0), &empty).expect("empty").rows,
            []
        );
        let group = record(16, &[(0, "g", false, 1)]);
        let bytes = encode_record(&group);
        assert!(decode_record(Span::Group(1), &bytes).is_ok());
        assert!(decode_record(Span::Group(0), &bytes).is_err());
    }

    #[test]
    fn corrupt_records_are_refused() {
        let bytes = encode_record(&record(1, &[(0, "a", false, 1), (1, "b", false, 2)]));
        for cut in 0..bytes.len() {
            assert!(
                decode_record(Span::Block(1), &bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            decode_record(Span::Block(1), &long),
            Err(CorruptBlock::Trailing(1))
        );
        assert!(matches!(
            decode_record(Span::Block(2), &bytes),
            Err(CorruptBlock::Entry(_))
        ));
        let mut version = bytes.clone();
        version[0] = 9;
        assert_eq!(
            decode_record(Span::Block(1), &version),
            Err(CorruptBlock::Version(9))
        );
        let out_of_order = record(1, &[(1, "a", false, 1), (0, "b", false, 2)]);
        assert!(decode_record(Span::Block(1), &encode_record(&out_of_order)).is_err());
    }

    #[test]
    fn postings_round_trip_as_offsets() {
        for span in [Span::Block(2), Span::Group(3)] {
            let first = *span.range().start();
            let last = *span.range().end();
            let list: Postings = vec![(first, 1), (first + 7, 3), (last, u32::MAX)];
            let bytes = encode_postings(span, &list);
            let mut back = Vec::new();
            decode_postings(span, &bytes, |offset, count| {
                back.push((first + offset as u64, count))
            })
            .expect("decodes");
            assert_eq!(back, list);
            assert_eq!(
                decode_postings(span, &bytes[..5], |_, _| {}),
                Err(CorruptBlock::Truncated)
            );
        }
        let beyond = (BLOCK as u16).to_le_bytes();
        assert!(
            decode_postings(
                Span::Block(0),
                &[beyond[0], beyond[1], 1, 0, 0, 0],
                |_, _| {}
            )
            .is_err()
        );
        assert!(
            decode_postings(
                Span::Group(0),
                &[beyond[0], beyond[1], 1, 0, 0, 0],
                |_, _| {}
            )
            .is_ok()
        );
    }

    /// Term counts in the form before they carried their entry.
    fn without_entry(terms: &Terms) -> Vec<u8> {
        let mut out = vec![TERMS_VERSION];
        put_terms(&mut out, terms);
        out
    }

    fn read_terms(bytes: &[u8]) -> Terms {
        let mut back = Terms::new();
        each_term(bytes, |t, c| {
            back.insert(String::from_utf8(t.to_vec()).expect("UTF-8"), c);
        })
        .expect("decodes");
        back
    }

    #[test]
    fn term_counts_round_trip_with_their_entry_and_are_told_from_json() {
        let terms: Terms = [
            ("fox".to_owned(), 2),
            ("ünï".to_owned(), 1),
            ("x".repeat(48), 7),
        ]
        .into_iter()
        .collect();
        let entry = Entry {
            path: "notes/ü/a.md".to_owned(),
            replace: true,
            len: 10,
        };
        let bytes = encode_terms(&entry, &terms);
        assert!(is_binary_terms(&bytes));
        assert!(!is_binary_terms(br#"{"fox":2}"#));
        assert_eq!(read_terms(&bytes), terms);
        assert_eq!(terms_entry(&bytes), Ok(Some(entry.clone())));
        for cut in 0..bytes.len() {
            assert!(each_term(&bytes[..cut], |_, _| {}).is_err(), "cut at {cut}");
        }
        let none = encode_terms(&entry, &Terms::new());
        assert!(each_term(&none, |_, _| panic!("no terms")).is_ok());
        assert_eq!(terms_entry(&none), Ok(Some(entry)));

        // The form before: the same counts, no entry.
        let before = without_entry(&terms);
        assert!(is_binary_terms(&before));
        assert_eq!(read_terms(&before), terms);
        assert_eq!(terms_entry(&before), Ok(None));
    }

    #[test]
    fn a_carried_entry_that_is_corrupt_is_refused() {
        let entry = Entry {
            path: "a.md".to_owned(),
            replace: false,
            len: 1,
        };
        let bytes = encode_terms(&entry, &Terms::new());
        // Version, path length (2), "a.md" (4), then the flag.
        let mut flag = bytes.clone();
        flag[7] = 2;
        assert_eq!(terms_entry(&flag), Err(CorruptBlock::Flag));
        assert_eq!(each_term(&flag, |_, _| {}), Err(CorruptBlock::Flag));
        let mut path = bytes.clone();
        path[3] = 0xff;
        assert_eq!(terms_entry(&path), Err(CorruptBlock::Path));
        let mut version = bytes;
        version[0] = 9;
        assert_eq!(terms_entry(&version), Err(CorruptBlock::Version(9)));
    }

    #[test]
    fn spans_cover_their_blocks() {
        assert_eq!(Span::Block(1).range(), BLOCK + 1..=2 * BLOCK);
        assert_eq!(Span::Group(0).range(), 1..=GROUP * BLOCK);
        assert_eq!(
            Span::Group(2).range(),
            2 * GROUP * BLOCK + 1..=3 * GROUP * BLOCK
        );
        assert_eq!(
            Span::Group(2).len() as usize,
            Span::Group(2).range().count()
        );
        assert_ne!(Span::Block(1).record_key(), Span::Group(1).record_key());
        assert_ne!(
            Span::Block(1).postings_key("t"),
            Span::Group(1).postings_key("t")
        );
    }
}
