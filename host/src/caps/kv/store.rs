//! The key-value store over the shared state database: data keyed by (component, bucket,
//! key) so components never share data, and the bytes stored per component, held under the
//! component's quota. Every write is committed durably (redb `Durability::Immediate`, or a
//! PostgreSQL commit) before its call returns. Writes from concurrent calls are
//! group-committed: a writer thread takes everything queued, applies it in one transaction and
//! syncs once, so a hundred concurrent writers cost a few fsyncs (and one turn at the
//! cross-process lock), not a hundred.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::state_db::{KvTxn, StateDb, StateError};

/// Most writes applied in one transaction.
const MAX_GROUP: usize = 512;

/// Longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// Largest value accepted, in bytes.
pub const MAX_VALUE_BYTES: usize = 4 * 1024 * 1024;
/// Most keys in one batch call.
pub const MAX_BATCH_KEYS: usize = 1024;
/// Most keys one `list-keys` page returns.
pub const LIST_PAGE: usize = 1000;

/// Why a key-value operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// The bucket is not in the component's grant.
    #[error(
        "bucket `{bucket}` is not granted to this component (its manifest grants: {granted}); \
         add it to [capabilities.kv] buckets"
    )]
    NotGranted {
        /// The bucket asked for.
        bucket: String,
        /// The buckets granted, comma-separated.
        granted: String,
    },
    /// A key over [`MAX_KEY_BYTES`].
    #[error("key of {0} bytes is over the {MAX_KEY_BYTES}-byte limit")]
    KeyTooLong(usize),
    /// A value over [`MAX_VALUE_BYTES`].
    #[error("value of {0} bytes is over the {MAX_VALUE_BYTES}-byte limit")]
    ValueTooLarge(usize),
    /// A batch over [`MAX_BATCH_KEYS`].
    #[error("batch of {0} keys is over the {MAX_BATCH_KEYS}-key limit")]
    TooManyKeys(usize),
    /// `increment` on a value that is not a decimal counter.
    #[error("key `{0}` does not hold a decimal u64 counter")]
    NotACounter(String),
    /// `increment` past `u64::MAX`.
    #[error("incrementing key `{0}` overflows u64")]
    Overflow(String),
    /// The write would take the component past its byte quota; nothing of it was written.
    #[error(
        "this write would bring the key-value data of `{component}` to {would_be} bytes, over \
         its quota of {quota} bytes (keys plus values, all buckets); nothing was written. Delete \
         keys, or ask for more with [capabilities.kv] max_bytes (the policy's [kv] max_bytes \
         caps it)"
    )]
    QuotaExceeded {
        /// The component.
        component: String,
        /// Bytes the component would hold after the write.
        would_be: u64,
        /// Its quota.
        quota: u64,
    },
    /// The database failed.
    #[error("key-value storage failed: {0}")]
    Storage(String),
}

impl KvError {
    fn storage(e: impl std::fmt::Display) -> Self {
        Self::Storage(e.to_string())
    }
}

impl From<StateError> for KvError {
    fn from(e: StateError) -> Self {
        Self::storage(e)
    }
}

/// Where a key lives: the component's namespace and one of its buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The component's identity (`namespace/name`).
    pub component: Arc<str>,
    /// The bucket.
    pub bucket: Arc<str>,
    /// The most bytes (keys plus values, all buckets) the component may store.
    pub quota: u64,
}

/// One write, applied by the writer thread.
enum Op {
    Set(Vec<(String, Vec<u8>)>),
    Delete(Vec<String>),
    Increment(String, u64),
}

struct Job {
    place: Place,
    op: Op,
    reply: oneshot::Sender<Result<u64, KvError>>,
}

/// The store shared by every call of every component.
pub struct KvStore {
    db: Arc<StateDb>,
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for KvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvStore").finish_non_exhaustive()
    }
}

