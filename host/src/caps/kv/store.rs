//! The key-value store over the shared state database: data keyed by (component, bucket,
//! key) so components never share data, and the bytes stored per component, held under the
//! component's quota. Every write is committed durably (a synced SQLite commit, or a
//! PostgreSQL commit) before its call returns. Writes from concurrent calls are
//! group-committed: a writer thread takes everything queued, applies it in one transaction and
//! syncs once, so a hundred concurrent writers cost a few fsyncs (and one turn at the
//! cross-process lock), not a hundred.
//!
//! An `increment` is answered as soon as it is applied, and its transaction stays open for the
//! call's next write (at most [`LINGER`]): a counter that numbers a record and the record
//! itself then commit together, one durable commit instead of two. Nobody outside the call can
//! see the number before it is committed (the transaction holds the database's write lock);
//! the call's later reads wait for the commit, a later write is refused if the commit failed,
//! and the call's result waits for it too ([`KvStore::settle`]), so durability before the call
//! returns is unchanged. Only for the embedded database, whose transactions run once: a
//! PostgreSQL transaction may be retried, which could change a number already handed out.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::state_db::{KvTxn, StateDb, StateError};

/// Most writes applied in one transaction.
const MAX_GROUP: usize = 512;
/// Longest an applied `increment` keeps its transaction open waiting for the call's next
/// write. Other writers (in this process and others) wait at most this long for the lock.
pub const LINGER: Duration = Duration::from_millis(2);
/// How many transactions back the writer remembers a failed commit; a call's write that
/// depends on an older one is refused (fails closed).
const FAILED_MEMORY: u64 = 4096;

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

/// One write to a bucket.
#[derive(Debug)]
pub enum Write {
    /// Set these pairs.
    Set(Vec<(String, Vec<u8>)>),
    /// Delete these keys (absent ones are skipped).
    Delete(Vec<String>),
    /// Add to the decimal counter at this key.
    Increment(String, u64),
}

impl Write {
    /// Refuses keys, values and batches over the limits.
    fn check(&self) -> Result<(), KvError> {
        match self {
            Self::Set(pairs) => {
                check_batch(pairs.len())?;
                for (key, value) in pairs {
                    check_key(key)?;
                    if value.len() > MAX_VALUE_BYTES {
                        return Err(KvError::ValueTooLarge(value.len()));
                    }
                }
                Ok(())
            }
            Self::Delete(keys) => {
                check_batch(keys.len())?;
                keys.iter().try_for_each(|k| check_key(k))
            }
            Self::Increment(key, _) => check_key(key),
        }
    }
}

struct Job {
    place: Place,
    op: Write,
    /// The transaction of the call's write still being committed when this one was sent: this
    /// one is applied only if that one committed (or is the same transaction).
    after: Option<u64>,
    /// Where an `increment` is answered before its commit (value, transaction), when the
    /// writer keeps the transaction open.
    early: Option<oneshot::Sender<(u64, u64)>>,
    reply: oneshot::Sender<Result<u64, KvError>>,
}

/// What the writer thread is sent.
enum Msg {
    Job(Job),
    /// Commit transaction `n` now if it is still open: its call waits for it.
    Flush(u64),
}

/// A call's write applied in a transaction that had not committed when the call went on; the
/// call settles it before its result is given out.
#[derive(Debug)]
pub struct Unsettled {
    txn: u64,
    committed: oneshot::Receiver<Result<u64, KvError>>,
}

