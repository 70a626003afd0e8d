//! The memory bucket through `wasi:keyvalue`. Layout: `seq` is a counter handing each write a
//! number `n` of its own; `n:<n>:e` holds that write's [`Entry`], `n:<n>:f` its term counts
//! (with the entry again, so that a search reads one key per write not yet folded) and
//! `n:<n>:t` its text. A write's three keys sort together, next to the counter, so its durable
//! commit rewrites one leaf of the store's tree instead of three; earlier versions kept them
//! apart, as `e:<n>`, `f:<n>` and `t:<n>`, and those are still read where the new keys are
//! missing. Folded blocks add `k:<block>` (the block's record, in the binary form of
//! [`crate::block`]) and `y:<block>:<term>` (that term's postings in the block); every
//! [`GROUP`] folded blocks are folded again into one group, `K:<group>` and
//! `Y:<group>:<term>`, which a search reads instead of the group's blocks; a group's fold
//! also reads every write before the group, to record under `W:<group>` which of its
//! documents one of them wrote (see [`crate::block`]). Blocks folded by earlier versions hold `b:<block>` and
//! `x:<block>:<term>` in JSON instead; they are read as they are. No key is ever read, changed
//! and written back, so concurrent writers cannot lose each other's data; the host commits
//! each call durably before it returns.

use chitin_sdk::{ToolError, log};

use std::collections::{BTreeMap, HashSet};

use crate::block::{self, Before, GROUP, Span};
use crate::index::{BLOCK, BlockRecord, Entry, Postings, Terms, block_range, invert, same};

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/deps/keyvalue",
        world: "wasi:keyvalue/imports",
    });
}

use bindings::wasi::keyvalue::{atomics, batch, store};

/// The bucket this component keeps its memory in (granted by its manifest).
pub const BUCKET: &str = "memory";
/// Keys per batch call (the host accepts up to 1024).
const PAGE: usize = 1000;
/// The write counter.
const SEQ: &str = "seq";
/// Finished blocks a writer leaves unfolded behind the newest, so that the writes still in
/// flight from concurrent calls have landed by the time their block is folded.
const FOLD_LAG: u64 = 1;

/// One stored write as a read sees it, borrowed from a [`Fetched`] index.
pub struct Loaded<'a, 't> {
    /// Its number.
    pub seq: u64,
    /// Its document's path, as stored (UTF-8 unless the index is corrupt).
    pub path: &'a [u8],
    /// Whether it replaced the document.
    pub replace: bool,
    /// Its length in terms.
    pub len: u32,
    /// The counts of the terms asked for, in their order.
    pub tf: &'t [u32],
}

/// A folded span as fetched: its record in either form, and the posting list of each term
/// asked for (`None` when the term is not in it).
enum Folded {
    /// Binary record and postings of a block or group.
    Binary {
        span: Span,
        record: Vec<u8>,
        decoded: block::Record,
        postings: Vec<Option<Vec<u8>>>,
        /// For a group, what its fold knew of the writes before it, if that was recorded.
        before: Option<block::Earlier>,
    },
    /// JSON record and postings, as earlier versions folded them.
    Json {
        block: u64,
        record: BlockRecord,
        postings: Vec<Option<Postings>>,
    },
}

/// Every stored write, fetched for a read of the index: folded blocks and the entries not in
/// one. Read it with [`Fetched::each`].
pub struct Fetched {
    terms: usize,
    writes: usize,
    folded: Vec<Folded>,
    /// Entries not in a folded span, in order of number.
    loose: Vec<Loose>,
}

/// A write not in a folded span: its number, entry and counts of the terms asked for.
type Loose = (u64, Entry, Vec<u32>);

/// The open memory bucket.
pub struct Memory {
    bucket: store::Bucket,
}

impl Memory {
    /// Opens the bucket; a missing grant is a permission error naming it.
    pub fn open() -> Result<Self, ToolError> {
        let bucket = store::open(BUCKET).map_err(|e| {
            ToolError::permission_denied(format!(
                "cannot open key-value bucket `{BUCKET}`: {}",
                describe(&e)
            ))
        })?;
        Ok(Self { bucket })
    }

    /// Stores one write; its number. The write that finishes a block folds an earlier one
    /// into the index, and the block that finishes a group folds the group.
    pub fn put(&self, entry: &Entry, terms: &Terms, text: &str) -> Result<u64, ToolError> {
        let seq = atomics::increment(&self.bucket, SEQ, 1).map_err(failed)?;
        let pairs = vec![
            (Part::Entry.key(seq), encode(entry)?),
            (Part::Terms.key(seq), block::encode_terms(entry, terms)),
            (Part::Text.key(seq), text.as_bytes().to_vec()),
        ];
        batch::set_many(&self.bucket, &pairs).map_err(failed)?;
        if seq.is_multiple_of(BLOCK) && seq / BLOCK > FOLD_LAG {
            // The write is stored; an unfolded block only makes searches read its entries one
            // by one, so a failed fold is reported, not returned.
            if let Err(e) = self.fold_due(seq / BLOCK - 1 - FOLD_LAG) {
                log::warn(&format!("memory index: {e}"));
            }
        }
        Ok(seq)
    }

