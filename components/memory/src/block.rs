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
//!
//! Beside a group's record, its fold stores what it knew of the writes before the group
//! ([`encode_before`]): how many had landed, and which of the group's documents one of them
//! wrote. A search that finds the same count of earlier writes knows that the group's
//! overwrites of the other documents retire nothing before the group. It is a key of its
//! own, not part of the record, so that earlier versions still read the record.

use std::collections::HashSet;
use std::ops::{Range, RangeInclusive};

use crate::index::{BLOCK, BlockRecord, Entry, Postings, Terms, block_range};

/// Blocks per group.
pub const GROUP: u64 = 16;

/// The record format's version (its first byte).
const VERSION: u8 = 1;
/// The version of what a group's fold knew of the writes before it (its first byte).
const BEFORE_VERSION: u8 = 1;
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
        self.document(bytes, row.path)
    }

    /// How many distinct documents the span holds; [`Row::path`] is below it.
    pub fn documents(&self) -> usize {
        self.paths.len()
    }

    /// The path of document `index` (below [`Record::documents`]) in `bytes`, as stored.
    pub fn document<'b>(&self, bytes: &'b [u8], index: u32) -> &'b [u8] {
        // Both were checked when the record was decoded from these bytes.
        &bytes[self.paths[index as usize].clone()]
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

/// The distinct documents of `record` in order of first use, and each entry's index among them.
fn documents(record: &BlockRecord) -> (Vec<&str>, Vec<u32>) {
    let mut paths: Vec<&str> = Vec::new();
    let mut at = Vec::with_capacity(record.entries.len());
    for (_, entry) in &record.entries {
        at.push(match paths.iter().position(|p| *p == entry.path) {
            Some(at) => at as u32,
            None => {
                paths.push(&entry.path);
                paths.len() as u32 - 1
            }
        });
    }
    (paths, at)
}

/// The record of `block` holding `record`'s entries.
pub fn encode_record(record: &BlockRecord) -> Vec<u8> {
    let (paths, at) = documents(record);
    let rows = record
        .entries
        .iter()
        .zip(at)
        .map(|((seq, entry), at)| (*seq, entry.len, at, entry.replace));
    let mut out = vec![VERSION];
    put_u32(&mut out, paths.len());
    for path in paths {
        put_u32(&mut out, path.len());
        out.extend_from_slice(path.as_bytes());
    }
    put_u32(&mut out, record.entries.len());
    for (seq, len, path, replace) in rows {
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&path.to_le_bytes());
        out.push(u8::from(replace));
    }
    out
}

/// What a group's fold knew of the writes before the group: how many had landed, and the
/// documents they wrote.
pub struct Before<'a> {
    /// Writes landed before the span's first number.
    pub writes: u64,
    /// Their documents' paths, as stored.
    pub paths: &'a HashSet<&'a [u8]>,
}

