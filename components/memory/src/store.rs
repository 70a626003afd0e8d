//! The memory bucket through `wasi:keyvalue`. Layout: `seq` is a counter handing each write a
//! number `n` of its own; `e:<n>` holds that write's [`Entry`], `f:<n>` its term counts and
//! `t:<n>` its text. Folded blocks add `b:<block>` (a [`BlockRecord`]) and `x:<block>:<term>`
//! (that term's postings in the block). No key is ever read, changed and written back, so
//! concurrent writers cannot lose each other's data; the host commits each call durably before
//! it returns.

use std::collections::HashMap;

use chitin_sdk::{ToolError, log};

use crate::index::{BLOCK, BlockRecord, Entry, Postings, Terms, block_range, invert};

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

/// One stored write as a read sees it.
pub struct Loaded {
    /// Its number.
    pub seq: u64,
    /// Its document, kind and length.
    pub entry: Entry,
    /// The counts of the terms asked for, in their order.
    pub tf: Vec<u32>,
}

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
    /// into the index.
    pub fn put(&self, entry: &Entry, terms: &Terms, text: &str) -> Result<u64, ToolError> {
        let seq = atomics::increment(&self.bucket, SEQ, 1).map_err(failed)?;
        let pairs = vec![
            (entry_key(seq), encode(entry)?),
            (terms_key(seq), encode(terms)?),
            (text_key(seq), text.as_bytes().to_vec()),
        ];
        batch::set_many(&self.bucket, &pairs).map_err(failed)?;
        if seq % BLOCK == 0 && seq / BLOCK > FOLD_LAG {
            // The write is stored; an unfolded block only makes searches read its entries one
            // by one, so a failed fold is reported, not returned.
            if let Err(e) = self.fold_due(seq / BLOCK - 1 - FOLD_LAG) {
                log::warn(&format!("memory index: {e}"));
            }
        }
        Ok(seq)
    }

    /// Folds `block`, and the block before it if that one was left unfolded (its writer died).
    fn fold_due(&self, block: u64) -> Result<(), ToolError> {
        self.fold(block)?;
        if block > 0 && !self.bucket.exists(&record_key(block - 1)).map_err(failed)? {
            self.fold(block - 1)?;
        }
        Ok(())
    }

    /// Inverts the landed entries of `block` into its posting lists, then records the block.
    fn fold(&self, block: u64) -> Result<(), ToolError> {
        let seqs: Vec<u64> = block_range(block).collect();
        let keys: Vec<String> = seqs
            .iter()
            .map(|s| entry_key(*s))
            .chain(seqs.iter().map(|s| terms_key(*s)))
            .collect();
        let values = batch::get_many(&self.bucket, &keys).map_err(failed)?;
        let (entries, terms) = values.split_at(seqs.len());
        let mut landed = Vec::new();
        for ((seq, entry), terms) in seqs.iter().zip(entries).zip(terms) {
            if let (Some((_, entry)), Some((_, terms))) = (entry, terms) {
                landed.push((*seq, decode(*seq, entry)?, decode(*seq, terms)?));
            }
        }
        let (record, postings) = invert(landed);
        let pairs = postings
            .iter()
            .map(|(term, list)| Ok((postings_key(block, term), encode(list)?)))
            .collect::<Result<Vec<_>, ToolError>>()?;
        for page in pairs.chunks(PAGE) {
            batch::set_many(&self.bucket, page).map_err(failed)?;
        }
        // Recorded last: a block without its record is read entry by entry.
        self.bucket
            .set(&record_key(block), &encode(&record)?)
            .map_err(failed)
    }

    /// Every stored write in order, with the counts of `terms` in each: folded blocks through
    /// their records and the terms' posting lists, the rest entry by entry. A number handed out
    /// whose write has not landed (in flight, or its writer died) is skipped.
    pub fn load(&self, terms: &[String]) -> Result<Vec<Loaded>, ToolError> {
        let Some(last) = self.counter()? else {
            return Ok(Vec::new());
        };
        let blocks: Vec<u64> = (0..last / BLOCK).collect();
        let mut out: Vec<Loaded> = Vec::new();
        let mut folded = Vec::new();
        let mut loose = Vec::new();
        for page in blocks.chunks(PAGE) {
            let keys: Vec<String> = page.iter().map(|b| record_key(*b)).collect();
            for (block, value) in page
                .iter()
                .zip(batch::get_many(&self.bucket, &keys).map_err(failed)?)
            {
                let Some((_, bytes)) = value else {
                    loose.extend(block_range(*block));
                    continue;
                };
                let record: BlockRecord = decode_block(*block, &bytes)?;
                let mut held = record.entries.iter().map(|(s, _)| *s).peekable();
                for seq in block_range(*block) {
                    if held.next_if_eq(&seq).is_none() {
                        loose.push(seq);
                    }
                }
                out.extend(record.entries.into_iter().map(|(seq, entry)| Loaded {
                    seq,
                    entry,
                    tf: vec![0; terms.len()],
                }));
                folded.push(*block);
            }
        }
        loose.extend(blocks.len() as u64 * BLOCK + 1..=last);
        let at: HashMap<u64, usize> = out.iter().enumerate().map(|(i, l)| (l.seq, i)).collect();
        for (t, term) in terms.iter().enumerate() {
            for page in folded.chunks(PAGE) {
                let keys: Vec<String> = page.iter().map(|b| postings_key(*b, term)).collect();
                for (block, value) in page
                    .iter()
                    .zip(batch::get_many(&self.bucket, &keys).map_err(failed)?)
                {
                    let Some((_, bytes)) = value else { continue };
                    let list: Postings = decode_block(*block, &bytes)?;
                    for (seq, count) in list {
                        if let Some(i) = at.get(&seq) {
                            out[*i].tf[t] = count;
                        }
                    }
                }
            }
        }
        for page in loose.chunks(PAGE / 2) {
            let keys: Vec<String> = page
                .iter()
                .map(|s| entry_key(*s))
                .chain(page.iter().map(|s| terms_key(*s)))
                .collect();
            let values = batch::get_many(&self.bucket, &keys).map_err(failed)?;
            let (entries, counts) = values.split_at(page.len());
            for ((seq, entry), counts) in page.iter().zip(entries).zip(counts) {
                let Some((_, entry)) = entry else { continue };
                let entry: Entry = decode(*seq, entry)?;
                let counts: Terms = match counts {
                    Some((_, bytes)) => decode(*seq, bytes)?,
                    None => Terms::new(),
                };
                let tf = terms
                    .iter()
                    .map(|t| counts.get(t).copied().unwrap_or(0))
                    .collect();
                out.push(Loaded {
                    seq: *seq,
                    entry,
                    tf,
                });
            }
        }
        out.sort_unstable_by_key(|l| l.seq);
        Ok(out)
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
            let keys: Vec<String> = page.iter().copied().map(text_key).collect();
            for value in batch::get_many(&self.bucket, &keys).map_err(failed)? {
                let bytes = value.map(|(_, v)| v).unwrap_or_default();
                texts.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        Ok(texts)
    }
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

fn entry_key(seq: u64) -> String {
    format!("e:{seq:012}")
}

fn terms_key(seq: u64) -> String {
    format!("f:{seq:012}")
}

fn record_key(block: u64) -> String {
    format!("b:{block:010}")
}

fn postings_key(block: u64, term: &str) -> String {
    format!("x:{block:010}:{term}")
}

fn text_key(seq: u64) -> String {
    format!("t:{seq:012}")
}

fn describe(e: &store::Error) -> String {
    match e {
        store::Error::NoSuchStore => "no such store".into(),
        store::Error::AccessDenied => "access denied".into(),
        store::Error::Other(message) => message.clone(),
    }
}

fn failed(e: store::Error) -> ToolError {
    ToolError::external_service(format!("memory storage: {}", describe(&e)))
}