    /// Folds `block`, and the block before it if that one was left unfolded (its writer died);
    /// then its group, when `block` is the group's last.
    fn fold_due(&self, block: u64) -> Result<(), ToolError> {
        self.fold(block)?;
        if block > 0
            && !self.exists(&Span::Block(block - 1).record_key())?
            && !self.exists(&json_record_key(block - 1))?
        {
            self.fold(block - 1)?;
        }
        if (block + 1).is_multiple_of(GROUP) {
            let group = block / GROUP;
            self.fold_group(group)?;
            if group > 0 && !self.exists(&Span::Group(group - 1).record_key())? {
                self.fold_group(group - 1)?;
            }
        }
        Ok(())
    }

    fn exists(&self, key: &str) -> Result<bool, ToolError> {
        self.bucket.exists(key).map_err(failed)
    }

    /// Inverts the landed entries of `block` into its posting lists, then records the block.
    fn fold(&self, block: u64) -> Result<(), ToolError> {
        let seqs: Vec<u64> = block_range(block).collect();
        let entries = self.parts(&seqs, Part::Entry)?;
        let terms = self.parts(&seqs, Part::Terms)?;
        let mut landed = Vec::new();
        for ((seq, entry), terms) in seqs.iter().zip(entries).zip(terms) {
            if let (Some(entry), Some(terms)) = (entry, terms) {
                landed.push((*seq, decode(*seq, &entry)?, stored_terms(*seq, &terms)?));
            }
        }
        let (record, postings) = invert(landed);
        self.record(Span::Block(block), &record, &postings)
    }

    /// Folds the entries the block records of `group` hold into one record and posting lists.
    /// A group with a block not folded in binary form (yet, or by an earlier version) is left
    /// to be read block by block.
    fn fold_group(&self, group: u64) -> Result<(), ToolError> {
        let blocks: Vec<u64> = (group * GROUP..(group + 1) * GROUP).collect();
        let mut record = BlockRecord::default();
        for (block, bytes) in blocks
            .iter()
            .zip(self.get_many(blocks.iter().map(|b| Span::Block(*b).record_key()))?)
        {
            let Some(bytes) = bytes else { return Ok(()) };
            let span = Span::Block(*block);
            let held = block::decode_record(span, &bytes).map_err(|e| corrupt(span, &e))?;
            for row in &held.rows {
                let path = std::str::from_utf8(held.path(&bytes, row))
                    .map_err(|_| corrupt(span, &"a document path is not UTF-8"))?;
                record.entries.push((
                    row.seq,
                    Entry {
                        path: path.to_owned(),
                        replace: row.replace,
                        len: row.len,
                    },
                ));
            }
        }
        // Which of the group's documents a write before it wrote: a search that finds the same
        // writes before the group need not carry the group's overwrites of the others on.
        let start = *Span::Group(group).range().start();
        let fetched = self.load(&[])?;
        let mut before = HashSet::new();
        let mut writes = 0;
        fetched.each(|l| {
            if l.seq < start {
                writes += 1;
                before.insert(l.path);
            }
            Ok(())
        })?;
        let before = Before {
            writes,
            paths: &before,
        };
        self.bucket
            .set(&before_key(group), &block::encode_before(&record, &before))
            .map_err(failed)?;
        // Built term by term as the counts are read: a group's entries' term maps at once
        // would not fit the call's memory limit.
        let mut postings: BTreeMap<String, Postings> = BTreeMap::new();
        for page in record.entries.chunks(PAGE) {
            let seqs: Vec<u64> = page.iter().map(|(seq, _)| *seq).collect();
            let counts = self.parts(&seqs, Part::Terms)?;
            for ((seq, _), counts) in page.iter().zip(counts) {
                let Some(counts) = counts else {
                    return Err(ToolError::execution_failed(format!(
                        "memory entry {seq} is folded but its term counts are missing"
                    )));
                };
                let counts = stored_terms(*seq, &counts)?;
                for (term, count) in counts {
                    postings.entry(term).or_default().push((*seq, count));
                }
            }
        }
        self.record(Span::Group(group), &record, &postings)
    }

    /// Writes the posting lists of `span`, then its record: a span without its record is read
    /// through its parts.
    fn record(
        &self,
        span: Span,
        record: &BlockRecord,
        postings: &BTreeMap<String, Postings>,
    ) -> Result<(), ToolError> {
        let pairs: Vec<(String, Vec<u8>)> = postings
            .iter()
            .map(|(term, list)| (span.postings_key(term), block::encode_postings(span, list)))
            .collect();
        for page in pairs.chunks(PAGE) {
            batch::set_many(&self.bucket, page).map_err(failed)?;
        }
        self.bucket
            .set(&span.record_key(), &block::encode_record(record))
            .map_err(failed)
    }

