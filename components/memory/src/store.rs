//! The memory bucket through `wasi:keyvalue`. Layout: `seq` is a counter handing each write a
//! number `n` of its own; `e:<n>` holds that write's postings ([`Meta`]) and `t:<n>` its text.
//! No key is ever read, changed and written back, so concurrent writers cannot lose each other's
//! data; the host commits each call durably before it returns.

use chitin_sdk::ToolError;

use crate::index::Meta;

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/deps/keyvalue",
        world: "wasi:keyvalue/imports",
    });
}

use bindings::wasi::keyvalue::{atomics, batch, store};

/// The bucket this component keeps its memory in (granted by its manifest).
pub const BUCKET: &str = "memory";
/// Keys per batch read (the host accepts up to 1024).
const PAGE: u64 = 1000;
/// The write counter.
const SEQ: &str = "seq";

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

    /// Stores one write; its sequence number.
    pub fn put(&self, meta: &Meta, text: &str) -> Result<u64, ToolError> {
        let seq = atomics::increment(&self.bucket, SEQ, 1).map_err(failed)?;
        let meta = serde_json::to_vec(meta)
            .map_err(|e| ToolError::execution_failed(format!("cannot encode postings: {e}")))?;
        let pairs = vec![
            (meta_key(seq), meta),
            (text_key(seq), text.as_bytes().to_vec()),
        ];
        batch::set_many(&self.bucket, &pairs).map_err(failed)?;
        Ok(seq)
    }

    /// Visits every stored write's postings in write order, a page at a time (only one page is
    /// held in memory). A number handed out whose write has not landed (in flight, or its
    /// writer died) is skipped.
    pub fn scan(&self, mut visit: impl FnMut(u64, Meta)) -> Result<(), ToolError> {
        let last = match self.bucket.get(SEQ).map_err(failed)? {
            None => return Ok(()),
            Some(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| ToolError::execution_failed("memory counter is corrupt"))?,
        };
        let mut start = 1;
        while start <= last {
            let end = (start + PAGE - 1).min(last);
            let keys: Vec<String> = (start..=end).map(meta_key).collect();
            let values = batch::get_many(&self.bucket, &keys).map_err(failed)?;
            for (seq, value) in (start..=end).zip(values) {
                if let Some((_, bytes)) = value {
                    let meta: Meta = serde_json::from_slice(&bytes).map_err(|e| {
                        ToolError::execution_failed(format!("memory entry {seq} is corrupt: {e}"))
                    })?;
                    visit(seq, meta);
                }
            }
            start = end + 1;
        }
        Ok(())
    }

    /// The texts of the writes `seqs`, in order.
    pub fn texts(&self, seqs: &[u64]) -> Result<Vec<String>, ToolError> {
        let mut texts = Vec::with_capacity(seqs.len());
        for page in seqs.chunks(PAGE as usize) {
            let keys: Vec<String> = page.iter().copied().map(text_key).collect();
            for value in batch::get_many(&self.bucket, &keys).map_err(failed)? {
                let bytes = value.map(|(_, v)| v).unwrap_or_default();
                texts.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        Ok(texts)
    }
}

fn meta_key(seq: u64) -> String {
    format!("e:{seq:012}")
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
