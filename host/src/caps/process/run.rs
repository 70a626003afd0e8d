//! Running one confined process: spawn it in its own group, feed stdin, capture capped stdout and
//! stderr, and kill the whole group when the program exits, at the timeout, or when the call is
//! dropped (cancellation).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::confine::Confinement;

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

/// Kills the process group when dropped: a call future dropped mid-run (cancellation, the
/// component's own deadline) takes its processes with it.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0 {
            // ESRCH means the group is already gone: nothing left to kill.
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Start `spawn` under `confinement` and wait for it (bounded by its timeout).
pub async fn run(spawn: Spawn, confinement: &Confinement) -> std::io::Result<Finished> {
    let mut cmd = tokio::process::Command::new(&spawn.program);
    cmd.args(&spawn.args)
        .current_dir(&spawn.cwd)
        .env_clear()
        .envs(spawn.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spawn.stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // CPU seconds: the wall-clock timeout rounded up, plus one, so the timeout normally fires
    // first and the CPU limit only stops processes that outrun it.
    let cpu_secs = spawn.timeout.as_secs() + 2;
    let hook = confinement.pre_exec(cpu_secs);
    // SAFETY: the hook only makes async-signal-safe system calls (see `confine`).
    unsafe { cmd.pre_exec(hook) };

    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let mut guard = GroupGuard(
        child
            .id()
            .and_then(|id| Pid::from_raw(i32::try_from(id).ok()?)),
    );
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
        let status = tokio::time::timeout(spawn.timeout, child.wait()).await;
        let duration = started.elapsed();
        // Whatever the program left behind in its group (`sleep 1000 &`) ends with it.
        guard.kill();
        let _ = killed_tx.send(true);
        match status {
            Ok(status) => (status, false, duration),
            Err(_elapsed) => (child.wait().await, true, duration),
        }
    };
    let ((status, timed_out, duration), out, err, ()) = tokio::join!(
        wait,
        capture(stdout, killed_rx.clone()),
        capture(stderr, killed_rx),
        feed
    );
    guard.0 = None;
    let status = status?;
    Ok(Finished {
        exit_code: status.code(),
        signal: status.signal(),
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