impl KvStore {
    /// A store over `db`, with its writer thread started. The database is not touched until
    /// the first call that needs it.
    pub fn new(db: Arc<StateDb>) -> Result<Self, KvError> {
        let (jobs, queue) = mpsc::channel();
        let writer_db = db.clone();
        let writer = std::thread::Builder::new()
            .name("chitin-kv-writer".into())
            .spawn(move || write_loop(&writer_db, &queue))
            .map_err(KvError::storage)?;
        Ok(Self {
            db,
            jobs: Some(jobs),
            writer: Some(writer),
        })
    }

    /// The value at `key`.
    pub fn get(&self, place: &Place, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        check_key(key)?;
        let mut values = self
            .db
            .kv_get_many(&place.component, &place.bucket, &[key])?;
        Ok(values.pop().flatten())
    }

    /// The values at `keys`, in order.
    pub fn get_many(
        &self,
        place: &Place,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        check_batch(keys.len())?;
        keys.iter().try_for_each(|k| check_key(k))?;
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        Ok(self
            .db
            .kv_get_many(&place.component, &place.bucket, &keys)?)
    }

    /// One page of the bucket's keys in order, from position `cursor`, and the cursor of the
    /// next page if there is one.
    pub fn list_keys(
        &self,
        place: &Place,
        cursor: u64,
    ) -> Result<(Vec<String>, Option<u64>), KvError> {
        let skip = usize::try_from(cursor).unwrap_or(usize::MAX);
        // One more than a page tells whether another page follows.
        let mut keys = self
            .db
            .kv_keys(&place.component, &place.bucket, skip, LIST_PAGE + 1)?;
        let more = keys.len() > LIST_PAGE;
        keys.truncate(LIST_PAGE);
        let next = more.then(|| cursor + keys.len() as u64);
        Ok((keys, next))
    }

    /// Sets `pairs` in one transaction.
    pub async fn set_many(
        &self,
        place: &Place,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> Result<(), KvError> {
        check_batch(pairs.len())?;
        for (key, value) in &pairs {
            check_key(key)?;
            if value.len() > MAX_VALUE_BYTES {
                return Err(KvError::ValueTooLarge(value.len()));
            }
        }
        self.write(place, Op::Set(pairs)).await.map(drop)
    }

    /// Deletes `keys` in one transaction; absent keys are skipped.
    pub async fn delete_many(&self, place: &Place, keys: Vec<String>) -> Result<(), KvError> {
        check_batch(keys.len())?;
        keys.iter().try_for_each(|k| check_key(k))?;
        self.write(place, Op::Delete(keys)).await.map(drop)
    }

    /// Adds `delta` to the decimal counter at `key` (absent counts as 0); the new value.
    pub async fn increment(&self, place: &Place, key: String, delta: u64) -> Result<u64, KvError> {
        check_key(&key)?;
        self.write(place, Op::Increment(key, delta)).await
    }

    async fn write(&self, place: &Place, op: Op) -> Result<u64, KvError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            place: place.clone(),
            op,
            reply,
        };
        let closed = || KvError::Storage("the key-value writer has stopped".into());
        self.jobs
            .as_ref()
            .ok_or_else(closed)?
            .send(job)
            .map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }
}

