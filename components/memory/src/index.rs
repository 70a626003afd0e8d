//! The search index and BM25 ranking.
//!
//! The index is log-structured, because `wasi:keyvalue` has no compare-and-swap and a posting
//! list shared by concurrent writers would lose updates. Each write stores its own entry (path,
//! length) and term counts under keys no other write uses. Every [`BLOCK`] writes, one writer
//! inverts a finished block of entries into per-term posting lists (`term → [(entry, count)]`)
//! plus a block record of the entries it holds. Those keys are derived from immutable entries
//! only, so two writers folding the same block write the same bytes. A search reads the block
//! records, the posting lists of its query terms, and the few entries not yet folded.
//!
//! The unit ranked is an entry (one write or append); results are grouped by document, each
//! scored by its best live entry. An entry is live unless a later overwrite of its document
//! superseded it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};

use crate::block;
use crate::store::SpanRows;

/// Entries per index block.
pub const BLOCK: u64 = 64;
/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalisation.
const B: f64 = 0.75;
/// Terms longer than this are cut (they are usually encoded blobs, not words).
const MAX_TERM_CHARS: usize = 48;
/// Characters of context on each side of a snippet's first hit.
const SNIPPET_CONTEXT: usize = 80;

/// What one write stored besides its text and term counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The document written.
    #[serde(rename = "p")]
    pub path: String,
    /// Whether it replaced the document (rather than appending to it).
    #[serde(rename = "r")]
    pub replace: bool,
    /// Number of terms in the entry.
    #[serde(rename = "l")]
    pub len: u32,
}

/// Count of each term in one entry.
pub type Terms = BTreeMap<String, u32>;

/// The entries and term counts of one block, `(entry number, count)` per term.
pub type Postings = Vec<(u64, u32)>;

/// The record of a folded block: the entries it holds (a number handed out whose write had
/// not landed when the block was folded is absent and read on its own).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BlockRecord {
    /// Entry numbers and entries, in order.
    #[serde(rename = "e")]
    pub entries: Vec<(u64, Entry)>,
}

impl Entry {
    /// The entry and term counts of `text` written to `path`.
    pub fn of(path: &str, replace: bool, text: &str) -> (Self, Terms) {
        let mut terms = Terms::new();
        let mut len = 0u32;
        for term in tokens(text) {
            *terms.entry(term).or_insert(0) += 1;
            len = len.saturating_add(1);
        }
        let entry = Self {
            path: path.to_owned(),
            replace,
            len,
        };
        (entry, terms)
    }
}

/// The block `n` holds entries `n * BLOCK + 1 ..= (n + 1) * BLOCK`.
pub fn block_range(n: u64) -> std::ops::RangeInclusive<u64> {
    n * BLOCK + 1..=(n + 1) * BLOCK
}

/// Inverts a block's entries into its record and per-term posting lists.
pub fn invert(entries: Vec<(u64, Entry, Terms)>) -> (BlockRecord, BTreeMap<String, Postings>) {
    let mut postings: BTreeMap<String, Postings> = BTreeMap::new();
    let mut record = BlockRecord::default();
    for (seq, entry, terms) in entries {
        for (term, count) in terms {
            postings.entry(term).or_default().push((seq, count));
        }
        record.entries.push((seq, entry));
    }
    (record, postings)
}

/// Lower-cased alphanumeric runs of at least two characters.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().nth(1).is_some())
        .map(|word| {
            word.chars()
                .take(MAX_TERM_CHARS)
                .flat_map(char::to_lowercase)
                .collect()
        })
}

/// No document id yet.
const NO_DOC: u32 = u32::MAX;

/// What a search keeps of one matching entry (16 bytes): its counts of the query's terms are
/// at its index times the number of terms in [`Corpus`]'s flat table, so that ranking costs no
/// allocation per entry.
struct Scored {
    seq: u64,
    doc: u32,
    len: u32,
}