/// What a group's fold knew of the writes before it, beside the record of `record`, with an
/// index of the record's documents: the version byte, the `u64` count of writes landed before
/// the group, the record's `u32` count of entries, `u64` sum of their numbers and `u32` count
/// of documents (so that it is never read beside another record); then one bit per document
/// of the record, in its order, set if one of those writes wrote it (least significant bit
/// first); then a Bloom filter of the documents' [`path_hash`]es ([`BLOOM_BITS`] bits a
/// document, rounded up to a power of two, [`BLOOM_PROBES`] probes); then the documents'
/// indices (`u16`) in the byte order of their paths. A search looks a document up there
/// rather than hashing every document of the group.
pub fn encode_before(record: &BlockRecord, before: &Before) -> Vec<u8> {
    let (paths, _) = documents(record);
    let mut out = vec![BEFORE_VERSION];
    out.extend_from_slice(&before.writes.to_le_bytes());
    put_u32(&mut out, record.entries.len());
    let sum = record
        .entries
        .iter()
        .fold(0u64, |sum, (seq, _)| sum.wrapping_add(*seq));
    out.extend_from_slice(&sum.to_le_bytes());
    put_u32(&mut out, paths.len());
    let mut bits = vec![0u8; paths.len().div_ceil(8)];
    for (index, path) in paths.iter().enumerate() {
        if before.paths.contains(path.as_bytes()) {
            bits[index / 8] |= 1 << (index % 8);
        }
    }
    out.extend_from_slice(&bits);
    let mut bloom = vec![0u8; bloom_bytes(paths.len())];
    for path in &paths {
        for bit in bloom_bits(path_hash(path.as_bytes()), bloom.len()) {
            bloom[bit / 8] |= 1 << (bit % 8);
        }
    }
    out.extend_from_slice(&bloom);
    let mut sorted: Vec<usize> = (0..paths.len()).collect();
    sorted.sort_unstable_by_key(|index| paths[*index].as_bytes());
    for index in sorted {
        // A group holds at most GROUP * BLOCK entries, so fewer documents than a u16 counts.
        out.extend_from_slice(&(index as u16).to_le_bytes());
    }
    out
}

/// Bits of a group's Bloom filter per document.
const BLOOM_BITS: usize = 16;
/// Bits set (and tested) per document.
const BLOOM_PROBES: u64 = 4;

/// Bytes of the Bloom filter of `documents` documents: a power of two.
fn bloom_bytes(documents: usize) -> usize {
    (documents * BLOOM_BITS).div_ceil(8).next_power_of_two()
}

/// The Bloom filter bits of a path whose [`path_hash`] is `hash`, in a filter of `bytes`
/// bytes (a power of two): double hashing on its two halves.
fn bloom_bits(hash: u64, bytes: usize) -> impl Iterator<Item = usize> {
    let mask = (bytes * 8 - 1) as u64;
    let (low, high) = (hash & 0xffff_ffff, (hash >> 32) | 1);
    (0..BLOOM_PROBES).map(move |i| (low.wrapping_add(i.wrapping_mul(high)) & mask) as usize)
}