    /// Every stored write, with the counts of `terms` in each: folded groups and blocks
    /// through their records and the terms' posting lists, the rest entry by entry. A number
    /// handed out whose write has not landed (in flight, or its writer died) is skipped.
    pub fn load(&self, terms: &[String]) -> Result<Fetched, ToolError> {
        let mut fetched = Fetched {
            terms: terms.len(),
            writes: 0,
            folded: Vec::new(),
            loose: Vec::new(),
        };
        let Some(last) = self.counter()? else {
            return Ok(fetched);
        };
        let blocks = last / BLOCK;
        let groups: Vec<u64> = (0..blocks / GROUP).collect();
        // Groups first; the blocks of a group without a record, and those after the last
        // group, one by one.
        let mut binary: Vec<(Span, Vec<u8>)> = Vec::new();
        let mut by_block: Vec<u64> = Vec::new();
        for page in groups.chunks(PAGE) {
            let records = self.get_many(page.iter().map(|g| Span::Group(*g).record_key()))?;
            for (group, record) in page.iter().zip(records) {
                match record {
                    Some(record) => binary.push((Span::Group(*group), record)),
                    None => by_block.extend(group * GROUP..(group + 1) * GROUP),
                }
            }
        }
        by_block.extend(groups.len() as u64 * GROUP..blocks);
        let mut unfolded: Vec<u64> = Vec::new();
        for page in by_block.chunks(PAGE) {
            let records = self.get_many(page.iter().map(|b| Span::Block(*b).record_key()))?;
            for (block, record) in page.iter().zip(records) {
                match record {
                    Some(record) => binary.push((Span::Block(*block), record)),
                    None => unfolded.push(*block),
                }
            }
        }
        let mut loose: Vec<u64> = Vec::new();
        let mut decoded = Vec::with_capacity(binary.len());
        for (span, record) in &binary {
            let held = block::decode_record(*span, record).map_err(|e| corrupt(*span, &e))?;
            fetched.writes += held.rows.len();
            // Its numbers are checked to ascend within the span: a full span holds them all.
            if held.rows.len() as u64 != span.len() {
                not_held(span.range(), held.rows.iter().map(|r| r.seq), &mut loose);
            }
            decoded.push(held);
        }
        let spans: Vec<Span> = binary.iter().map(|(span, _)| *span).collect();
        let lists = self.postings(&spans, terms, |s: &Span, t: &str| s.postings_key(t))?;
        let befores = self.befores(&spans, &decoded)?;
        for ((((span, record), decoded), postings), before) in
            binary.into_iter().zip(decoded).zip(lists).zip(befores)
        {
            fetched.folded.push(Folded::Binary {
                span,
                record,
                decoded,
                postings,
                before,
            });
        }
        self.load_json(&unfolded, terms, &mut fetched, &mut loose)?;
        loose.extend(blocks * BLOCK + 1..=last);
        for page in loose.chunks(PAGE) {
            self.load_loose(page, terms, &mut fetched)?;
        }
        // In order of number, for [`Fetched::each`].
        fetched.loose.sort_unstable_by_key(|(seq, ..)| *seq);
        Ok(fetched)
    }

    /// Adds the writes `seqs` (at most [`PAGE`]), read one by one, to `fetched`. Their term
    /// counts carry their entries; a write stored before they did is read with its entry key.
    fn load_loose(
        &self,
        seqs: &[u64],
        terms: &[String],
        fetched: &mut Fetched,
    ) -> Result<(), ToolError> {
        let mut without_entry: Vec<(u64, Option<Vec<u8>>)> = Vec::new();
        for (seq, counts) in seqs.iter().zip(self.parts(seqs, Part::Terms)?) {
            let carried = match &counts {
                Some(bytes) if block::is_binary_terms(bytes) => {
                    block::terms_entry(bytes).map_err(|e| corrupt_entry(*seq, &e))?
                }
                _ => None,
            };
            match (carried, counts) {
                (Some(entry), Some(bytes)) => {
                    let tf = term_counts(*seq, &bytes, terms)?;
                    fetched.loose.push((*seq, entry, tf));
                    fetched.writes += 1;
                }
                (_, counts) => without_entry.push((*seq, counts)),
            }
        }
        let numbers: Vec<u64> = without_entry.iter().map(|(s, _)| *s).collect();
        let entries = self.parts(&numbers, Part::Entry)?;
        for ((seq, counts), entry) in without_entry.into_iter().zip(entries) {
            let Some(entry) = entry else { continue };
            let entry: Entry = decode(seq, &entry)?;
            let tf = match counts {
                Some(bytes) => term_counts(seq, &bytes, terms)?,
                None => vec![0; terms.len()],
            };
            fetched.loose.push((seq, entry, tf));
            fetched.writes += 1;
        }
        Ok(())
    }

    /// Adds the `blocks` an earlier version folded (JSON records) to `fetched`, and the entry
    /// numbers of the rest to `loose`.
    fn load_json(
        &self,
        blocks: &[u64],
        terms: &[String],
        fetched: &mut Fetched,
        loose: &mut Vec<u64>,
    ) -> Result<(), ToolError> {
        for page in blocks.chunks(PAGE) {
            let mut json = Vec::new();
            for (block, bytes) in page
                .iter()
                .zip(self.get_many(page.iter().map(|b| json_record_key(*b)))?)
            {
                let Some(bytes) = bytes else {
                    loose.extend(block_range(*block));
                    continue;
                };
                let record: BlockRecord = decode_block(*block, &bytes)?;
                let seqs: Vec<u64> = record.entries.iter().map(|(s, _)| *s).collect();
                if !seqs.is_sorted_by(|a, b| a < b)
                    || seqs.iter().any(|s| !block_range(*block).contains(s))
                {
                    return Err(corrupt(
                        Span::Block(*block),
                        &"its entries are not the block's, in order",
                    ));
                }
                fetched.writes += seqs.len();
                not_held(block_range(*block), seqs.iter().copied(), loose);
                json.push((*block, record));
            }
            let spans: Vec<u64> = json.iter().map(|(b, _)| *b).collect();
            let lists = self.postings(&spans, terms, |b, t| json_postings_key(*b, t))?;
            for ((block, record), lists) in json.into_iter().zip(lists) {
                let postings = lists
                    .into_iter()
                    .map(|bytes| bytes.map(|b| decode_block(block, &b)).transpose())
                    .collect::<Result<Vec<Option<Postings>>, ToolError>>()?;
                fetched.folded.push(Folded::Json {
                    block,
                    record,
                    postings,
                });
            }
        }
        Ok(())
    }

