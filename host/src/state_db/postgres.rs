//! The PostgreSQL backend, for replicas on several machines sharing one database
//! (`chitin serve --state-url postgres://…`).
//!
//! The synchronous `postgres` client (the `tokio-postgres` author's blocking wrapper) keeps the
//! seam synchronous like the embedded store; it runs its own small runtime per connection, so
//! calls made from inside the host's tokio runtime run on a scoped thread. A few connections
//! are kept idle for reuse; a connection that failed is dropped and the next call connects
//! again, so a restarted database is picked up on its own. The schema is versioned and
//! migrated on the first connection, under an advisory lock so replicas starting together
//! migrate once. Every statement runs in a transaction committed before the call returns
//! (PostgreSQL's `synchronous_commit` makes that durable). Keys are compared bytewise (`"C"`
//! collation, `bytea`), as the embedded SQLite file does.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::config::{Host, SslMode};
use postgres::error::SqlState;
use postgres::{Client, Statement, Transaction};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{KvTxn, Records, StateError};

/// Environment variable holding the state URL (the only place a password may be given).
pub const STATE_URL_ENV: &str = "CHITIN_STATE_URL";
/// Environment variable naming a PEM file of CA certificates for the database's TLS, beside
/// the public roots.
pub const STATE_CA_ENV: &str = "CHITIN_STATE_CA";

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 8;
/// A connection idle for longer is checked before it is used.
const CHECK_AFTER: Duration = Duration::from_secs(2);
/// Bound on connecting, on each statement and on waiting for a row lock, so a stuck database
/// fails calls instead of hanging them.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const SESSION_OPTIONS: &str = "-c statement_timeout=10000 -c lock_timeout=5000";
/// Tries of a transaction that lost a deadlock or a serialisation conflict.
const TRIES: usize = 4;
/// The advisory lock migrations take (any constant unlikely to clash: "chitin" in ASCII).
const MIGRATION_LOCK: i64 = 0x6368_6974_696e;

/// The schema, one entry per version; applied in order, each once. Never edit an entry that
/// shipped: add the next one.
const MIGRATIONS: &[&str] = &[
    // 1: the tables of issue 18.
    r#"
    CREATE TABLE chitin_kv (
        component text COLLATE "C" NOT NULL,
        bucket text COLLATE "C" NOT NULL,
        key bytea NOT NULL,
        value bytea NOT NULL,
        PRIMARY KEY (component, bucket, key));
    CREATE TABLE chitin_kv_usage (
        component text COLLATE "C" PRIMARY KEY,
        bytes bigint NOT NULL);
    CREATE TABLE chitin_records (
        tbl text COLLATE "C" NOT NULL,
        key text COLLATE "C" NOT NULL,
        value bytea NOT NULL,
        PRIMARY KEY (tbl, key));
    CREATE TABLE chitin_http_rate (
        usr text COLLATE "C" NOT NULL,
        tool text COLLATE "C" NOT NULL,
        stamps bytea NOT NULL,
        PRIMARY KEY (usr, tool));
    "#,
    // 2: the installed set shared by replicas: one lockfile, and a generation counter that
    // every change raises, which replicas poll.
    r#"
    CREATE TABLE chitin_installed (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        generation bigint NOT NULL,
        lockfile text NOT NULL);
    "#,
];

/// A state URL that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateUrlError {
    /// A password on the command line, where every user of the machine can read it.
    #[error(
        "--state-url holds a password, and command lines are visible to every user of the \
         machine (`ps`); put the URL in the environment instead: CHITIN_STATE_URL='postgres://…' \
         (or the password alone in PGPASSWORD)"
    )]
    PasswordInArgv,
    /// Not a `postgres://` or `postgresql://` URL.
    #[error("state URL must start with postgres:// or postgresql:// (got `{0}`)")]
    Scheme(String),
    /// The URL does not parse.
    #[error("state URL does not parse: {0}")]
    Parse(String),
    /// The CA file for the database's TLS cannot be used.
    #[error("{STATE_CA_ENV} {path}: {reason}", path = path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration for the state database: {0}")]
    Tls(String),
}

/// Where the shared state lives: a parsed `postgres://` URL.
#[derive(Clone)]
pub struct StateUrl {
    config: postgres::Config,
    target: String,
}

