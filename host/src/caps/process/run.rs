//! Running one confined process: spawn it in its own group, feed stdin, capture capped stdout and
//! stderr, and kill the whole group when the program exits, at the timeout, or when the call is
//! dropped (cancellation).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::confine::Confinement;
use super::spawn::{self, SpawnError};

/// Bytes kept of stdout and of stderr each.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// How long pipes are still read after the group was killed (a process that kept a pipe open
/// outside the group cannot hold the call).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// A process to start, fully resolved and checked.
#[derive(Debug)]
pub struct Spawn {
    /// Absolute path of the program.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<String>,
    /// Working directory (inside the workspace, canonical).
    pub cwd: PathBuf,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Bytes for stdin.
    pub stdin: Vec<u8>,
    /// Wall-clock limit.
    pub timeout: Duration,
}

/// What the process produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Captured stdout (capped).
    pub stdout: Captured,
    /// Captured stderr (capped).
    pub stderr: Captured,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Start to end.
    pub duration: Duration,
}

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first [`OUTPUT_CAP`] bytes.
    pub bytes: Vec<u8>,
    /// Whether more was written (and dropped).
    pub truncated: bool,
}

/// Start `spawn` under `confinement` and wait for it (bounded by its timeout). Dropping the
/// future kills the process group (cancellation, the component's own deadline).
pub async fn run(spawn: Spawn, confinement: &Confinement) -> Result<Finished, SpawnError> {
    // CPU seconds: the wall-clock timeout rounded up, plus one, so the timeout normally fires
    // first and the CPU limit only stops processes that outrun it.
    let cpu_secs = spawn.timeout.as_secs() + 2;
    let started = Instant::now();
    let mut child = spawn::start(&spawn, confinement.in_child(cpu_secs))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (killed_tx, killed_rx) = watch::channel(false);

    let feed = async move {
        if let Some(mut pipe) = stdin {
            // A program that exits without reading its input closes the pipe: not an error.
            let _ = pipe.write_all(&spawn.stdin).await;
        }
    };
    let wait = async {
        let exited = tokio::time::timeout(spawn.timeout, child.exited()).await;
        let duration = started.elapsed();
        // Whatever the program left behind in its group (`sleep 1000 &`) ends with it; the
        // program itself is not reaped yet, so its group id cannot have been reused.
        child.kill_group();
        let _ = killed_tx.send(true);
        let timed_out = exited.is_err();
        let status = match exited {
            Ok(exited) => exited,
            Err(_elapsed) => child.exited().await,
        }
        .and_then(|()| child.reap());
        (status, timed_out, duration)
    };
    let ((status, timed_out, duration), out, err, ()) = tokio::join!(
        wait,
        capture(stdout, killed_rx.clone()),
        capture(stderr, killed_rx),
        feed
    );
    let status = status.map_err(SpawnError::Wait)?;
    Ok(Finished {
        exit_code: status.code,
        signal: status.signal,
        stdout: out,
        stderr: err,
        timed_out,
        duration,
    })
}

/// Read `pipe` to its end, keeping the first [`OUTPUT_CAP`] bytes; stop [`DRAIN_GRACE`] after
/// the group was killed even if something still holds the pipe open.
async fn capture<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    mut killed: watch::Receiver<bool>,
) -> Captured {
    let Some(mut pipe) = pipe else {
        return Captured::default();
    };
    let mut captured = Captured::default();
    let mut buf = vec![0u8; 16 * 1024];
    let read_all = async {
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = OUTPUT_CAP - captured.bytes.len();
                    if n > room {
                        captured.truncated = true;
                    }
                    captured.bytes.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
    };
    let grace = async {
        // An error means the sender is gone, which only happens once the wait has finished.
        let _ = killed.wait_for(|k| *k).await;
        tokio::time::sleep(DRAIN_GRACE).await;
    };
    tokio::select! {
        () = read_all => {}
        () = grace => {}
    }
    captured
}