    /// For each of `spans` (their records `decoded`), what its fold knew of the writes before
    /// it: recorded for groups folded by this version, `None` for the rest.
    fn befores(
        &self,
        spans: &[Span],
        decoded: &[block::Record],
    ) -> Result<Vec<Option<block::Earlier>>, ToolError> {
        let groups: Vec<(usize, u64)> = spans
            .iter()
            .enumerate()
            .filter_map(|(at, span)| match span {
                Span::Group(group) => Some((at, *group)),
                Span::Block(_) => None,
            })
            .collect();
        let mut out = vec![None; spans.len()];
        for page in groups.chunks(PAGE) {
            let values = self.get_many(page.iter().map(|(_, group)| before_key(*group)))?;
            for ((at, group), value) in page.iter().zip(values) {
                let Some(bytes) = value else { continue };
                out[*at] = block::decode_before(&bytes, &decoded[*at])
                    .map_err(|e| corrupt(Span::Group(*group), &e))?;
            }
        }
        Ok(out)
    }

    /// The posting lists of each of `terms` in each of `spans`: one list per span, holding
    /// one value per term.
    fn postings<S>(
        &self,
        spans: &[S],
        terms: &[String],
        key: impl Fn(&S, &str) -> String,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>, ToolError> {
        let mut out: Vec<Vec<Option<Vec<u8>>>> = vec![Vec::with_capacity(terms.len()); spans.len()];
        for term in terms {
            for (at, page) in spans.chunks(PAGE).enumerate() {
                let values = self.get_many(page.iter().map(|s| key(s, term)))?;
                for (slot, value) in out[at * PAGE..].iter_mut().zip(values) {
                    slot.push(value);
                }
            }
        }
        Ok(out)
    }

    /// `part` of each of the writes `seqs` (at most [`PAGE`]), `None` where the write has not
    /// landed: under its key, or under its key in the earlier layout where that is missing.
    fn parts(&self, seqs: &[u64], part: Part) -> Result<Vec<Option<Vec<u8>>>, ToolError> {
        let mut values = self.get_many(seqs.iter().map(|s| part.key(*s)))?;
        let missing: Vec<usize> = (0..values.len()).filter(|i| values[*i].is_none()).collect();
        let earlier = self.get_many(missing.iter().map(|i| part.earlier_key(seqs[*i])))?;
        for (i, value) in missing.into_iter().zip(earlier) {
            values[i] = value;
        }
        Ok(values)
    }

    /// The values of `keys` (at most [`PAGE`]), `None` where a key is absent.
    fn get_many(
        &self,
        keys: impl Iterator<Item = String>,
    ) -> Result<Vec<Option<Vec<u8>>>, ToolError> {
        let keys: Vec<String> = keys.collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        Ok(batch::get_many(&self.bucket, &keys)
            .map_err(failed)?
            .into_iter()
            .map(|v| v.map(|(_, value)| value))
            .collect())
    }

    /// The last number handed out, if any write was made.
    fn counter(&self) -> Result<Option<u64>, ToolError> {
        match self.bucket.get(SEQ).map_err(failed)? {
            None => Ok(None),
            Some(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .map(Some)
                .ok_or_else(|| ToolError::execution_failed("memory counter is corrupt")),
        }
    }

    /// The texts of the writes `seqs`, in order.
    pub fn texts(&self, seqs: &[u64]) -> Result<Vec<String>, ToolError> {
        let mut texts = Vec::with_capacity(seqs.len());
        for page in seqs.chunks(PAGE) {
            for value in self.parts(page, Part::Text)? {
                let bytes = value.unwrap_or_default();
                texts.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        Ok(texts)
    }
}

impl Fetched {
    /// How many writes were fetched.
    pub fn len(&self) -> usize {
        self.writes
    }

    /// Calls `each` for every fetched write, newest first; stops at its first error.
    pub fn each<'a>(
        &'a self,
        mut each: impl for<'t> FnMut(Loaded<'a, 't>) -> Result<(), ToolError>,
    ) -> Result<(), ToolError> {
        self.each_or_span(|item| match item {
            Item::Entry(loaded) => each(loaded),
            Item::Span(rows) => rows.each(&mut each),
        })
    }

    /// Calls `each` for every fetched write, newest first, giving a folded span's writes at
    /// once where no other write falls among them; stops at its first error.
    pub fn each_or_span<'a>(
        &'a self,
        mut each: impl for<'t> FnMut(Item<'a, 't>) -> Result<(), ToolError>,
    ) -> Result<(), ToolError> {
        // Spans cover disjoint ranges of numbers. A loose write may lie inside one (it landed
        // after the span was folded), so the loose writes are merged in by number.
        let mut spans: Vec<&Folded> = self.folded.iter().collect();
        spans.sort_unstable_by_key(|folded| std::cmp::Reverse(folded.first()));
        // Writes given so far: those left are the ones before.
        let given = std::cell::Cell::new(0usize);
        let mut each = |item: Item<'a, '_>| {
            given.set(given.get() + item.writes());
            each(item)
        };
        let mut loose = self.loose.iter().rev().peekable();
        // The number of the next loose write (0: none left), checked per entry.
        let mut next = newer_loose(&mut loose, u64::MAX, &mut each)?;
        let mut tf = vec![0u32; (GROUP * BLOCK) as usize * self.terms];
        for folded in spans {
            match folded {
                Folded::Binary {
                    span,
                    record,
                    decoded,
                    postings,
                    before,
                } => {
                    let span = *span;
                    let tf = &mut tf[..span.len() as usize * self.terms];
                    tf.fill(0);
                    for (t, list) in postings.iter().enumerate() {
                        let Some(list) = list else { continue };
                        block::decode_postings(span, list, |offset, count| {
                            tf[offset * self.terms + t] = count;
                        })
                        .map_err(|e| corrupt(span, &e))?;
                    }
                    let first = *span.range().start();
                    let (Some(oldest), Some(newest)) = (decoded.rows.first(), decoded.rows.last())
                    else {
                        continue;
                    };
                    if next > newest.seq {
                        next = newer_loose(&mut loose, newest.seq, &mut each)?;
                    }
                    if next < oldest.seq {
                        let older = self.writes - given.get() - decoded.rows.len();
                        // What the fold knew of the writes before the span holds if they are
                        // still as many: writes only ever land.
                        let wrote = before
                            .as_ref()
                            .filter(|before| before.writes == older as u64);
                        each(Item::Span(SpanRows {
                            record,
                            decoded,
                            first,
                            terms: self.terms,
                            tf,
                            wrote,
                        }))?;
                        continue;
                    }
                    for row in decoded.rows.iter().rev() {
                        if next > row.seq {
                            next = newer_loose(&mut loose, row.seq, &mut each)?;
                        }
                        let at = (row.seq - first) as usize * self.terms;
                        each(Item::Entry(Loaded {
                            seq: row.seq,
                            path: decoded.path(record, row),
                            replace: row.replace,
                            len: row.len,
                            tf: &tf[at..at + self.terms],
                        }))?;
                    }
                }
                Folded::Json {
                    block,
                    record,
                    postings,
                } => {
                    let tf = &mut tf[..BLOCK as usize * self.terms];
                    tf.fill(0);
                    let first = *block_range(*block).start();
                    for (t, list) in postings.iter().enumerate() {
                        for (seq, count) in list.iter().flatten() {
                            if let Some(offset) = seq.checked_sub(first).filter(|o| *o < BLOCK) {
                                tf[offset as usize * self.terms + t] = *count;
                            }
                        }
                    }
                    for (seq, entry) in record.entries.iter().rev() {
                        if next > *seq {
                            next = newer_loose(&mut loose, *seq, &mut each)?;
                        }
                        // Checked when fetched: every entry of a record is in its block.
                        let at = (seq - first) as usize * self.terms;
                        each(Item::Entry(Loaded {
                            seq: *seq,
                            path: entry.path.as_bytes(),
                            replace: entry.replace,
                            len: entry.len,
                            tf: &tf[at..at + self.terms],
                        }))?;
                    }
                }
            }
        }
        newer_loose(&mut loose, 0, &mut each).map(drop)
    }
}

/// What [`Fetched::each_or_span`] gives: one write, or every write of a folded span.
pub enum Item<'a, 't> {
    /// One write.
    Entry(Loaded<'a, 't>),
    /// The writes of a folded span, no other write falling among them.
    Span(SpanRows<'a, 't>),
}

impl Item<'_, '_> {
    /// How many writes it gives.
    fn writes(&self) -> usize {
        match self {
            Item::Entry(_) => 1,
            Item::Span(rows) => rows.rows().len(),
        }
    }
}

/// The writes of one folded span, given at once so that a search can take each document of
/// the span once rather than each write.
pub struct SpanRows<'a, 't> {
    record: &'a [u8],
    decoded: &'a block::Record,
    first: u64,
    terms: usize,
    tf: &'t [u32],
    wrote: Option<&'a block::Earlier>,
}

impl<'a, 't> SpanRows<'a, 't> {
    /// Its writes, in order of number.
    pub fn rows(&self) -> &'a [block::Row] {
        &self.decoded.rows
    }

    /// How many distinct documents it holds: each row's `path` is below it.
    pub fn documents(&self) -> usize {
        self.decoded.documents()
    }

    /// The path of document `index`, as stored.
    pub fn document(&self, index: u32) -> &'a [u8] {
        self.decoded.document(self.record, index)
    }

