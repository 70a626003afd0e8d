//! A throwaway PostgreSQL server for tests: `initdb` and `pg_ctl` on a free loopback port under
//! a temporary directory, run as the `postgres` user when the tests run as root (PostgreSQL
//! refuses root), stopped and removed on drop. Every step is bounded in time.
//!
//! The binaries are found on `PATH`, else under `/usr/lib/postgresql/*/bin` (where Debian's
//! `postgresql` package puts them; `.ci/run` installs it when missing).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A running PostgreSQL server, stopped when dropped.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// The directory holding `initdb` and `pg_ctl`.
pub fn bin_dir() -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return dir;
            }
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    // The newest major version (directory names are numbers).
    found.sort_by_key(|p| {
        p.parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop().expect(
        "PostgreSQL's initdb is missing: install Debian's `postgresql` package (`.ci/run` does)",
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    /// Create a cluster and start it; panics with the server's log when it cannot.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("chitin-pg-")
            .tempdir()
            .expect("tempdir");
        let as_postgres = is_root();
        if as_postgres {
            let out = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .output()
                .expect("chown");
            assert!(out.status.success(), "chown: {out:?}");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let pg = Self {
            dir,
            bin: bin_dir(),
            port,
            as_postgres,
        };
        let data = pg.data();
        let out = pg.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "chitin",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
        );
        assert!(out.status.success(), "initdb failed: {out:?}");
        pg.resume();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Run a PostgreSQL program, as `postgres` when we are root.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    /// Start the server (again), waiting at most 30 s until it accepts connections.
    pub fn resume(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-w",
                "-t",
                "30",
                "-o",
                &options,
                "start",
            ],
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(out.status.success(), "pg_ctl start failed: {out:?}\n{text}");
    }

    /// Stop the server at once (as a crash would), waiting at most 30 s.
    pub fn halt(&self) {
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-m",
                "immediate",
                "-w",
                "-t",
                "30",
                "stop",
            ],
        );
        assert!(out.status.success(), "pg_ctl stop failed: {out:?}");
    }

    /// The server's URL (no password: the test cluster trusts loopback connections).
    pub fn url(&self) -> String {
        format!("postgres://chitin@127.0.0.1:{}/postgres", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-m",
                "immediate",
                "-w",
                "-t",
                "30",
                "stop",
            ],
        );
    }
}