/// The entries of a search, gathered one at a time newest first, then ranked. Document paths
/// are borrowed from the fetched index.
///
/// Newest first, an entry's liveness is known as it arrives (every later overwrite of its
/// document came before it), so the corpus keeps the statistics of the live entries and only
/// the few that hold a query term, not every entry.
pub struct Corpus<'a> {
    query: Vec<String>,
    docs: Vec<&'a [u8]>,
    /// Document ids by path, hashed through `docs`: a table of `u32`s, not of paths.
    ids: hashbrown::HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// Per document, the number of its newest overwrite so far (0: none); an entry before it
    /// is retired.
    live_from: Vec<u64>,
    /// The documents with an overwrite so far, with their paths' [`block::path_hash`]: while
    /// none has, a span's documents need not be looked up.
    overwritten: Vec<(u32, u64)>,
    /// Per document of the span being added: its id (`NO_DOC` until looked up) and the
    /// number of its newest overwrite so far; kept to reuse their allocations.
    span_ids: Vec<u32>,
    span_from: Vec<u64>,
    /// The number of the last entry added, which the next must be below.
    last: Option<u64>,
    /// Live entries so far, their total length, and each term's document frequency.
    live: u64,
    total_len: u64,
    df: Vec<u64>,
    /// The live entries holding a query term.
    matching: Vec<Scored>,
    tfs: Vec<u32>,
}

/// An entry added out of order: the corpus needs entries newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory entry {seq} was read after entry {after}: entries must come newest first")]
pub struct OutOfOrder {
    /// The entry added.
    pub seq: u64,
    /// The entry added before it.
    pub after: u64,
}

/// One ranked document.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<'a> {
    /// The document's path, as stored.
    pub path: &'a [u8],
    /// Its best entry's BM25 score.
    pub score: f64,
    /// That entry's sequence number.
    pub seq: u64,
}

impl<'a> Corpus<'a> {
    /// An empty corpus for `query`.
    pub fn new(query: &str) -> Self {
        let mut seen = HashSet::new();
        let query: Vec<String> = tokens(query).filter(|t| seen.insert(t.clone())).collect();
        Self {
            df: vec![0; query.len()],
            query,
            docs: Vec::new(),
            ids: hashbrown::HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            live_from: Vec::new(),
            overwritten: Vec::new(),
            span_ids: Vec::new(),
            span_from: Vec::new(),
            last: None,
            live: 0,
            total_len: 0,
            matching: Vec::new(),
            tfs: Vec::new(),
        }
    }

    /// Makes room for `entries` more entries.
    pub fn reserve(&mut self, entries: usize) {
        let hasher = &self.hasher;
        let docs = &self.docs;
        self.ids
            .reserve(entries, |id| hasher.hash_one(docs[*id as usize]));
        self.docs.reserve(entries);
        self.live_from.reserve(entries);
    }

    /// The query's distinct terms.
    pub fn terms(&self) -> &[String] {
        &self.query
    }

    /// Adds entry `seq` of `path` with `tf`, the counts of [`Corpus::terms`] in it. Entries
    /// come newest first: `seq` is below every number added before.
    pub fn add(
        &mut self,
        seq: u64,
        path: &'a [u8],
        replace: bool,
        len: u32,
        tf: &[u32],
    ) -> Result<(), OutOfOrder> {
        self.after(seq, seq)?;
        let doc = self.doc(path);
        let from = &mut self.live_from[doc as usize];
        if seq < *from {
            return Ok(());
        }
        if replace {
            // Every entry added before was newer: this is the document's newest overwrite.
            *from = seq;
            self.overwritten.push((doc, block::path_hash(path)));
        }
        self.count(seq, doc, len, tf);
        Ok(())
    }