    /// Per document, whether a write before the span wrote it, when that is known: an
    /// overwrite of a document no earlier write wrote retires nothing before the span.
    pub fn wrote_before(&self) -> Option<&'a block::Earlier> {
        self.wrote
    }

    /// The index of the document at `path` (whose [`block::path_hash`] is `hash`) in the span,
    /// looked up in `before`, the index read beside its record.
    pub fn find(&self, before: &block::Earlier, path: &[u8], hash: u64) -> Option<u32> {
        before.find(self.decoded, self.record, path, hash)
    }

    /// The counts of the terms asked for in `row`, in their order.
    pub fn tf(&self, row: &block::Row) -> &'t [u32] {
        // Checked when decoded: every row's number is in the span.
        let at = (row.seq - self.first) as usize * self.terms;
        &self.tf[at..at + self.terms]
    }

    /// Calls `each` for every write, newest first.
    fn each<F>(&self, each: &mut F) -> Result<(), ToolError>
    where
        F: for<'u> FnMut(Loaded<'a, 'u>) -> Result<(), ToolError>,
    {
        for row in self.rows().iter().rev() {
            each(Loaded {
                seq: row.seq,
                path: self.document(row.path),
                replace: row.replace,
                len: row.len,
                tf: self.tf(row),
            })?;
        }
        Ok(())
    }
}