/// The store shared by every call of every component.
pub struct KvStore {
    db: Arc<StateDb>,
    jobs: Option<mpsc::Sender<Msg>>,
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
        Self::with_linger(db, LINGER)
    }

    fn with_linger(db: Arc<StateDb>, linger: Duration) -> Result<Self, KvError> {
        let (jobs, queue) = mpsc::channel();
        let writer_db = db.clone();
        let writer = std::thread::Builder::new()
            .name("chitin-kv-writer".into())
            .spawn(move || Writer::new(&writer_db, queue, linger).run())
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

    /// Sets `pairs` in one transaction, committed before it returns.
    pub async fn set_many(
        &self,
        place: &Place,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> Result<(), KvError> {
        self.write(place, Write::Set(pairs), &mut None)
            .await
            .map(drop)
    }

    /// Deletes `keys` in one transaction, committed before it returns; absent keys are
    /// skipped.
    pub async fn delete_many(&self, place: &Place, keys: Vec<String>) -> Result<(), KvError> {
        self.write(place, Write::Delete(keys), &mut None)
            .await
            .map(drop)
    }

    /// Adds `delta` to the decimal counter at `key` (absent counts as 0); the new value,
    /// committed before it returns.
    pub async fn increment(&self, place: &Place, key: String, delta: u64) -> Result<u64, KvError> {
        let mut unsettled = None;
        let value = self
            .write(place, Write::Increment(key, delta), &mut unsettled)
            .await?;
        self.settle(&mut unsettled).await?;
        Ok(value)
    }

    /// One write of a call whose earlier write may be `unsettled`; the new value for an
    /// increment, 0 otherwise. Sets and deletes are committed before they return (and the
    /// unsettled write with them); an increment may come back applied but not committed, and
    /// then leaves its commit in `unsettled` for the call's next write to join or the call to
    /// settle.
    pub async fn write(
        &self,
        place: &Place,
        write: Write,
        unsettled: &mut Option<Unsettled>,
    ) -> Result<u64, KvError> {
        write.check()?;
        let after = self.pending_txn(unsettled)?;
        let (reply, committed) = oneshot::channel();
        let (early, answered) = match write {
            Write::Increment(..) => {
                let (early, answered) = oneshot::channel();
                (Some(early), Some(answered))
            }
            Write::Set(_) | Write::Delete(_) => (None, None),
        };
        self.send(Msg::Job(Job {
            place: place.clone(),
            op: write,
            after,
            early,
            reply,
        }))?;
        if let Some(answered) = answered
            && let Ok((value, txn)) = answered.await
        {
            *unsettled = Some(Unsettled { txn, committed });
            return Ok(value);
        }
        let result = committed.await.map_err(|_| stopped())?;
        // Committed with or after the unsettled write, which the writer checked had committed.
        if result.is_ok() {
            *unsettled = None;
        }
        result
    }

    /// Waits for the call's unsettled write to commit; its failure, if it failed.
    pub async fn settle(&self, unsettled: &mut Option<Unsettled>) -> Result<(), KvError> {
        let Some(pending) = unsettled.take() else {
            return Ok(());
        };
        // The writer may be holding the transaction open for a write that will not come.
        self.send(Msg::Flush(pending.txn))?;
        pending.committed.await.map_err(|_| stopped())?.map(drop)
    }

    /// The transaction of the call's unsettled write, if it has not committed yet; its
    /// failure if it failed.
    fn pending_txn(&self, unsettled: &mut Option<Unsettled>) -> Result<Option<u64>, KvError> {
        let Some(pending) = unsettled.as_mut() else {
            return Ok(None);
        };
        match pending.committed.try_recv() {
            Ok(result) => {
                *unsettled = None;
                result.map(|_| None)
            }
            Err(oneshot::error::TryRecvError::Empty) => Ok(Some(pending.txn)),
            Err(oneshot::error::TryRecvError::Closed) => {
                *unsettled = None;
                Err(stopped())
            }
        }
    }

    fn send(&self, msg: Msg) -> Result<(), KvError> {
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(msg)
            .map_err(|_| stopped())
    }
}

fn stopped() -> KvError {
    KvError::Storage("the key-value writer has stopped".into())
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

/// The writer thread's state: the queue, the number of the current transaction, and the
/// recent transactions that failed to commit.
struct Writer<'a> {
    db: &'a StateDb,
    /// Behind a mutex only so the transaction's closure (which must be `Send`) can wait on it.
    queue: Mutex<mpsc::Receiver<Msg>>,
    txn: u64,
    failed: BTreeSet<u64>,
    /// Whether an `increment` may be answered before its commit (see the module docs).
    lingers: bool,
    /// How long a transaction stays open after an early answer ([`LINGER`]).
    linger: Duration,
}

impl<'a> Writer<'a> {
    fn new(db: &'a StateDb, queue: mpsc::Receiver<Msg>, linger: Duration) -> Self {
        Self {
            db,
            queue: Mutex::new(queue),
            txn: 0,
            failed: BTreeSet::new(),
            lingers: db.runs_transactions_once(),
            linger,
        }
    }

    /// Take a group of queued writes, apply them in one durable transaction (held open a
    /// little for the next write after an early-answered `increment`), answer each.
    fn run(mut self) {
        loop {
            let first = match self.recv(None) {
                Some(Msg::Job(job)) => job,
                // A flush of a transaction already committed.
                Some(Msg::Flush(_)) => continue,
                None => break,
            };
            self.txn += 1;
            let mut group = vec![first];
            self.drain(&mut group);
            let outcome = {
                let this = &self;
                let group = &mut group;
                self.db.kv_write(|txn| this.apply(txn, group))
            };
            match outcome {
                Ok(results) => {
                    for (job, result) in group.into_iter().zip(results) {
                        let _ = job.reply.send(result);
                    }
                }
                Err(e) => {
                    self.failed.insert(self.txn);
                    for job in group {
                        let _ = job.reply.send(Err(e.clone()));
                    }
                }
            }
            let oldest = self.txn.saturating_sub(FAILED_MEMORY);
            self.failed = self.failed.split_off(&oldest);
        }
    }

    /// The next message; `None` when the queue has closed, or at `until`.
    fn recv(&self, until: Option<Instant>) -> Option<Msg> {
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        match until {
            None => queue.recv().ok(),
            Some(until) => queue
                .recv_timeout(until.saturating_duration_since(Instant::now()))
                .ok(),
        }
    }

    /// Add what is queued to `group`, up to [`MAX_GROUP`]; flushes are dropped (the group is
    /// about to commit anyway).
    fn drain(&self, group: &mut Vec<Job>) {
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(Msg::Job(job)) => group.push(job),
                Ok(Msg::Flush(_)) => {}
                Err(_) => break,
            }
        }
    }

    /// Apply `group` in `txn`. While the last job applied is an `increment` answered early,
    /// wait (until [`LINGER`] after the first such answer) for the next write to join, a flush
    /// of this transaction, or the queue to close.
    fn apply(
        &self,
        txn: &mut dyn KvTxn,
        group: &mut Vec<Job>,
    ) -> Result<Vec<Result<u64, KvError>>, KvError> {
        let mut results = Vec::with_capacity(group.len());
        let mut until = None;
        loop {
            let mut open = false;
            for job in &mut group[results.len()..] {
                let result = self.apply_job(txn, job)?;
                open = false;
                if let (Ok(value), Some(early)) = (&result, job.early.take())
                    && self.lingers
                    && early.send((*value, self.txn)).is_ok()
                {
                    open = true;
                    until.get_or_insert_with(|| Instant::now() + self.linger);
                }
                results.push(result);
            }
            if !open || group.len() >= MAX_GROUP {
                return Ok(results);
            }
            loop {
                match self.recv(until) {
                    Some(Msg::Job(job)) => {
                        group.push(job);
                        self.drain(group);
                        break;
                    }
                    Some(Msg::Flush(n)) if n == self.txn => return Ok(results),
                    Some(Msg::Flush(_)) => {}
                    None => return Ok(results),
                }
            }
        }
    }

    /// One job, unless it depends on a transaction that failed (or is too old to tell).
    fn apply_job(&self, txn: &mut dyn KvTxn, job: &Job) -> Result<Result<u64, KvError>, KvError> {
        if let Some(after) = job.after
            && after != self.txn
            && (self.failed.contains(&after) || after + FAILED_MEMORY < self.txn)
        {
            return Ok(Err(KvError::Storage(
                "an earlier write of this call was not committed, so this one was not applied"
                    .into(),
            )));
        }
        apply_job(txn, job)
    }
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
        Write::Set(pairs) => {
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
        Write::Delete(keys) => {
            let unique: std::collections::HashSet<&str> = keys.iter().map(String::as_str).collect();
            for key in unique {
                after -= old_size(txn, key)?.min(after);
            }
            None
        }
        Write::Increment(key, delta) => {
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
        Write::Set(pairs) => {
            for (key, value) in pairs {
                txn.put(c, b, key, value)?;
            }
            0
        }
        Write::Delete(keys) => {
            for key in keys {
                txn.delete(c, b, key)?;
            }
            0
        }
        Write::Increment(key, _) => {
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
        let kv = open(&dir.path().join("kv.sqlite"));
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
        let path = dir.path().join("kv.sqlite");
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

    /// Polls `f` until it holds, for at most 10 s.
    async fn eventually(mut f: impl FnMut() -> bool) -> bool {
        for _ in 0..1000 {
            if f() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn an_increment_and_the_calls_next_write_commit_together() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kv.sqlite");
        // A linger far longer than the test, so only the next write can end the transaction.
        let kv = KvStore::with_linger(Arc::new(StateDb::new(&path)), Duration::from_secs(60))
            .expect("store");
        // Another process's view of the same file.
        let other = StateDb::new(&path);
        let read = |key: &str| other.kv_get_many("x/a", "b", &[key]).expect("read")[0].clone();
        let p = place("x/a", "b");
        // Opened before the transaction below: opening a file takes the writer's lock.
        assert_eq!(read("n"), None);

        let mut unsettled = None;
        let n = kv
            .write(&p, Write::Increment("n".into(), 1), &mut unsettled)
            .await
            .expect("increment");
        assert_eq!(n, 1);
        assert!(unsettled.is_some(), "answered before its commit");
        assert_eq!(
            read("n"),
            None,
            "nobody else sees the number before it commits"
        );

        let record = vec![("e:1".to_owned(), b"entry".to_vec())];
        kv.write(&p, Write::Set(record), &mut unsettled)
            .await
            .expect("set");
        assert!(
            unsettled.is_none(),
            "the set committed the increment with it"
        );
        assert_eq!(read("n"), Some(b"1".to_vec()));
        assert_eq!(read("e:1"), Some(b"entry".to_vec()));
    }

    #[tokio::test]
    async fn a_lone_increment_commits_when_settled_or_when_the_linger_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kv.sqlite");
        let other = StateDb::new(&path);
        let read = |key: &str| other.kv_get_many("x/a", "b", &[key]).expect("read")[0].clone();
        let p = place("x/a", "b");

        let kv = KvStore::with_linger(Arc::new(StateDb::new(&path)), Duration::from_secs(60))
            .expect("store");
        let mut unsettled = None;
        kv.write(&p, Write::Increment("n".into(), 5), &mut unsettled)
            .await
            .expect("increment");
        // Settling flushes the open transaction rather than waiting out the linger.
        tokio::time::timeout(Duration::from_secs(10), kv.settle(&mut unsettled))
            .await
            .expect("settled without waiting for the linger")
            .expect("committed");
        assert_eq!(read("n"), Some(b"5".to_vec()));
        // A read of the call after its increment sees it.
        kv.write(&p, Write::Increment("n".into(), 1), &mut unsettled)
            .await
            .expect("increment");
        kv.settle(&mut unsettled).await.expect("committed");
        assert_eq!(kv.get(&p, "n").expect("get"), Some(b"6".to_vec()));
        drop(kv);

        // A call that never settles (it trapped, say) holds the lock no longer than the linger.
        let kv = KvStore::with_linger(Arc::new(StateDb::new(&path)), Duration::from_millis(20))
            .expect("store");
        let mut abandoned = None;
        kv.write(&p, Write::Increment("n".into(), 1), &mut abandoned)
            .await
            .expect("increment");
        assert!(eventually(|| read("n") == Some(b"7".to_vec())).await);
    }

    #[test]
    fn a_write_after_a_failed_commit_of_its_call_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = StateDb::new(&dir.path().join("kv.sqlite"));
        let (_jobs, queue) = mpsc::channel();
        let mut writer = Writer::new(&db, queue, LINGER);
        writer.txn = 5;
        writer.failed.insert(4);
        let job = |after| Job {
            place: place("x/a", "b"),
            op: Write::Set(vec![("e:1".into(), b"entry".to_vec())]),
            after,
            early: None,
            reply: oneshot::channel().0,
        };
        let refused = db
            .kv_write(|txn| writer.apply_job(txn, &job(Some(4))))
            .expect("transaction");
        assert!(
            matches!(&refused, Err(KvError::Storage(m)) if m.contains("not committed")),
            "{refused:?}"
        );
        assert_eq!(db.kv_get_many("x/a", "b", &["e:1"]).expect("read"), [None]);
        // Too old to tell: refused as well.
        writer.txn = 4 + FAILED_MEMORY + 2;
        let too_old = db.kv_write(|txn| writer.apply_job(txn, &job(Some(3))));
        assert!(matches!(too_old, Ok(Err(KvError::Storage(_)))));
        // After a committed transaction, or joining the open one: applied.
        writer.txn = 5;
        for after in [Some(3), Some(5), None] {
            let applied = db.kv_write(|txn| writer.apply_job(txn, &job(after)));
            assert_eq!(applied, Ok(Ok(0)));
        }
        assert_eq!(
            db.kv_get_many("x/a", "b", &["e:1"]).expect("read"),
            [Some(b"entry".to_vec())]
        );
    }
}
