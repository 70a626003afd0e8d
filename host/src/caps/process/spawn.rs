//! Starting a confined child without `fork`. `fork` copies the page tables of every mapping of
//! the host, and the engine's pooling allocator maps gigabytes: ~2 ms a spawn. Instead everything
//! is prepared in the parent (argument and environment strings, pipes, the working directory,
//! the confinement), then `clone(CLONE_VM | CLONE_VFORK)` runs the child on a stack of its own in
//! the parent's memory until it calls `execve`, as glibc's `posix_spawn` does.
//!
//! The child shares the parent's memory, so it only makes system calls: no allocation, no locks,
//! no panics. The calling thread is suspended until the child execs or exits; a failed step
//! stores the step and `errno` in memory the parent reads when it resumes, then reaps the child.
//! The child is tracked by a pidfd (`CLONE_PIDFD`), waited on through the runtime's reactor.

use std::convert::Infallible;
use std::ffi::{CString, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::confine::InChild;
use super::run::Spawn;

/// The child's stack. Its code is a few small frames of system calls; the margin is for debug
/// builds.
const STACK_BYTES: usize = 64 * 1024;

/// The highest descriptor closed one by one where `close_range` is missing (Linux < 5.9, where
/// only unconfined processes can run at all).
const CLOSE_FALLBACK_LIMIT: u64 = 65_536;

/// A step of the child between `clone` and `execve`, named in the error when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// Resetting signal handlers and the signal mask.
    Signals = 1,
    /// Putting the pipes on stdin, stdout and stderr.
    Stdio,
    /// Changing to the working directory.
    Cwd,
    /// Moving to a process group of its own.
    Group,
    /// Setting the resource limits.
    Limits,
    /// Setting `no_new_privs`.
    NoNewPrivs,
    /// Dropping every capability.
    Capabilities,
    /// Installing the seccomp filter.
    Seccomp,
    /// Entering the Landlock domain.
    Landlock,
    /// Closing every other descriptor.
    CloseFds,
    /// `execve` of the program.
    Exec,
}

impl Step {
    const ALL: [Self; 11] = [
        Self::Signals,
        Self::Stdio,
        Self::Cwd,
        Self::Group,
        Self::Limits,
        Self::NoNewPrivs,
        Self::Capabilities,
        Self::Seccomp,
        Self::Landlock,
        Self::CloseFds,
        Self::Exec,
    ];

    fn describe(self) -> &'static str {
        match self {
            Self::Signals => "cannot reset its signal handling",
            Self::Stdio => "cannot set up its stdin, stdout and stderr",
            Self::Cwd => "cannot enter its working directory",
            Self::Group => "cannot give it a process group of its own",
            Self::Limits => "cannot set its resource limits",
            Self::NoNewPrivs => "cannot set no_new_privs",
            Self::Capabilities => "cannot drop its capabilities",
            Self::Seccomp => "cannot install the seccomp filter",
            Self::Landlock => "cannot enter the Landlock domain",
            Self::CloseFds => "cannot close the host's descriptors",
            Self::Exec => "cannot execute the program",
        }
    }
}