impl Folded {
    /// The first number of the span.
    fn first(&self) -> u64 {
        match self {
            Folded::Binary { span, .. } => *span.range().start(),
            Folded::Json { block, .. } => *block_range(*block).start(),
        }
    }
}

/// Calls `each` for the next `loose` writes (newest first) numbered above `seq`; the number of
/// the one after them (0: none).
fn newer_loose<'a, F>(
    loose: &mut std::iter::Peekable<std::iter::Rev<std::slice::Iter<'a, Loose>>>,
    seq: u64,
    each: &mut F,
) -> Result<u64, ToolError>
where
    F: for<'t> FnMut(Item<'a, 't>) -> Result<(), ToolError>,
{
    while let Some((number, entry, tf)) = loose.next_if(|(number, ..)| *number > seq) {
        each(Item::Entry(Loaded {
            seq: *number,
            path: entry.path.as_bytes(),
            replace: entry.replace,
            len: entry.len,
            tf,
        }))?;
    }
    Ok(loose.peek().map_or(0, |(number, ..)| *number))
}

/// The stored term counts of write `seq`, in either form.
fn stored_terms(seq: u64, bytes: &[u8]) -> Result<Terms, ToolError> {
    if !block::is_binary_terms(bytes) {
        return decode(seq, bytes);
    }
    let mut terms = Terms::new();
    let mut utf8 = true;
    block::each_term(bytes, |term, count| match std::str::from_utf8(term) {
        Ok(term) => {
            terms.insert(term.to_owned(), count);
        }
        Err(_) => utf8 = false,
    })
    .map_err(|e| corrupt_entry(seq, &e))?;
    if !utf8 {
        return Err(corrupt_entry(seq, &"a term is not UTF-8"));
    }
    Ok(terms)
}

/// The counts of `terms` in the stored term counts of write `seq`, without building the map of
/// every term it holds.
fn term_counts(seq: u64, bytes: &[u8], terms: &[String]) -> Result<Vec<u32>, ToolError> {
    if block::is_binary_terms(bytes) {
        let mut counts = vec![0; terms.len()];
        block::each_term(bytes, |term, count| {
            if let Some(i) = terms.iter().position(|t| same(t.as_bytes(), term)) {
                counts[i] = count;
            }
        })
        .map_err(|e| corrupt_entry(seq, &e))?;
        return Ok(counts);
    }
    struct Counts<'t>(&'t [String]);

    impl<'de> serde::de::DeserializeSeed<'de> for Counts<'_> {
        type Value = Vec<u32>;

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<u32>, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> serde::de::Visitor<'de> for Counts<'_> {
        type Value = Vec<u32>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of term counts")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Vec<u32>, A::Error> {
            let mut counts = vec![0; self.0.len()];
            while let Some(Term(term)) = map.next_key()? {
                match self.0.iter().position(|t| *t == term) {
                    Some(i) => counts[i] = map.next_value()?,
                    None => {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
            }
            Ok(counts)
        }
    }

    /// A term, borrowed from the stored bytes unless it holds an escape.
    struct Term<'de>(std::borrow::Cow<'de, str>);

    impl<'de> serde::Deserialize<'de> for Term<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Term<'de>;

                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a term")
                }

                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Term<'de>, E> {
                    Ok(Term(std::borrow::Cow::Borrowed(v)))
                }

                fn visit_str<E>(self, v: &str) -> Result<Term<'de>, E> {
                    Ok(Term(std::borrow::Cow::Owned(v.to_owned())))
                }
            }
            d.deserialize_str(Visit)
        }
    }

    use serde::de::DeserializeSeed;
    let mut d = serde_json::Deserializer::from_slice(bytes);
    Counts(terms)
        .deserialize(&mut d)
        .and_then(|counts| d.end().map(|()| counts))
        .map_err(|e| ToolError::execution_failed(format!("memory entry {seq} is corrupt: {e}")))
}

/// Adds the numbers of `range` that `held` (ascending) lacks to `loose`.
fn not_held(
    range: std::ops::RangeInclusive<u64>,
    held: impl Iterator<Item = u64>,
    loose: &mut Vec<u64>,
) {
    let mut held = held.peekable();
    for seq in range {
        if held.next_if_eq(&seq).is_none() {
            loose.push(seq);
        }
    }
}

fn corrupt_entry(seq: u64, e: &dyn std::fmt::Display) -> ToolError {
    ToolError::execution_failed(format!("memory entry {seq} is corrupt: {e}"))
}