impl std::fmt::Debug for StateUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the password: show only the target.
        f.debug_tuple("StateUrl").field(&self.target).finish()
    }
}

impl StateUrl {
    /// Parse `text`; `on_argv` says it came from the command line, where a password is refused.
    /// Without a password in the URL, `PGPASSWORD` supplies one. TLS is required for any host
    /// but a loopback address or a Unix socket unless the URL says `sslmode=disable`.
    pub fn parse(text: &str, on_argv: bool) -> Result<Self, StateUrlError> {
        let scheme_ok = ["postgres://", "postgresql://"]
            .iter()
            .any(|s| text.starts_with(s));
        if !scheme_ok {
            let shown: String = text.chars().take_while(|c| *c != ':').collect();
            return Err(StateUrlError::Scheme(format!("{shown}:…")));
        }
        let mut config = postgres::Config::from_str(text)
            // The parser's messages never echo the password.
            .map_err(|e| StateUrlError::Parse(e.to_string()))?;
        if config.get_password().is_some() && on_argv {
            return Err(StateUrlError::PasswordInArgv);
        }
        if config.get_password().is_none()
            && let Ok(password) = std::env::var("PGPASSWORD")
        {
            config.password(password);
        }
        let local = config.get_hosts().iter().all(|h| match h {
            Host::Unix(_) => true,
            Host::Tcp(name) => {
                name == "localhost"
                    || name
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        });
        let explicit_mode = text.contains("sslmode=");
        if !local && !explicit_mode {
            config.ssl_mode(SslMode::Require);
        }
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .options(SESSION_OPTIONS)
            .application_name("chitin");
        let target = target_of(&config);
        Ok(Self { config, target })
    }

    /// The server and database, without credentials.
    pub fn target(&self) -> &str {
        &self.target
    }
}

fn target_of(config: &postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{db}")
}

/// The TLS connector: the public roots plus the certificates in [`STATE_CA_ENV`].
fn tls() -> Result<MakeRustlsConnect, StateUrlError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    if let Some(path) = std::env::var_os(STATE_CA_ENV).map(PathBuf::from) {
        let err = |reason: String| StateUrlError::CaFile {
            path: path.clone(),
            reason,
        };
        let certs = CertificateDer::pem_file_iter(&path)
            .map_err(|e| err(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(e.to_string()))?;
        if certs.is_empty() {
            return Err(err("no PEM certificate in the file".into()));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| err(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StateUrlError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// One pooled connection and the statements prepared on it.
struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
    used: Instant,
}

/// The shared state in PostgreSQL.
pub struct PgState {
    config: postgres::Config,
    tls: MakeRustlsConnect,
    target: String,
    idle: Mutex<Vec<Conn>>,
    migrated: AtomicBool,
}

impl std::fmt::Debug for PgState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PgState").field(&self.target).finish()
    }
}

impl Drop for PgState {
    fn drop(&mut self) {
        // Closing a connection drives its runtime, which must not happen on a runtime thread.
        let idle = std::mem::take(self.idle.get_mut().unwrap_or_else(|p| p.into_inner()));
        off_runtime(move || drop(idle));
    }
}

/// Run `f` where the blocking client may run: here, or on a scoped thread when this thread
/// belongs to a tokio runtime (whose threads must not start another runtime).
fn off_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

impl PgState {
    /// The state at `url`; nothing is connected until the first call, so a database that is
    /// down fails the calls that need it, not the start.
    pub fn new(url: &StateUrl) -> Result<Self, StateError> {
        let tls = tls().map_err(|e| StateError::Remote {
            target: url.target.clone(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            config: url.config.clone(),
            tls,
            target: url.target.clone(),
            idle: Mutex::new(Vec::new()),
            migrated: AtomicBool::new(false),
        })
    }

    /// The server and database, without credentials.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Connect (or check an idle connection) and migrate: whether the database answers.
    pub fn ping(&self) -> Result<(), StateError> {
        self.with_conn(|conn| {
            conn.client
                .simple_query("")
                .map(drop)
                .map_err(|e| classify(&self.target, &e))
        })
    }

    fn classify(&self, e: &postgres::Error) -> StateError {
        classify(&self.target, e)
    }

    /// A connection: an idle one still alive, else a new one (migrating the schema first if
    /// this process has not yet).
    fn checkout(&self) -> Result<Conn, StateError> {
        loop {
            let conn = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let Some(mut conn) = conn else { break };
            if conn.client.is_closed() {
                continue;
            }
            if conn.used.elapsed() < CHECK_AFTER || conn.client.is_valid(CONNECT_TIMEOUT).is_ok() {
                return Ok(conn);
            }
        }
        let mut client =
            self.config
                .connect(self.tls.clone())
                .map_err(|e| StateError::Offline {
                    target: self.target.clone(),
                    reason: with_causes(&e),
                })?;
        if !self.migrated.load(Ordering::Acquire) {
            migrate(&mut client, &self.target)?;
            self.migrated.store(true, Ordering::Release);
        }
        Ok(Conn {
            client,
            statements: HashMap::new(),
            used: Instant::now(),
        })
    }

    fn checkin(&self, mut conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        conn.used = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Run `f` on a pooled connection, off the async runtime.
    fn with_conn<R: Send, E: From<StateError> + Send>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R, E> + Send,
    ) -> Result<R, E> {
        off_runtime(|| {
            let mut conn = self.checkout()?;
            let out = f(&mut conn);
            self.checkin(conn);
            out
        })
    }

    /// Run `f` in a transaction, committed when it succeeds; retried when it lost a deadlock or
    /// a serialisation conflict.
    fn transaction<R: Send, E: From<StateError> + Send>(
        &self,
        mut f: impl FnMut(&mut Txn<'_, '_>) -> Result<R, E> + Send,
    ) -> Result<R, E> {
        self.with_conn(|conn| {
            let mut tries = 0;
            loop {
                tries += 1;
                let tx = conn.client.transaction().map_err(|e| self.classify(&e))?;
                let mut txn = Txn {
                    tx,
                    statements: &mut conn.statements,
                    target: &self.target,
                    retry: false,
                };
                match f(&mut txn) {
                    Ok(out) => {
                        let Txn { tx, .. } = txn;
                        match tx.commit() {
                            Ok(()) => return Ok(out),
                            Err(e) if retryable(&e) && tries < TRIES => continue,
                            Err(e) => return Err(self.classify(&e).into()),
                        }
                    }
                    // Dropping the transaction rolls it back.
                    Err(_) if txn.retry && tries < TRIES => continue,
                    Err(e) => return Err(e),
                }
            }
        })
    }

    /// The record of `table` under `key`.
    pub fn record_get(&self, table: Records, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.transaction(|t| {
            let row = t.query_opt(
                "SELECT value FROM chitin_records WHERE tbl = $1 AND key = $2",
                &[&table.name(), &key],
            )?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    /// Every record of `table`, in key order.
    pub fn record_all(&self, table: Records) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.transaction(|t| {
            let rows = t.query(
                "SELECT key, value FROM chitin_records WHERE tbl = $1 ORDER BY key",
                &[&table.name()],
            )?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    /// Put `value` at `key`; when `only_if_absent`, an existing record stays. The record stored
    /// afterwards.
    pub fn record_put(
        &self,
        table: Records,
        key: &str,
        value: &[u8],
        only_if_absent: bool,
    ) -> Result<Vec<u8>, StateError> {
        self.transaction(|t| {
            if only_if_absent {
                t.execute(
                    "INSERT INTO chitin_records (tbl, key, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (tbl, key) DO NOTHING",
                    &[&table.name(), &key, &value],
                )?;
                let row = t.query_opt(
                    "SELECT value FROM chitin_records WHERE tbl = $1 AND key = $2",
                    &[&table.name(), &key],
                )?;
                return Ok(row.map(|r| r.get(0)).unwrap_or_else(|| value.to_vec()));
            }
            t.execute(
                "INSERT INTO chitin_records (tbl, key, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (tbl, key) DO UPDATE SET value = excluded.value",
                &[&table.name(), &key, &value],
            )?;
            Ok(value.to_vec())
        })
    }

    /// Remove `keys` in one transaction; how many were there.
    pub fn record_remove(&self, table: Records, keys: &[&str]) -> Result<usize, StateError> {
        self.transaction(|t| {
            let n = t.execute(
                "DELETE FROM chitin_records WHERE tbl = $1 AND key = ANY($2)",
                &[&table.name(), &keys],
            )?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    /// Read and replace the rate record of (user, tool) in one transaction, holding its row lock.
    pub fn rate_update<R: Send, E: From<StateError> + Send>(
        &self,
        user: &str,
        tool: &str,
        f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), E> + Send,
    ) -> Result<R, E> {
        let mut f = Some(f);
        self.transaction(|t| {
            // The row is created empty first so that there is a row to lock.
            t.execute(
                "INSERT INTO chitin_http_rate (usr, tool, stamps) VALUES ($1, $2, '') \
                 ON CONFLICT (usr, tool) DO NOTHING",
                &[&user, &tool],
            )?;
            let row = t.query_opt(
                "SELECT stamps FROM chitin_http_rate WHERE usr = $1 AND tool = $2 FOR UPDATE",
                &[&user, &tool],
            )?;
            let old: Option<Vec<u8>> = row.map(|r| r.get(0));
            let Some(f) = f.take() else {
                // Retried after `f` decided (a deadlock on its one row, not expected): fail
                // the request rather than decide it twice.
                return Err(StateError::Remote {
                    target: t.target.to_owned(),
                    reason: "rate update retried after it was decided".into(),
                }
                .into());
            };
            let (new, out) = f(old.as_deref())?;
            t.execute(
                "UPDATE chitin_http_rate SET stamps = $3 WHERE usr = $1 AND tool = $2",
                &[&user, &tool, &new],
            )?;
            Ok(out)
        })
    }

    /// Drop the rate records `idle` says are idle.
    pub fn rate_sweep(&self, idle: &(dyn Fn(&[u8]) -> bool + Sync)) -> Result<(), StateError> {
        self.transaction(|t| {
            let rows = t.query(
                "SELECT usr, tool, stamps FROM chitin_http_rate FOR UPDATE SKIP LOCKED",
                &[],
            )?;
            for row in rows {
                let stamps: Vec<u8> = row.get(2);
                if idle(&stamps) {
                    let (user, tool): (String, String) = (row.get(0), row.get(1));
                    t.execute(
                        "DELETE FROM chitin_http_rate WHERE usr = $1 AND tool = $2",
                        &[&user, &tool],
                    )?;
                }
            }
            Ok(())
        })
    }

    /// How many (user, tool) rate records there are.
    #[cfg(test)]
    pub fn rate_len(&self) -> Result<usize, StateError> {
        self.transaction(|t| {
            let row = t.query_opt("SELECT count(*) FROM chitin_http_rate", &[])?;
            let n: i64 = row.map_or(0, |r| r.get(0));
            Ok(usize::try_from(n).unwrap_or_default())
        })
    }

    /// The values at `keys` of one bucket, in order.
    pub fn kv_get_many(
        &self,
        component: &str,
        bucket: &str,
        keys: &[&str],
    ) -> Result<Vec<Option<Vec<u8>>>, StateError> {
        self.transaction(|t| {
            let wanted: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let rows = t.query(
                "SELECT key, value FROM chitin_kv \
                 WHERE component = $1 AND bucket = $2 AND key = ANY($3)",
                &[&component, &bucket, &wanted],
            )?;
            let found: HashMap<Vec<u8>, Vec<u8>> =
                rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            Ok(keys
                .iter()
                .map(|k| found.get(k.as_bytes()).cloned())
                .collect())
        })
    }

    /// Up to `limit` keys of one bucket in order, skipping the first `skip`.
    pub fn kv_keys(
        &self,
        component: &str,
        bucket: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<String>, StateError> {
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.transaction(|t| {
            let rows = t.query(
                "SELECT key FROM chitin_kv WHERE component = $1 AND bucket = $2 \
                 ORDER BY key OFFSET $3 LIMIT $4",
                &[&component, &bucket, &skip, &limit],
            )?;
            rows.iter()
                .map(|r| {
                    let key: Vec<u8> = r.get(0);
                    // Keys are written from strings; anything else was not written by chitin.
                    String::from_utf8(key).map_err(|_| StateError::Remote {
                        target: t.target.to_owned(),
                        reason: "a key-value key is not UTF-8".into(),
                    })
                })
                .collect()
        })
    }

    /// The generation of the shared installed set (0 before the first install): replicas
    /// poll this one-row read and fetch the lockfile only when it moved.
    pub fn installed_generation(&self) -> Result<u64, StateError> {
        self.transaction(|t| {
            let row = t.query_opt("SELECT generation FROM chitin_installed", &[])?;
            let generation: i64 = row.map_or(0, |r| r.get(0));
            Ok(u64::try_from(generation).unwrap_or_default())
        })
    }

    /// The shared installed set: its generation and lockfile text (`None` before the first
    /// install).
    pub fn installed_get(&self) -> Result<Option<(u64, String)>, StateError> {
        self.transaction(|t| {
            let row = t.query_opt(
                "SELECT generation, lockfile FROM chitin_installed WHERE generation > 0",
                &[],
            )?;
            Ok(row.map(|r| {
                let generation: i64 = r.get(0);
                (u64::try_from(generation).unwrap_or_default(), r.get(1))
            }))
        })
    }

    /// Replace the shared lockfile with what `f` makes of the current one (`None` before the
    /// first install), raising the generation, in one transaction that concurrent changes
    /// wait for; the new generation and `f`'s result. When `f` fails, nothing is written.
    pub fn installed_update<R: Send, E: From<StateError> + Send>(
        &self,
        mut f: impl FnMut(Option<&str>) -> Result<(String, R), E> + Send,
    ) -> Result<(u64, R), E> {
        self.transaction(|t| {
            // The row exists first so that there is a row to lock: two first installs racing
            // then take turns instead of the second overwriting the first.
            t.execute(
                "INSERT INTO chitin_installed (only_row, generation, lockfile) \
                 VALUES (true, 0, '') ON CONFLICT (only_row) DO NOTHING",
                &[],
            )?;
            let row = t.query_opt(
                "SELECT generation, lockfile FROM chitin_installed FOR UPDATE",
                &[],
            )?;
            let (generation, old): (i64, Option<String>) = match row {
                Some(r) if r.get::<_, i64>(0) > 0 => (r.get(0), Some(r.get(1))),
                _ => (0, None),
            };
            let (text, out) = f(old.as_deref())?;
            let next = generation.saturating_add(1);
            t.execute(
                "UPDATE chitin_installed SET generation = $1, lockfile = $2",
                &[&next, &text],
            )?;
            Ok((u64::try_from(next).unwrap_or_default(), out))
        })
    }

    /// Run `f` over the key-value tables in one transaction.
    pub fn kv_write<R: Send, E: From<StateError> + Send>(
        &self,
        mut f: impl FnMut(&mut dyn KvTxn) -> Result<R, E> + Send,
    ) -> Result<R, E> {
        self.transaction(|t| f(t))
    }
}

/// Whether the failed transaction may simply run again.
fn retryable(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

/// A client error as [`StateError`]: a lost or refused connection is [`StateError::Offline`].
fn classify(target: &str, e: &postgres::Error) -> StateError {
    let offline = match e.code() {
        None => true,
        Some(code) => {
            code.code().starts_with("08")
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
        }
    };
    let reason = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => with_causes(e),
    };
    if offline {
        StateError::Offline {
            target: target.to_owned(),
            reason,
        }
    } else {
        StateError::Remote {
            target: target.to_owned(),
            reason,
        }
    }
}

/// An error and its causes, on one line ("error connecting to server: Connection refused").
fn with_causes(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Bring the schema to the newest version this chitin knows, once across replicas.
fn migrate(client: &mut Client, target: &str) -> Result<(), StateError> {
    let err = |e: postgres::Error| classify(target, &e);
    let mut tx = client.transaction().map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS chitin_schema (\
         version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .map_err(err)?;
    let current: i32 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM chitin_schema", &[])
        .map_err(err)?
        .get(0);
    let known = i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX);
    if current > known {
        return Err(StateError::Remote {
            target: target.to_owned(),
            reason: format!(
                "its schema is at version {current}, newer than this chitin knows ({known}); \
                 upgrade chitin on this replica"
            ),
        });
    }
    for (version, sql) in (1..).zip(MIGRATIONS) {
        if version > current {
            tx.batch_execute(sql).map_err(err)?;
            tx.execute(
                "INSERT INTO chitin_schema (version) VALUES ($1)",
                &[&version],
            )
            .map_err(err)?;
            tracing::info!(target: "chitin::state_db", version, "state database migrated");
        }
    }
    tx.commit().map_err(err)
}

/// A transaction with the connection's prepared statements.
struct Txn<'c, 's> {
    tx: Transaction<'c>,
    statements: &'s mut HashMap<&'static str, Statement>,
    target: &'s str,
    /// Set when a statement failed in a way that retrying the transaction may cure.
    retry: bool,
}

impl Txn<'_, '_> {
    fn fail(&mut self, e: postgres::Error) -> StateError {
        self.retry |= retryable(&e);
        classify(self.target, &e)
    }

    fn statement(&mut self, sql: &'static str) -> Result<Statement, StateError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.tx.prepare(sql).map_err(|e| self.fail(e))?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, StateError> {
        let s = self.statement(sql)?;
        self.tx.query(&s, params).map_err(|e| self.fail(e))
    }

    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Option<postgres::Row>, StateError> {
        let s = self.statement(sql)?;
        self.tx.query_opt(&s, params).map_err(|e| self.fail(e))
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, StateError> {
        let s = self.statement(sql)?;
        self.tx.execute(&s, params).map_err(|e| self.fail(e))
    }
}

impl KvTxn for Txn<'_, '_> {
    fn get(&mut self, c: &str, b: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let row = self.query_opt(
            "SELECT value FROM chitin_kv WHERE component = $1 AND bucket = $2 AND key = $3",
            &[&c, &b, &key.as_bytes()],
        )?;
        Ok(row.map(|r| r.get(0)))
    }

    fn put(&mut self, c: &str, b: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.execute(
            "INSERT INTO chitin_kv (component, bucket, key, value) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (component, bucket, key) DO UPDATE SET value = excluded.value",
            &[&c, &b, &key.as_bytes(), &value],
        )
        .map(drop)
    }

    fn delete(&mut self, c: &str, b: &str, key: &str) -> Result<(), StateError> {
        self.execute(
            "DELETE FROM chitin_kv WHERE component = $1 AND bucket = $2 AND key = $3",
            &[&c, &b, &key.as_bytes()],
        )
        .map(drop)
    }

    fn usage(&mut self, component: &str) -> Result<u64, StateError> {
        // Locking the usage row serialises writers of one component across replicas, so two
        // of them cannot both fit under the quota with the same bytes.
        self.execute(
            "INSERT INTO chitin_kv_usage (component, bytes) VALUES ($1, 0) \
             ON CONFLICT (component) DO NOTHING",
            &[&component],
        )?;
        let row = self.query_opt(
            "SELECT bytes FROM chitin_kv_usage WHERE component = $1 FOR UPDATE",
            &[&component],
        )?;
        let bytes: i64 = row.map_or(0, |r| r.get(0));
        Ok(u64::try_from(bytes).unwrap_or_default())
    }

    fn set_usage(&mut self, component: &str, bytes: u64) -> Result<(), StateError> {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.execute(
            "UPDATE chitin_kv_usage SET bytes = $2 WHERE component = $1",
            &[&component, &bytes],
        )
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_refused_on_the_command_line_and_never_shown() {
        let url = "postgres://chitin:hunter2@db.example:5432/state";
        let err = StateUrl::parse(url, true).unwrap_err();
        assert!(matches!(err, StateUrlError::PasswordInArgv), "{err}");
        assert!(err.to_string().contains("CHITIN_STATE_URL"), "{err}");
        let parsed = StateUrl::parse(url, false).expect("from the environment");
        assert_eq!(parsed.target(), "chitin@db.example:5432/state");
        assert!(!format!("{parsed:?}").contains("hunter2"));
    }

    #[test]
    fn tls_is_required_off_loopback_unless_the_url_says_otherwise() {
        let remote = StateUrl::parse("postgres://c@db.example/s", false).expect("url");
        assert_eq!(remote.config.get_ssl_mode(), SslMode::Require);
        let local = StateUrl::parse("postgres://c@127.0.0.1/s", false).expect("url");
        assert_eq!(local.config.get_ssl_mode(), SslMode::Prefer);
        let chosen =
            StateUrl::parse("postgres://c@db.example/s?sslmode=disable", false).expect("url");
        assert_eq!(chosen.config.get_ssl_mode(), SslMode::Disable);
        let err = StateUrl::parse("mysql://c@db.example/s", false).unwrap_err();
        assert!(matches!(err, StateUrlError::Scheme(_)), "{err}");
    }
}
