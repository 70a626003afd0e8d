//! One storage suite, run against both backends of the state database: the embedded SQLite file
//! and a throwaway PostgreSQL server. The key-value semantics the memory component relies on,
//! durability (a second handle, as another process or replica would be, reads what the first
//! committed), per-component namespaces and quotas, approvals, secrets (ciphertext only) and
//! shared rate limits.

use crate::postgres;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chitin_host::caps::http::rate::{RateLimiter, RateLimits};
use chitin_host::caps::kv::{KvError, KvStore, Place};
use chitin_host::remembered_approvals::{Approval, ApprovalStore};
use chitin_host::secrets::{MasterKey, SecretStore};
use chitin_host::state_db::{Records, StateDb, StateUrl};
use postgres::Postgres;

/// Where a test's state lives; each `open` is a separate handle, as another process would hold.
enum Backend {
    Embedded(tempfile::TempDir),
    Postgres(Postgres),
}

impl Backend {
    fn open(&self) -> Arc<StateDb> {
        Arc::new(match self {
            Self::Embedded(dir) => StateDb::new(&dir.path().join("chitin.db")),
            Self::Postgres(pg) => {
                let url = StateUrl::parse(&pg.url(), false).expect("url");
                StateDb::open(
                    std::path::Path::new("unused"),
                    std::path::Path::new("unused"),
                    Some(&url),
                )
                .expect("postgres")
            }
        })
    }
}

/// Run `test` on the SQLite file, then on PostgreSQL.
async fn both<F, Fut>(test: F)
where
    F: Fn(Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    test(Backend::Embedded(tempfile::tempdir().expect("tempdir"))).await;
    test(Backend::Postgres(Postgres::start())).await;
}

/// A master key of 32 bytes `byte`, as `CHITIN_SECRETS_KEY` would give it.
fn key(byte: &str) -> MasterKey {
    MasterKey::load(std::path::Path::new("/nonexistent"), Some(&byte.repeat(32))).expect("key")
}