/// Why a child did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// An argument, variable or path holds a NUL byte, which `execve` cannot pass.
    #[error("{0} contains a NUL byte")]
    Nul(&'static str),
    /// Preparing in the parent failed (pipes, stack, `clone`).
    #[error("{0}: {1}")]
    Prepare(&'static str, io::Error),
    /// Waiting for the child failed.
    #[error("cannot wait for the process: {0}")]
    Wait(io::Error),
    /// The child failed before running the program; it has been reaped.
    #[error("{}: {source}", step.describe())]
    Child {
        /// The step that failed.
        step: Step,
        /// Its `errno`.
        source: io::Error,
    },
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

/// A running child: its pid (which is also its process group), a pidfd, and the parent's ends
/// of its pipes. Dropped before it was reaped, it kills the group and reaps the child later.
#[derive(Debug)]
pub struct Child {
    pid: Pid,
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// The writing end of its stdin, when there is input to feed.
    pub stdin: Option<pipe::Sender>,
    /// The reading end of its stdout.
    pub stdout: Option<pipe::Receiver>,
    /// The reading end of its stderr.
    pub stderr: Option<pipe::Receiver>,
}

impl Child {
    /// Wait (without reaping) until the child has exited. The unreaped zombie keeps its pid and
    /// process group from being reused, so the group can still be killed safely.
    pub async fn exited(&self) -> io::Result<()> {
        match &self.pidfd {
            // A pidfd turns readable when the process exits, and stays so.
            Some(pidfd) => pidfd.readable().await.map(drop),
            None => Ok(()),
        }
    }

    /// Kill the child's whole process group (while it is not reaped).
    pub fn kill_group(&self) {
        if self.pidfd.is_some() {
            // ESRCH means the group is already gone: nothing left to kill.
            let _ = kill_process_group(self.pid, Signal::KILL);
        }
    }

    /// Collect the exit status of a child that [`Child::exited`].
    pub fn reap(&mut self) -> io::Result<Exit> {
        let pidfd = self
            .pidfd
            .take()
            .ok_or_else(|| io::Error::other("the child was already reaped"))?;
        let status = waitid(
            WaitId::PidFd(pidfd.get_ref().as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        )?;
        let status = status.ok_or_else(|| io::Error::other("the child has not exited yet"))?;
        Ok(Exit {
            code: status.exit_status(),
            signal: status.terminating_signal(),
        })
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        let _ = kill_process_group(self.pid, Signal::KILL);
        reap_later(pidfd);
    }
}

/// Reap a killed child once it has exited, without blocking the caller.
fn reap_later(pidfd: AsyncFd<OwnedFd>) {
    let reap = |fd: &OwnedFd, options| waitid(WaitId::PidFd(fd.as_fd()), options);
    if matches!(
        reap(
            pidfd.get_ref(),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG
        ),
        Ok(Some(_)) | Err(_)
    ) {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                if pidfd.readable().await.is_ok() {
                    let _ = reap(
                        pidfd.get_ref(),
                        WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
                    );
                }
            });
        }
        Err(_) => {
            // No runtime (it is shutting down): a thread waits for the killed child instead.
            std::thread::spawn(move || {
                let _ = reap(pidfd.get_ref(), WaitIdOptions::EXITED);
            });
        }
    }
}

/// Start `spawn` under `confinement`. The child is in its own process group, confined, with
/// stdin, stdout and stderr on pipes (stdin on `/dev/null` when there is no input) and no other
/// descriptor of the host.
pub fn start(spawn: &Spawn, confinement: InChild<'_>) -> Result<Child, SpawnError> {
    let program = c_string(spawn.program.as_os_str().as_bytes(), "the program path")?;
    let args = std::iter::once(Ok(program.clone()))
        .chain(
            spawn
                .args
                .iter()
                .map(|a| c_string(a.as_bytes(), "an argument")),
        )
        .collect::<Result<Vec<_>, _>>()?;
    let env = spawn
        .env
        .iter()
        .map(|(k, v)| {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            c_string(&pair, "an environment variable")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = c_string(spawn.cwd.as_os_str().as_bytes(), "the working directory")?;
    let argv = null_terminated(&args);
    let envp = null_terminated(&env);

    let prepare = |what| move |e| SpawnError::Prepare(what, e);
    let (stdin_child, stdin_parent) = if spawn.stdin.is_empty() {
        let null = std::fs::File::open("/dev/null").map_err(prepare("cannot open /dev/null"))?;
        (OwnedFd::from(null), None)
    } else {
        let (read, write) = pipe_cloexec().map_err(prepare("cannot create the stdin pipe"))?;
        (read, Some(write))
    };
    let (stdout_parent, stdout_child) =
        pipe_cloexec().map_err(prepare("cannot create the stdout pipe"))?;
    let (stderr_parent, stderr_child) =
        pipe_cloexec().map_err(prepare("cannot create the stderr pipe"))?;
    let stdio = [stdin_child, stdout_child, stderr_child]
        .map(above_stdio)
        .into_iter()
        .collect::<io::Result<Vec<_>>>()
        .map_err(prepare("cannot set up the child's stdio"))?;
    let stack = Stack::new(STACK_BYTES).map_err(prepare("cannot allocate the child's stack"))?;
    let open_files = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(CLOSE_FALLBACK_LIMIT)
        .min(CLOSE_FALLBACK_LIMIT);

    let shared = ChildArgs {
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.as_ptr(),
        stdio: [
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
        ],
        confinement,
        close_up_to: c_int::try_from(open_files).unwrap_or(c_int::MAX),
        failed_step: AtomicU8::new(0),
        errno: AtomicI32::new(0),
    };
    let (pid, pidfd) = clone_child(&shared, &stack)?;
    drop(stack);
    // The child's ends now belong to the child (or it is gone): closing them here lets the
    // parent see end-of-file when the child exits.
    drop(stdio);

    let failed = shared.failed_step.load(Ordering::SeqCst);
    if failed != 0 {
        // The child has called `_exit`; reap it so no zombie stays behind.
        let _ = waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED);
        let step = Step::ALL
            .into_iter()
            .find(|s| *s as u8 == failed)
            .unwrap_or(Step::Exec);
        return Err(SpawnError::Child {
            step,
            source: io::Error::from_raw_os_error(shared.errno.load(Ordering::SeqCst)),
        });
    }
    let mut child = Child {
        pid,
        pidfd: None,
        stdin: None,
        stdout: None,
        stderr: None,
    };
    // From here on the child runs: dropping `child` on an error below kills and reaps it.
    // SAFETY: an `OwnedFd` keeps its descriptor open, and the same, until it is dropped.
    let registered = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) };
    child.pidfd = Some(registered.map_err(|e| {
        let (pidfd, error) = e.into_parts();
        let _ = kill_process_group(pid, Signal::KILL);
        let _ = waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED);
        SpawnError::Prepare("cannot watch the child", error)
    })?);
    child.stdin = stdin_parent
        .map(|fd| {
            rustix::io::ioctl_fionbio(&fd, true)?;
            pipe::Sender::from_owned_fd_unchecked(fd)
        })
        .transpose()
        .map_err(prepare("cannot watch the stdin pipe"))?;
    let receiver = |fd: OwnedFd| {
        rustix::io::ioctl_fionbio(&fd, true)?;
        pipe::Receiver::from_owned_fd_unchecked(fd)
    };
    child.stdout = Some(receiver(stdout_parent).map_err(prepare("cannot watch the stdout pipe"))?);
    child.stderr = Some(receiver(stderr_parent).map_err(prepare("cannot watch the stderr pipe"))?);
    Ok(child)
}