    /// Adds the entries of a folded span, no other entry falling among them: as
    /// [`Corpus::add`] for each, newest first, but looking each document of the span up once,
    /// and only where it matters (it holds a match, or an overwrite older entries must see).
    pub fn add_span(&mut self, span: &SpanRows<'a, '_>) -> Result<(), OutOfOrder> {
        let rows = span.rows();
        let (Some(oldest), Some(newest)) = (rows.first(), rows.last()) else {
            return Ok(());
        };
        self.after(newest.seq, oldest.seq)?;
        let documents = span.documents();
        let mut ids = std::mem::take(&mut self.span_ids);
        let mut from = std::mem::take(&mut self.span_from);
        ids.clear();
        ids.resize(documents, NO_DOC);
        from.clear();
        from.resize(documents, 0);
        // A newer overwrite of one of the span's documents retires all its entries here. A
        // group's index of its documents is asked for each document overwritten so far, while
        // they are fewer than a few times its own; else each document of the span is looked up.
        match span.wrote_before() {
            _ if self.overwritten.is_empty() => {}
            Some(before) if self.overwritten.len() < 4 * documents => {
                for (doc, hash) in &self.overwritten {
                    let path = self.docs[*doc as usize];
                    if let Some(index) = span.find(before, path, *hash) {
                        ids[index as usize] = *doc;
                        from[index as usize] = self.live_from[*doc as usize];
                    }
                }
            }
            _ => {
                for (index, (id, from)) in ids.iter_mut().zip(&mut from).enumerate() {
                    if let Some(doc) = self.find(span.document(index as u32)) {
                        *id = doc;
                        *from = self.live_from[doc as usize];
                    }
                }
            }
        }
        for row in rows.iter().rev() {
            let at = row.path as usize;
            if row.seq < from[at] {
                continue;
            }
            if row.replace {
                from[at] = row.seq;
            }
            let tf = span.tf(row);
            if tf.iter().any(|tf| *tf > 0) {
                if ids[at] == NO_DOC {
                    ids[at] = self.doc(span.document(row.path));
                }
                self.count(row.seq, ids[at], row.len, tf);
            } else {
                self.live += 1;
                self.total_len += u64::from(row.len);
            }
        }
        // The span's overwrites, for the older entries still to come: none of a document that
        // no write before the span wrote.
        let wrote = span.wrote_before();
        for (index, (id, from)) in ids.iter().zip(&from).enumerate() {
            if *from == 0 || wrote.is_some_and(|wrote| !wrote.wrote(index as u32)) {
                continue;
            }
            let path = span.document(index as u32);
            let doc = match *id {
                NO_DOC => self.doc(path),
                doc => doc,
            };
            let live_from = &mut self.live_from[doc as usize];
            if *live_from == 0 {
                *live_from = *from;
                self.overwritten.push((doc, block::path_hash(path)));
            }
        }
        self.span_ids = ids;
        self.span_from = from;
        Ok(())
    }

    /// Checks that entries `newest` down to `oldest` come after every entry added before.
    fn after(&mut self, newest: u64, oldest: u64) -> Result<(), OutOfOrder> {
        if let Some(after) = self.last.filter(|after| newest >= *after) {
            return Err(OutOfOrder { seq: newest, after });
        }
        self.last = Some(oldest);
        Ok(())
    }

    /// The id of the document at `path`, given one if it has none yet.
    fn doc(&mut self, path: &'a [u8]) -> u32 {
        let (hasher, docs) = (&self.hasher, &self.docs);
        match self.ids.entry(
            hasher.hash_one(path),
            |id| same(docs[*id as usize], path),
            |id| hasher.hash_one(docs[*id as usize]),
        ) {
            hashbrown::hash_table::Entry::Occupied(found) => *found.get(),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let id = docs.len() as u32;
                slot.insert(id);
                self.docs.push(path);
                self.live_from.push(0);
                id
            }
        }
    }

    /// The id of the document at `path`, if it has one.
    fn find(&self, path: &[u8]) -> Option<u32> {
        let docs = &self.docs;
        self.ids
            .find(self.hasher.hash_one(path), |id| {
                same(docs[*id as usize], path)
            })
            .copied()
    }

    /// Counts live entry `seq` of `doc`.
    fn count(&mut self, seq: u64, doc: u32, len: u32, tf: &[u32]) {
        self.live += 1;
        self.total_len += u64::from(len);
        let mut any = false;
        for (df, tf) in self.df.iter_mut().zip(tf) {
            if *tf > 0 {
                *df += 1;
                any = true;
            }
        }
        if any {
            self.matching.push(Scored { seq, doc, len });
            self.tfs.extend_from_slice(tf);
        }
    }

    fn tf(&self, at: usize) -> &[u32] {
        let n = self.query.len();
        &self.tfs[at * n..(at + 1) * n]
    }

    /// The `limit` best documents by BM25 over live entries, best first (ties by path), and
    /// how many documents matched at all.
    pub fn rank(&self, limit: usize) -> (Vec<Hit<'a>>, usize) {
        if self.live == 0 || self.query.is_empty() {
            return (Vec::new(), 0);
        }
        // Lengths are integers: their sum is exact in any order.
        let n = self.live as f64;
        let avg_len = self.total_len as f64 / n;
        let idf: Vec<f64> = self
            .df
            .iter()
            .map(|df| {
                let df = *df as f64;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let mut best: HashMap<u32, (f64, u64), foldhash::fast::RandomState> = HashMap::default();
        best.reserve(self.matching.len());
        for (at, e) in self.matching.iter().enumerate() {
            let tf = self.tf(at);
            let norm = K1 * (1.0 - B + B * f64::from(e.len) / avg_len.max(1.0));
            let score: f64 = tf
                .iter()
                .zip(&idf)
                .filter(|(tf, _)| **tf > 0)
                .map(|(tf, idf)| {
                    let tf = f64::from(*tf);
                    idf * tf * (K1 + 1.0) / (tf + norm)
                })
                .sum();
            if score <= 0.0 {
                continue;
            }
            // A tie goes to the earlier entry.
            let slot = best.entry(e.doc).or_insert((score, e.seq));
            if score > slot.0 || (score == slot.0 && e.seq < slot.1) {
                *slot = (score, e.seq);
            }
        }
        let matched = best.len();
        let mut hits: Vec<Hit> = best
            .into_iter()
            .map(|(doc, (score, seq))| Hit {
                path: self.docs[doc as usize],
                score,
                seq,
            })
            .collect();
        // Paths are distinct, so this is a total order: the best `limit` are selected, then
        // only they are sorted.
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(b.path));
        if let Some(last) = limit.checked_sub(1).filter(|_| hits.len() > limit) {
            hits.select_nth_unstable_by(last, order);
        }
        hits.truncate(limit);
        hits.sort_unstable_by(order);
        (hits, matched)
    }
}