fn corrupt(span: Span, e: &dyn std::fmt::Display) -> ToolError {
    let what = match span {
        Span::Block(n) => format!("block {n}"),
        Span::Group(n) => format!("group {n}"),
    };
    ToolError::execution_failed(format!("memory index {what} is corrupt: {e}"))
}

fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, ToolError> {
    serde_json::to_vec(value)
        .map_err(|e| ToolError::execution_failed(format!("cannot encode memory index: {e}")))
}

fn decode<T: serde::de::DeserializeOwned>(seq: u64, bytes: &[u8]) -> Result<T, ToolError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ToolError::execution_failed(format!("memory entry {seq} is corrupt: {e}")))
}

fn decode_block<T: serde::de::DeserializeOwned>(block: u64, bytes: &[u8]) -> Result<T, ToolError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ToolError::execution_failed(format!("memory index block {block} is corrupt: {e}"))
    })
}

/// One of the three keys a write stores.
#[derive(Clone, Copy)]
enum Part {
    /// Its [`Entry`].
    Entry,
    /// Its term counts, carrying the entry.
    Terms,
    /// Its text.
    Text,
}

impl Part {
    fn letter(self) -> char {
        match self {
            Self::Entry => 'e',
            Self::Terms => 'f',
            Self::Text => 't',
        }
    }

    /// Its key for write `seq`: the three of a write sort together.
    fn key(self, seq: u64) -> String {
        format!("n:{seq:012}:{}", self.letter())
    }

    /// Its key for write `seq` as earlier versions stored it, apart from the other two.
    fn earlier_key(self, seq: u64) -> String {
        format!("{}:{seq:012}", self.letter())
    }
}

/// The key of what the fold of `group` knew of the writes before it.
fn before_key(group: u64) -> String {
    format!("W:{group:010}")
}

fn json_record_key(block: u64) -> String {
    format!("b:{block:010}")
}

fn json_postings_key(block: u64, term: &str) -> String {
    format!("x:{block:010}:{term}")
}

fn describe(e: &store::Error) -> String {
    match e {
        store::Error::NoSuchStore => "no such store".into(),
        store::Error::AccessDenied => "access denied".into(),
        store::Error::Other(message) => message.clone(),
    }
}