fn place(component: &str, bucket: &str, quota: u64) -> Place {
    Place {
        component: component.into(),
        bucket: bucket.into(),
        quota,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_semantics_match_on_both_backends() {
    both(|backend| async move {
        let kv = KvStore::new(backend.open()).expect("store");
        let p = place("x/a", "memory", u64::MAX);
        assert_eq!(kv.get(&p, "absent").unwrap(), None);
        kv.set_many(
            &p,
            vec![("b".into(), b"2".to_vec()), ("a".into(), b"1".to_vec())],
        )
        .await
        .unwrap();
        assert_eq!(
            kv.get_many(&p, &["a".into(), "zz".into(), "b".into()])
                .unwrap(),
            [Some(b"1".to_vec()), None, Some(b"2".to_vec())]
        );
        // Keys list in bytewise order, paged.
        let pairs: Vec<_> = (0..1100).map(|i| (format!("k{i:05}"), vec![])).collect();
        kv.set_many(&p, pairs[..1000].to_vec()).await.unwrap();
        kv.set_many(&p, pairs[1000..].to_vec()).await.unwrap();
        kv.set_many(&p, vec![("B".into(), vec![]), ("é".into(), vec![])])
            .await
            .unwrap();
        let (first, next) = kv.list_keys(&p, 0).unwrap();
        assert_eq!(&first[..4], ["B", "a", "b", "k00000"]);
        let (rest, end) = kv.list_keys(&p, next.expect("a second page")).unwrap();
        assert_eq!(first.len() + rest.len(), 1104);
        assert_eq!(rest.last().map(String::as_str), Some("é"));
        assert_eq!(end, None);
        kv.delete_many(&p, vec!["a".into(), "never".into()])
            .await
            .unwrap();
        assert_eq!(kv.get(&p, "a").unwrap(), None);
        // Counters are decimal text.
        assert_eq!(kv.increment(&p, "n".into(), 2).await, Ok(2));
        assert_eq!(kv.increment(&p, "n".into(), 3).await, Ok(5));
        assert_eq!(kv.get(&p, "n").unwrap(), Some(b"5".to_vec()));
        assert_eq!(
            kv.increment(&p, "B".into(), 1).await,
            Err(KvError::NotACounter("B".into()))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_and_buckets_are_separate_namespaces() {
    both(|backend| async move {
        let kv = KvStore::new(backend.open()).expect("store");
        let a = place("x/a", "memory", u64::MAX);
        let b = place("x/b", "memory", u64::MAX);
        let a2 = place("x/a", "other", u64::MAX);
        kv.set_many(&a, vec![("k".into(), b"1".to_vec())])
            .await
            .unwrap();
        assert_eq!(kv.get(&b, "k").unwrap(), None);
        assert_eq!(kv.get(&a2, "k").unwrap(), None);
        assert_eq!(kv.list_keys(&b, 0).unwrap(), (vec![], None));
        assert_eq!(kv.list_keys(&a, 0).unwrap(), (vec!["k".to_owned()], None));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_fail_whole_writes_and_keep_earlier_data() {
    both(|backend| async move {
        let kv = KvStore::new(backend.open()).expect("store");
        let p = place("x/a", "b", 100);
        let other = place("x/a", "c", 100);
        kv.set_many(&p, vec![("a".into(), vec![1; 49])])
            .await
            .expect("50 bytes fit");
        let err = kv
            .set_many(
                &other,
                vec![("b".into(), vec![2; 10]), ("c".into(), vec![3; 49])],
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                KvError::QuotaExceeded {
                    would_be: 111,
                    quota: 100,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(kv.get(&other, "b").unwrap(), None, "nothing half-written");
        assert_eq!(kv.get(&p, "a").unwrap(), Some(vec![1; 49]));
        // Replacing a value counts the difference; deleting frees its bytes.
        kv.set_many(&p, vec![("a".into(), vec![1; 99])])
            .await
            .expect("100 bytes fit exactly");
        kv.delete_many(&p, vec!["a".into()]).await.unwrap();
        kv.set_many(&other, vec![("b".into(), vec![2; 90])])
            .await
            .expect("fits once freed");
        kv.set_many(&place("x/z", "b", 100), vec![("z".into(), vec![0; 90])])
            .await
            .expect("another component has its own quota");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_durable_and_seen_by_another_handle_and_none_is_lost() {
    both(|backend| async move {
        let p = place("x/a", "b", u64::MAX);
        let (one, two) = (
            Arc::new(KvStore::new(backend.open()).expect("store")),
            Arc::new(KvStore::new(backend.open()).expect("store")),
        );
        // Two handles (two processes, or two replicas) increment one counter at once.
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let (kv, p) = (if i % 2 == 0 { &one } else { &two }.clone(), p.clone());
                tokio::spawn(async move { kv.increment(&p, "n".into(), 1).await })
            })
            .collect();
        let mut seen = Vec::new();
        for t in tasks {
            seen.push(t.await.expect("task").expect("increment"));
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..=100).collect::<Vec<_>>());
        drop((one, two));
        let fresh = KvStore::new(backend.open()).expect("store");
        assert_eq!(fresh.get(&p, "n").unwrap(), Some(b"100".to_vec()));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_revoked_through_one_handle_are_gone_for_the_other() {
    both(|backend| async move {
        let (a, b) = (
            ApprovalStore::new(backend.open()),
            ApprovalStore::new(backend.open()),
        );
        let approval = Approval {
            component: "acme/w".into(),
            tool: "forecast".into(),
            version: "1.0.0".into(),
            hash: "h".into(),
            grant: "g".into(),
            user: "u".into(),
            holder: None,
            approved_at: 1,
        };
        a.remember(&approval).unwrap();
        assert!(b.covers("acme/w", "forecast", "h", "g", None).unwrap());
        assert_eq!(b.revoke("acme/w").unwrap(), ["acme/w/forecast"]);
        assert!(!a.covers("acme/w", "forecast", "h", "g", None).unwrap());
        assert!(a.list().unwrap().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_stored_only_as_ciphertext() {
    both(|backend| async move {
        let first = key("11");
        let db = backend.open();
        let store = SecretStore::with_key(db.clone(), first).expect("store");
        store.set("API_TOKEN", "plain-value-xyz").unwrap();
        let other_key = key("11");
        let other = SecretStore::with_key(backend.open(), other_key).expect("store");
        assert_eq!(
            other
                .get("API_TOKEN")
                .unwrap()
                .as_deref()
                .map(String::as_str),
            Some("plain-value-xyz")
        );
        let raw = db
            .record_get(Records::Secrets, "API_TOKEN")
            .unwrap()
            .expect("stored");
        assert!(
            !raw.windows(15).any(|w| w == b"plain-value-xyz"),
            "the database holds the plaintext"
        );
        let wrong = SecretStore::with_key(backend.open(), key("22")).expect("store");
        assert!(wrong.get("API_TOKEN").is_err(), "a wrong key is refused");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_shared_between_handles() {
    both(|backend| async move {
        let (a, b) = (
            RateLimiter::new(backend.open()),
            RateLimiter::new(backend.open()),
        );
        let limits = RateLimits {
            per_minute: 3,
            per_hour: 10,
        };
        let t0 = SystemTime::now();
        a.check("u", "http", limits, t0).expect("1");
        b.check("u", "http", limits, t0 + Duration::from_millis(1))
            .expect("2");
        a.check("u", "http", limits, t0 + Duration::from_millis(2))
            .expect("3");
        let refused = b.check("u", "http", limits, t0 + Duration::from_millis(3));
        assert!(refused.is_err(), "the fourth in a minute, on either handle");
        b.check("other", "http", limits, t0).expect("another user");
    })
    .await;
}

/// The installed set replicas share lives only in PostgreSQL: every change raises the
/// generation another handle reads, and a change made against a stale view of a component is
/// refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_installed_set_has_generations_and_refuses_lost_updates() {
    use chitin_host::installed::shared::{SharedError, SharedSet};
    use chitin_registry::lockfile::Locked;

    let backend = Backend::Postgres(Postgres::start());
    let (one, other) = (backend.open(), backend.open());
    let (one, other) = (
        SharedSet::new(one.postgres().expect("postgres")),
        SharedSet::new(other.postgres().expect("postgres")),
    );
    assert_eq!(other.generation().expect("generation"), 0);
    assert!(other.lock().expect("lock").1.components.is_empty());
    let entry = |version: &str, hash: &str| Locked {
        name: "acme/words".into(),
        version: version.parse().expect("version"),
        registry: "lab".into(),
        file: format!("acme__words-{hash}.wasm"),
        hash: format!("blake3:{hash}"),
        digest: "sha256:00".into(),
        signers: vec!["SHA256:k".into()],
        manifest_hash: "blake3:11".into(),
        grants: Vec::new(),
        approved_at: "2026-11-24T00:00:00Z".into(),
    };
    let v1 = entry("1.0.0", "aa");
    assert_eq!(one.commit(&v1, None).expect("first install"), 1);
    let (generation, lock) = other.lock().expect("lock");
    assert_eq!(generation, 1);
    assert_eq!(lock.get("acme/words"), Some(&v1));

    // Both saw 1.0.0; the first update wins, the second is refused and changes nothing.
    let v2 = entry("1.1.0", "bb");
    assert_eq!(one.commit(&v2, Some(&v1)).expect("update"), 2);
    let err = other.commit(&entry("1.2.0", "cc"), Some(&v1)).unwrap_err();
    assert!(matches!(err, SharedError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("run the command again"), "{err}");
    assert_eq!(other.lock().expect("lock").1.get("acme/words"), Some(&v2));
    assert_eq!(other.generation().expect("generation"), 2);

    let (removed, generation) = other.remove("acme/words").expect("remove").expect("there");
    assert_eq!((removed, generation), (v2, 3));
    assert!(one.remove("acme/words").expect("remove").is_none());
    assert!(one.lock().expect("lock").1.components.is_empty());
    assert_eq!(one.generation().expect("generation"), 3);
}