/// A document path's hash as stored in Bloom filters: FNV-1a, then MurmurHash3's 64-bit
/// finaliser. Part of the stored format, so it never changes; a crafted collision only
/// costs a search a lookup.
pub fn path_hash(path: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in path {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

/// What a group's fold knew of the writes before it, as read beside its record, with the
/// index of the record's documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Earlier {
    /// How many had landed.
    pub writes: u64,
    /// Per document of the record, a bit: whether one of them wrote it.
    wrote: Vec<u8>,
    /// The Bloom filter of the documents' path hashes.
    bloom: Vec<u8>,
    /// The documents' indices in the byte order of their paths.
    sorted: Vec<u16>,
}

impl Earlier {
    /// Whether a write before the span wrote document `index` of its record.
    pub fn wrote(&self, index: u32) -> bool {
        let index = index as usize;
        self.wrote
            .get(index / 8)
            .is_none_or(|bits| bits & (1 << (index % 8)) != 0)
    }

    /// The index of the document at `path` (whose [`path_hash`] is `hash`) in `record` (held
    /// in `bytes`), the record this was read beside, if it holds that document.
    pub fn find(&self, record: &Record, bytes: &[u8], path: &[u8], hash: u64) -> Option<u32> {
        if !bloom_bits(hash, self.bloom.len())
            .all(|bit| self.bloom[bit / 8] & (1 << (bit % 8)) != 0)
        {
            return None;
        }
        let at = self
            .sorted
            .binary_search_by(|index| record.document(bytes, u32::from(*index)).cmp(path))
            .ok()?;
        Some(u32::from(self.sorted[at]))
    }
}

/// Reads what a group's fold knew of the writes before it; `None` if it was written beside
/// another version of `record` (two writers folded the group from different blocks).
pub fn decode_before(bytes: &[u8], record: &Record) -> Result<Option<Earlier>, CorruptBlock> {
    let mut r = Reader(bytes);
    let version = r.take(1)?[0];
    if version != BEFORE_VERSION {
        return Err(CorruptBlock::Version(version));
    }
    let writes = r.u64()?;
    let entries = r.u32()? as usize;
    let sum = r.u64()?;
    let documents = r.u32()? as usize;
    if documents > (GROUP * BLOCK) as usize {
        return Err(CorruptBlock::Entry(documents as u64));
    }
    let wrote = r.take(documents.div_ceil(8))?.to_vec();
    let bloom = r.take(bloom_bytes(documents))?.to_vec();
    let sorted = r
        .take(documents * 2)?
        .chunks_exact(2)
        .map(|index| u16::from_le_bytes([index[0], index[1]]))
        .collect::<Vec<u16>>();
    r.end()?;
    if let Some(index) = sorted
        .iter()
        .find(|index| usize::from(**index) >= documents)
    {
        return Err(CorruptBlock::Entry(u64::from(*index)));
    }
    let held = record
        .rows
        .iter()
        .fold(0u64, |sum, row| sum.wrapping_add(row.seq));
    if entries != record.rows.len() || sum != held || documents != record.documents() {
        return Ok(None);
    }
    Ok(Some(Earlier {
        writes,
        wrote,
        bloom,
        sorted,
    }))
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

    fn u64(&mut self) -> Result<u64, CorruptBlock> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(
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
    fn what_a_group_fold_knew_before_it_is_read_only_beside_its_record() {
        let entries: Vec<(u64, &str, bool, u32)> = (0..20)
            .map(|i| (i, ["a.md", "b.md", "c.md"][i as usize % 3], true, 1))
            .chain((20..30).map(|i| (i, "own", false, 1)))
            .collect();
        let rec = record(16, &entries);
        let earlier: HashSet<&[u8]> = [&b"b.md"[..], b"z.md"].into_iter().collect();
        let bytes = encode_before(
            &rec,
            &Before {
                writes: 1023,
                paths: &earlier,
            },
        );
        let bytes_of = |rec: &BlockRecord| encode_record(rec);
        let decoded = decode_record(Span::Group(1), &bytes_of(&rec)).expect("record");
        let before = decode_before(&bytes, &decoded)
            .expect("decodes")
            .expect("beside its record");
        assert_eq!(before.writes, 1023);
        let wrote: Vec<bool> = (0..4).map(|i| before.wrote(i)).collect();
        assert_eq!(wrote, [false, true, false, false]);
        for (index, path) in ["a.md", "b.md", "c.md", "own"].iter().enumerate() {
            let found = before.find(
                &decoded,
                &bytes_of(&rec),
                path.as_bytes(),
                path_hash(path.as_bytes()),
            );
            assert_eq!(found, Some(index as u32), "{path}");
        }
        for path in ["z.md", "", "a.m", "own2"] {
            let found = before.find(
                &decoded,
                &bytes_of(&rec),
                path.as_bytes(),
                path_hash(path.as_bytes()),
            );
            assert_eq!(found, None, "{path}");
        }
        // Stored hashes must never change.
        assert_eq!(path_hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(path_hash(b"MEMORY.md"), 0xad3e_ac94_6713_6200);
        for cut in 0..bytes.len() {
            assert!(
                decode_before(&bytes[..cut], &decoded).is_err(),
                "cut at {cut}"
            );
        }
        let mut version = bytes.clone();
        version[0] = 9;
        assert_eq!(
            decode_before(&version, &decoded),
            Err(CorruptBlock::Version(9))
        );
        // Beside a record of other entries (a late write folded in by another writer).
        let mut other = rec.clone();
        other.entries.pop();
        let other = decode_record(Span::Group(1), &encode_record(&other)).expect("record");
        assert_eq!(decode_before(&bytes, &other), Ok(None));
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