/// The tool's error for a storage error. The host reports a failing database as a host fault of
/// its own, so an error that reaches the component is the host refusing the write (its quota,
/// its size limits): a refusal, not a failing service.
fn failed(e: store::Error) -> ToolError {
    match e {
        store::Error::NoSuchStore => {
            ToolError::external_service(format!("memory storage: {}", describe(&e)))
        }
        store::Error::AccessDenied | store::Error::Other(_) => {
            ToolError::permission_denied(format!("memory storage refused: {}", describe(&e)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{BlockRecord, Corpus, Entry, Postings};
    use std::collections::HashSet;

    fn entry(seq: u64) -> Entry {
        Entry {
            path: format!("doc{}.md", seq % 7),
            replace: seq.is_multiple_of(3),
            len: seq as u32,
        }
    }

    /// A store of writes to documents, often overwritten and with new ones coming: groups 0
    /// and 1 and block 32 folded in binary, block 33 by an earlier version (JSON), block 34
    /// in binary, then 40 writes not folded. The writes in `late` landed after their span was
    /// folded (and after group 1 was). Write 500 is the only one to `fresh.md` before write
    /// 1500 overwrites it.
    fn random_store(seed: u64, late: &[u64]) -> Fetched {
        let mut state = seed;
        let mut next = move |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let writes: Vec<(u64, Entry, Vec<u32>)> = (1..=35 * BLOCK + 40)
            .map(|seq| {
                let mut entry = Entry {
                    path: format!("d{}.md", next(10 + seq / 20)),
                    replace: next(5) == 0,
                    len: 1 + next(60) as u32,
                };
                let mut tf: Vec<u32> = (0..2)
                    .map(|_| if next(8) == 0 { 1 + next(3) as u32 } else { 0 })
                    .collect();
                if seq == 500 || seq == 1500 {
                    entry.path = "fresh.md".to_owned();
                    entry.replace = seq == 1500;
                }
                if seq == 500 {
                    tf = vec![3, 3];
                }
                (seq, entry, tf)
            })
            .collect();
        let landed = |range: std::ops::RangeInclusive<u64>| {
            writes
                .iter()
                .filter(move |(seq, ..)| range.contains(seq) && !late.contains(seq))
        };
        let mut folded = Vec::new();
        for span in [
            Span::Group(0),
            Span::Group(1),
            Span::Block(32),
            Span::Block(34),
        ] {
            let start = *span.range().start();
            let paths: HashSet<&[u8]> = landed(1..=start - 1)
                .map(|(_, entry, _)| entry.path.as_bytes())
                .collect();
            let before = Before {
                writes: landed(1..=start - 1).count() as u64,
                paths: &paths,
            };
            let entries = BlockRecord {
                entries: landed(span.range())
                    .map(|(seq, entry, _)| (*seq, entry.clone()))
                    .collect(),
            };
            let record = block::encode_record(&entries);
            let decoded = block::decode_record(span, &record).expect("record");
            let before = matches!(span, Span::Group(_)).then(|| {
                block::decode_before(&block::encode_before(&entries, &before), &decoded)
                    .expect("before")
                    .expect("beside its record")
            });
            let postings = (0..2)
                .map(|t| {
                    let list: Postings = landed(span.range())
                        .filter(|(.., tf)| tf[t] > 0)
                        .map(|(seq, _, tf)| (*seq, tf[t]))
                        .collect();
                    (!list.is_empty()).then(|| block::encode_postings(span, &list))
                })
                .collect();
            folded.push(Folded::Binary {
                span,
                record,
                decoded,
                postings,
                before,
            });
        }
        folded.push(Folded::Json {
            block: 33,
            record: BlockRecord {
                entries: landed(block_range(33))
                    .map(|(seq, entry, _)| (*seq, entry.clone()))
                    .collect(),
            },
            postings: (0..2)
                .map(|t| {
                    Some(
                        landed(block_range(33))
                            .filter(|(.., tf)| tf[t] > 0)
                            .map(|(seq, _, tf)| (*seq, tf[t]))
                            .collect(),
                    )
                })
                .collect(),
        });
        Fetched {
            terms: 2,
            writes: writes.len(),
            folded,
            loose: writes
                .iter()
                .filter(|(seq, ..)| *seq > 35 * BLOCK || late.contains(seq))
                .cloned()
                .collect(),
        }
    }

    #[test]
    fn a_span_taken_at_once_ranks_as_its_entries_one_by_one() {
        let cases: [(u64, &[u64]); 4] =
            [(1, &[]), (2, &[500]), (3, &[5, 1030, 2100]), (4, &[2200])];
        for (seed, late) in cases {
            let fetched = random_store(seed, late);
            let query = "t1 t2";
            let mut one_by_one = Corpus::new(query);
            fetched
                .each(|l| {
                    one_by_one
                        .add(l.seq, l.path, l.replace, l.len, l.tf)
                        .map_err(|e| ToolError::execution_failed(e.to_string()))
                })
                .expect("each");
            let mut at_once = Corpus::new(query);
            let mut spans = Vec::new();
            fetched
                .each_or_span(|item| {
                    match item {
                        Item::Entry(l) => at_once.add(l.seq, l.path, l.replace, l.len, l.tf),
                        Item::Span(rows) => {
                            spans.push(rows.wrote_before().is_some());
                            at_once.add_span(&rows)
                        }
                    }
                    .map_err(|e| ToolError::execution_failed(e.to_string()))
                })
                .expect("each_or_span");
            // Binary spans with no late write among their entries are taken at once, newest
            // first; a group's flags are used while no write before it landed late.
            let whole: Vec<bool> = [
                Span::Block(34),
                Span::Block(32),
                Span::Group(1),
                Span::Group(0),
            ]
            .iter()
            .filter(|span| !late.iter().any(|seq| span.range().contains(seq)))
            .map(|span| {
                matches!(span, Span::Group(_)) && !late.iter().any(|seq| seq < span.range().start())
            })
            .collect();
            assert_eq!(spans, whole, "seed {seed}");
            let (hits, matched) = one_by_one.rank(50);
            assert!(matched > 10 && hits.len() > 10, "seed {seed}: {matched}");
            assert!(
                hits.iter().all(|hit| hit.seq != 500),
                "seed {seed}: entry 500 was overwritten"
            );
            assert_eq!(at_once.rank(50), (hits, matched), "seed {seed}");
        }
    }

    #[test]
    fn each_gives_every_write_newest_first_with_loose_ones_merged_in() {
        // Block 0 folded in binary without 10 and 20 (they landed late), block 1 folded by an
        // earlier version (JSON) with 65..=70, then 71 not folded yet.
        let binary = BlockRecord {
            entries: (1..=64)
                .filter(|s| *s != 10 && *s != 20)
                .map(|s| (s, entry(s)))
                .collect(),
        };
        let record = block::encode_record(&binary);
        let decoded = block::decode_record(Span::Block(0), &record).expect("record");
        let json = BlockRecord {
            entries: (65..=70).map(|s| (s, entry(s))).collect(),
        };
        let fetched = Fetched {
            terms: 1,
            writes: 71,
            folded: vec![
                Folded::Binary {
                    span: Span::Block(0),
                    record,
                    decoded,
                    postings: vec![Some(block::encode_postings(
                        Span::Block(0),
                        &vec![(3, 2), (64, 1)],
                    ))],
                    before: None,
                },
                Folded::Json {
                    block: 1,
                    record: json,
                    postings: vec![Some(vec![(66, 4)])],
                },
            ],
            loose: [10, 20, 71]
                .into_iter()
                .map(|s| (s, entry(s), vec![u32::from(s == 20)]))
                .collect(),
        };
        let mut seen = Vec::new();
        fetched
            .each(|l| {
                let e = entry(l.seq);
                assert_eq!(
                    (l.path, l.replace, l.len),
                    (e.path.as_bytes(), e.replace, e.len)
                );
                seen.push((l.seq, l.tf[0]));
                Ok(())
            })
            .expect("each");
        let order: Vec<u64> = seen.iter().map(|(s, _)| *s).collect();
        assert_eq!(order, (1..=71).rev().collect::<Vec<u64>>());
        let counted: Vec<(u64, u32)> = seen.into_iter().filter(|(_, tf)| *tf > 0).collect();
        assert_eq!(counted, [(66, 4), (64, 1), (20, 1), (3, 2)]);
    }
}