impl Drop for KvStore {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has committed what is queued; joining it
        // releases its handle on the database before anyone reopens it.
        self.jobs.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The writer thread: take a group of queued writes, apply them in one durable transaction,
/// answer each.
fn write_loop(db: &StateDb, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        match apply(db, &group) {
            Ok(results) => {
                for (job, result) in group.into_iter().zip(results) {
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                for job in group {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Applies a group in one durable transaction. A job that fails on its own (a bad counter,
/// over quota) changes nothing and fails alone; a storage failure fails the whole group, and
/// nothing of it is committed.
fn apply(db: &StateDb, group: &[Job]) -> Result<Vec<Result<u64, KvError>>, KvError> {
    db.kv_write(|txn| group.iter().map(|job| apply_job(txn, job)).collect())
}

/// One job inside the group's transaction: its quota is checked before anything is written.
/// The outer error is a storage failure (fails the group); the inner one is the job's own.
fn apply_job(txn: &mut dyn KvTxn, job: &Job) -> Result<Result<u64, KvError>, KvError> {
    let (c, b) = (&*job.place.component, &*job.place.bucket);
    let before = txn.usage(c)?;
    let mut after = before;
    let size = |key: &str, value: usize| (key.len() + value) as u64;
    let old_size = |txn: &mut dyn KvTxn, key: &str| -> Result<u64, KvError> {
        Ok(txn.get(c, b, key)?.map_or(0, |v| size(key, v.len())))
    };
    let counter = match &job.op {
        Op::Set(pairs) => {
            // A key set twice in one batch counts once, at its last value.
            let mut last: std::collections::HashMap<&str, usize> = Default::default();
            for (key, value) in pairs {
                last.insert(key.as_str(), value.len());
            }
            for (&key, &len) in &last {
                after = after - old_size(txn, key)?.min(after) + size(key, len);
            }
            None
        }
        Op::Delete(keys) => {
            let unique: std::collections::HashSet<&str> = keys.iter().map(String::as_str).collect();
            for key in unique {
                after -= old_size(txn, key)?.min(after);
            }
            None
        }
        Op::Increment(key, delta) => {
            let current = txn.get(c, b, key)?;
            let next = match next_counter(key, current.as_deref(), *delta) {
                Ok(next) => next,
                Err(e) => return Ok(Err(e)),
            };
            let old = current.map_or(0, |v| size(key, v.len()));
            after = after - old.min(after) + size(key, next.to_string().len());
            Some(next)
        }
    };
    if after > before && after > job.place.quota {
        return Ok(Err(KvError::QuotaExceeded {
            component: c.to_owned(),
            would_be: after,
            quota: job.place.quota,
        }));
    }
    let result = match &job.op {
        Op::Set(pairs) => {
            for (key, value) in pairs {
                txn.put(c, b, key, value)?;
            }
            0
        }
        Op::Delete(keys) => {
            for key in keys {
                txn.delete(c, b, key)?;
            }
            0
        }
        Op::Increment(key, _) => {
            let next = counter.unwrap_or_default();
            txn.put(c, b, key, next.to_string().as_bytes())?;
            next
        }
    };
    txn.set_usage(c, after)?;
    Ok(Ok(result))
}

/// The counter after adding `delta`; counters are decimal text, as in wasmtime's own
/// `wasi:keyvalue` implementation.
fn next_counter(key: &str, current: Option<&[u8]>, delta: u64) -> Result<u64, KvError> {
    let value = match current {
        None => 0,
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .ok_or_else(|| KvError::NotACounter(key.to_owned()))?,
    };
    value
        .checked_add(delta)
        .ok_or_else(|| KvError::Overflow(key.to_owned()))
}

fn check_key(key: &str) -> Result<(), KvError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(KvError::KeyTooLong(key.len()));
    }
    Ok(())
}

fn check_batch(n: usize) -> Result<(), KvError> {
    if n > MAX_BATCH_KEYS {
        return Err(KvError::TooManyKeys(n));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &std::path::Path) -> KvStore {
        KvStore::new(Arc::new(StateDb::new(path))).expect("store")
    }

    fn store() -> (tempfile::TempDir, KvStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir.path().join("kv.redb"));
        (dir, kv)
    }

    fn place(component: &str, bucket: &str) -> Place {
        Place {
            component: component.into(),
            bucket: bucket.into(),
            quota: u64::MAX,
        }
    }

    #[tokio::test]
    async fn components_and_buckets_are_separate() {
        let (_dir, kv) = store();
        let a = place("x/a", "memory");
        let b = place("x/b", "memory");
        let a2 = place("x/a", "other");
        kv.set_many(&a, vec![("k".into(), b"1".to_vec())])
            .await
            .unwrap();
        assert_eq!(kv.get(&a, "k").unwrap(), Some(b"1".to_vec()));
        assert_eq!(kv.get(&b, "k").unwrap(), None);
        assert_eq!(kv.get(&a2, "k").unwrap(), None);
        assert_eq!(kv.list_keys(&b, 0).unwrap(), (vec![], None));
        assert_eq!(kv.list_keys(&a, 0).unwrap(), (vec!["k".to_owned()], None));
    }

    #[tokio::test]
    async fn increments_count_and_refuse_non_counters() {
        let (_dir, kv) = store();
        let p = place("x/a", "b");
        assert_eq!(kv.increment(&p, "n".into(), 1).await, Ok(1));
        assert_eq!(kv.increment(&p, "n".into(), 5).await, Ok(6));
        kv.set_many(&p, vec![("s".into(), b"abc".to_vec())])
            .await
            .unwrap();
        assert_eq!(
            kv.increment(&p, "s".into(), 1).await,
            Err(KvError::NotACounter("s".into()))
        );
        kv.set_many(&p, vec![("m".into(), u64::MAX.to_string().into_bytes())])
            .await
            .unwrap();
        assert_eq!(
            kv.increment(&p, "m".into(), 1).await,
            Err(KvError::Overflow("m".into()))
        );
    }

    #[tokio::test]
    async fn list_keys_pages_in_order() {
        let (_dir, kv) = store();
        let p = place("x/a", "b");
        let pairs: Vec<_> = (0..1500).map(|i| (format!("{i:05}"), vec![])).collect();
        for chunk in pairs.chunks(MAX_BATCH_KEYS) {
            kv.set_many(&p, chunk.to_vec()).await.unwrap();
        }
        kv.set_many(&place("x/a", "c"), vec![("0".into(), vec![])])
            .await
            .unwrap();
        let (first, next) = kv.list_keys(&p, 0).unwrap();
        assert_eq!(first.len(), LIST_PAGE);
        assert_eq!(first[0], "00000");
        let (rest, end) = kv.list_keys(&p, next.unwrap()).unwrap();
        assert_eq!(rest.len(), 500);
        assert_eq!(rest[499], "01499");
        assert_eq!(end, None);
        assert_eq!(kv.list_keys(&p, u64::MAX).unwrap(), (vec![], None));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_increments_lose_nothing_and_survive_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kv.redb");
        {
            let kv = Arc::new(open(&path));
            let p = place("x/a", "b");
            let tasks: Vec<_> = (0..200)
                .map(|_| {
                    let (kv, p) = (kv.clone(), p.clone());
                    tokio::spawn(async move { kv.increment(&p, "n".into(), 1).await })
                })
                .collect();
            let mut seen = Vec::new();
            for t in tasks {
                seen.push(t.await.unwrap().unwrap());
            }
            seen.sort_unstable();
            assert_eq!(seen, (1..=200).collect::<Vec<_>>());
        }
        let kv = open(&path);
        assert_eq!(
            kv.get(&place("x/a", "b"), "n").unwrap(),
            Some(b"200".to_vec())
        );
    }

    #[tokio::test]
    async fn oversized_keys_values_and_batches_are_refused() {
        let (_dir, kv) = store();
        let p = place("x/a", "b");
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert_eq!(
            kv.get(&p, &long),
            Err(KvError::KeyTooLong(MAX_KEY_BYTES + 1))
        );
        let big = vec![0u8; MAX_VALUE_BYTES + 1];
        assert!(matches!(
            kv.set_many(&p, vec![("k".into(), big)]).await,
            Err(KvError::ValueTooLarge(_))
        ));
        let keys: Vec<String> = (0..=MAX_BATCH_KEYS).map(|i| i.to_string()).collect();
        assert!(matches!(
            kv.get_many(&p, &keys),
            Err(KvError::TooManyKeys(_))
        ));
    }
}