/// Whether two short byte strings are equal, compared in place: in wasm, `==` on slices calls
/// the C library's `memcmp`, a byte loop behind a call, once per term or path compared.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Which entries of one document are live: those from its last overwrite on.
pub fn live_entries(entries: &[(u64, bool)]) -> Vec<u64> {
    let from = entries
        .iter()
        .filter(|(_, replace)| *replace)
        .map(|(seq, _)| *seq)
        .max()
        .unwrap_or(0);
    entries
        .iter()
        .map(|(seq, _)| *seq)
        .filter(|seq| *seq >= from)
        .collect()
}

/// A short passage of `text` around the first occurrence of a query term.
pub fn snippet(text: &str, query: &str) -> String {
    let lower = text.to_lowercase();
    // Lower-casing can change byte lengths; only use a hit position that maps back cleanly.
    let hit = if lower.len() == text.len() {
        tokens(query).filter_map(|t| lower.find(&t)).min()
    } else {
        None
    }
    .unwrap_or(0);
    let start = floor_char(text, hit.saturating_sub(SNIPPET_CONTEXT));
    let end = floor_char(text, (hit + SNIPPET_CONTEXT * 2).min(text.len()));
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(text[start..end].trim());
    if end < text.len() {
        out.push('…');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank<'a>(
        docs: &[(&'a str, bool, &str)],
        query: &str,
        limit: usize,
    ) -> (Vec<Hit<'a>>, usize) {
        let mut corpus = Corpus::new(query);
        for (i, (path, replace, text)) in docs.iter().enumerate().rev() {
            let (entry, terms) = Entry::of(path, *replace, text);
            let tf: Vec<u32> = corpus
                .terms()
                .iter()
                .map(|t| terms.get(t).copied().unwrap_or(0))
                .collect();
            corpus
                .add(i as u64 + 1, path.as_bytes(), entry.replace, entry.len, &tf)
                .expect("newest first");
        }
        corpus.rank(limit)
    }

    #[test]
    fn tokens_lowercase_and_drop_single_characters() {
        let t: Vec<String> = tokens("Hello, WORLD! a b2 ünïcode x").collect();
        assert_eq!(t, ["hello", "world", "b2", "ünïcode"]);
    }

    #[test]
    fn bm25_prefers_rarer_terms_and_shorter_documents() {
        let docs = [
            ("a.md", true, "rust rust rust compiler"),
            (
                "b.md",
                true,
                "rust is a language with a long long long long description",
            ),
            ("c.md", true, "python interpreter"),
            ("d.md", true, "the borrow checker in rust"),
        ];
        let (hits, matched) = rank(&docs, "rust borrow", 10);
        assert_eq!(matched, 3);
        let order: Vec<&[u8]> = hits.iter().map(|h| h.path).collect();
        assert_eq!(order, [b"d.md", b"a.md", b"b.md"]);
        assert!(hits[0].score > hits[1].score && hits[1].score > hits[2].score);
    }

    #[test]
    fn overwritten_entries_are_not_found() {
        let docs = [
            ("a.md", false, "old secret plan"),
            ("a.md", false, "appended line"),
            ("a.md", true, "new content"),
            ("a.md", false, "more plans"),
        ];
        assert_eq!(rank(&docs, "secret", 10).1, 0);
        assert_eq!(rank(&docs, "appended", 10).1, 0);
        let (hits, _) = rank(&docs, "plans content", 10);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].path, b"a.md");
    }

    #[test]
    fn ties_go_to_the_earlier_entry() {
        let mut corpus = Corpus::new("same");
        for (seq, path) in [(9, "a.md"), (5, "a.md"), (4, "b.md"), (3, "a.md")] {
            corpus
                .add(seq, path.as_bytes(), false, 4, &[1])
                .expect("newest first");
        }
        let (hits, matched) = corpus.rank(10);
        assert_eq!(matched, 2);
        assert_eq!((hits[0].path, hits[0].seq), (&b"a.md"[..], 3));
        assert_eq!((hits[1].path, hits[1].seq), (&b"b.md"[..], 4));
        assert_eq!(hits[0].score, hits[1].score);
    }

    #[test]
    fn an_entry_out_of_order_is_refused() {
        let mut corpus = Corpus::new("x1");
        corpus.add(5, b"a.md", true, 1, &[1]).expect("first");
        assert_eq!(
            corpus.add(7, b"b.md", true, 1, &[1]),
            Err(OutOfOrder { seq: 7, after: 5 })
        );
        assert_eq!(
            corpus.add(5, b"a.md", true, 1, &[1]),
            Err(OutOfOrder { seq: 5, after: 5 })
        );
        assert_eq!(corpus.rank(5).1, 1, "the refused entries were not counted");
    }

    #[test]
    fn limit_and_empty_queries() {
        let docs = [("a", true, "x1 y1"), ("b", true, "x1"), ("c", true, "x1")];
        assert_eq!(rank(&docs, "x1", 2).0.len(), 2);
        assert_eq!(rank(&docs, "x1", 2).1, 3);
        assert_eq!(rank(&docs, "!!", 5), (vec![], 0));
        assert_eq!(rank(&[], "x1", 5), (vec![], 0));
    }

    #[test]
    fn inverting_a_block_lists_each_term_once_with_its_entries() {
        let docs = [
            (1, "a.md", "red fox red"),
            (2, "b.md", "blue fox"),
            (4, "a.md", "fox"),
        ];
        let (record, postings) = invert(
            docs.iter()
                .map(|(seq, path, text)| {
                    let (entry, terms) = Entry::of(path, false, text);
                    (*seq, entry, terms)
                })
                .collect(),
        );
        let seqs: Vec<u64> = record.entries.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [1, 2, 4]);
        assert_eq!(record.entries[0].1.len, 3);
        assert_eq!(postings["fox"], [(1, 1), (2, 1), (4, 1)]);
        assert_eq!(postings["red"], [(1, 2)]);
        assert_eq!(postings.len(), 3);
        assert_eq!(block_range(0), 1..=BLOCK);
        assert_eq!(block_range(2), 2 * BLOCK + 1..=3 * BLOCK);
    }

    #[test]
    fn live_entries_start_at_the_last_overwrite() {
        assert_eq!(live_entries(&[(1, false), (2, false)]), [1, 2]);
        assert_eq!(
            live_entries(&[(1, true), (3, false), (5, true), (7, false)]),
            [5, 7]
        );
    }

    #[test]
    fn snippets_centre_on_the_first_hit() {
        let text = format!("{} needle {}", "hay ".repeat(100), "straw ".repeat(100));
        let s = snippet(&text, "needle");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("needle"), "{s}");
        assert!(s.len() < 300, "{s}");
        assert_eq!(snippet("short text", "nothing"), "short text");
    }
}