fn c_string(bytes: &[u8], what: &'static str) -> Result<CString, SpawnError> {
    CString::new(bytes).map_err(|_| SpawnError::Nul(what))
}

/// Pointers to `strings`, ended by a null pointer (`argv`, `envp`).
fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [c_int; 2] = [-1, -1];
    // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `pipe2` succeeded, so both are open descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fd`, moved to 3 or above if it is 0–2 (the host ran with a standard stream closed), so
/// putting the child's descriptors on 0, 1 and 2 never overwrites one not yet placed.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

/// What the child reads (prepared by the parent) and writes (how it failed). It lives on the
/// parent's stack, which stays valid while the parent is suspended in `clone`.
struct ChildArgs<'a> {
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdio: [RawFd; 3],
    confinement: InChild<'a>,
    close_up_to: c_int,
    failed_step: AtomicU8,
    errno: AtomicI32,
}

/// A stack for the child, with an inaccessible guard page below it: an overflow faults instead
/// of writing into the parent's memory.
struct Stack {
    base: *mut c_void,
    len: usize,
}

impl Stack {
    fn new(size: usize) -> io::Result<Self> {
        // SAFETY: sysconf only reads a system value.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let guard = usize::try_from(page).unwrap_or(4096);
        let len = size + guard;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base, len };
        // SAFETY: the first page of the mapping made above.
        if unsafe { libc::mprotect(base, guard, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The initial stack pointer: the stack grows down from the end of the mapping.
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, which is page-aligned (so 16-byte aligned).
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unused once the child has execed or exited.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Run the child on `stack`; returns its pid and pidfd once it has execed or exited.
fn clone_child(shared: &ChildArgs<'_>, stack: &Stack) -> Result<(Pid, OwnedFd), SpawnError> {
    // Every signal is blocked across `clone`, so no handler of the host runs in the child (on
    // the host's memory) before the child has reset them; the child unblocks them just before
    // `execve`.
    let mut all: libc::sigset_t = empty_sigset();
    let mut previous: libc::sigset_t = empty_sigset();
    // SAFETY: both are valid sigset_t values owned by this frame.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    let mut pidfd: c_int = -1;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: `child_main` only makes system calls on its own stack, reading `shared` (alive on
    // this frame, which is suspended until the child execs or exits: CLONE_VFORK) and writing
    // only its atomics; the stack top is 16-byte aligned with a guard page below; the kernel
    // writes the pidfd into `pidfd` (CLONE_PIDFD uses the parent_tid argument).
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            flags,
            ptr::from_ref(shared).cast_mut().cast(),
            &mut pidfd as *mut c_int,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, ptr::null_mut()) };
    if pid < 0 {
        return Err(SpawnError::Prepare("cannot start the child", clone_error));
    }
    // SAFETY: `clone` succeeded with CLONE_PIDFD, so `pidfd` is an open descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let pid = Pid::from_raw(pid)
        .ok_or_else(|| SpawnError::Prepare("cannot start the child", io::Error::other("pid 0")))?;
    Ok((pid, pidfd))
}

/// The empty signal set.
fn empty_sigset() -> libc::sigset_t {
    // SAFETY: sigset_t is a plain bit array; all zeroes is the empty set.
    unsafe { std::mem::zeroed() }
}

/// The child's entry point: apply everything, then `execve`; on failure record the step and
/// `errno` and `_exit(127)` (never return into the host's code or run its exit handlers).
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` passed to `clone`, alive while the parent is suspended.
    let shared = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let Err((step, error)) = in_child(shared);
    shared
        .errno
        .store(error.raw_os_error().unwrap_or(libc::EIO), Ordering::SeqCst);
    shared.failed_step.store(step as u8, Ordering::SeqCst);
    // SAFETY: ends the child at once, without touching the shared memory further.
    unsafe { libc::_exit(127) }
}

/// Everything the child does, in order; returns only on failure. System calls only.
fn in_child(shared: &ChildArgs<'_>) -> Result<Infallible, (Step, io::Error)> {
    let os = |step| move |_| (step, io::Error::last_os_error());
    reset_signal_handlers().map_err(os(Step::Signals))?;
    for (target, fd) in (0..).zip(shared.stdio) {
        // SAFETY: `fd` is open (the parent keeps it until the child has execed) and ≥ 3, so
        // no descriptor still to be placed is overwritten; dup2 clears close-on-exec.
        check(unsafe { libc::dup2(fd, target) }).map_err(os(Step::Stdio))?;
    }
    // SAFETY: `cwd` is a NUL-terminated string owned by the parent's frame.
    check(unsafe { libc::chdir(shared.cwd) }).map_err(os(Step::Cwd))?;
    shared.confinement.apply()?;
    close_from_3(shared.close_up_to).map_err(os(Step::CloseFds))?;
    let empty = empty_sigset();
    // SAFETY: `empty` is the empty set: the program starts with no signal blocked.
    check(unsafe { libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut()) })
        .map_err(os(Step::Signals))?;
    // SAFETY: the program, argv and envp are NUL-terminated strings and null-terminated pointer
    // arrays owned by the parent's frame.
    unsafe { libc::execve(shared.program, shared.argv, shared.envp) };
    Err((Step::Exec, io::Error::last_os_error()))
}

fn check(rc: c_int) -> Result<(), ()> {
    if rc < 0 { Err(()) } else { Ok(()) }
}

/// Set every handled signal back to its default: a handler of the host must never run in the
/// child. `SIGPIPE`, which the Rust runtime ignores, goes back to its default too (as
/// `std::process::Command` does); other ignored signals stay ignored across `execve`.
fn reset_signal_handlers() -> Result<(), ()> {
    // Linux numbers signals 1 to 64.
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: reads the disposition into a zeroed, valid sigaction.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only queries.
        if unsafe { libc::sigaction(signal, ptr::null(), &mut current) } != 0 {
            continue; // glibc's reserved signals (32, 33) cannot be queried: never handled here
        }
        let ignored = current.sa_sigaction == libc::SIG_IGN && signal != libc::SIGPIPE;
        if current.sa_sigaction == libc::SIG_DFL || ignored {
            continue;
        }
        // SAFETY: a zeroed sigaction is SIG_DFL with no flags and an empty mask.
        let default: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: installs the default disposition for `signal` in this (child) process only:
        // without CLONE_SIGHAND the child has its own copy of the handler table.
        check(unsafe { libc::sigaction(signal, &default, ptr::null_mut()) })?;
    }
    Ok(())
}

/// Close every descriptor from 3 up: whatever the host has open without close-on-exec stays
/// out of the child.
fn close_from_3(fallback_up_to: c_int) -> Result<(), ()> {
    // SAFETY: closes descriptors of this (child) process only: without CLONE_FILES it has its
    // own descriptor table.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if rc == 0 {
        return Ok(());
    }
    if io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
        return Err(());
    }
    for fd in 3..fallback_up_to {
        // SAFETY: as above; EBADF for descriptors that are not open is expected.
        unsafe { libc::close(fd) };
    }
    Ok(())
}
