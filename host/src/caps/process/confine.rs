//! Confinement applied in the child before `exec`: its own process group, resource limits,
//! `no_new_privs`, no capability, a seccomp filter that keeps it in that group and off the
//! sockets Landlock does not rule, and a Landlock domain (filesystem, TCP and scope rules) built
//! in the parent for each call.
//!
//! Everything that allocates or opens paths happens in the parent ([`Confinement::landlock`]);
//! what runs in the child ([`InChild::apply`]) only makes system calls, since the child shares
//! the parent's memory until it execs ([`super::spawn`]).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::spawn::Step;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    Scope,
};

/// The oldest Landlock ABI that confines what chitin needs: files (v1–v3) and TCP (v4).
pub const MIN_LANDLOCK_ABI: i32 = 4;

/// System directories a program needs to run: read and execute, never write.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files and folders of `/etc` programs read to start and to resolve names, time zones and
/// certificates. `/etc` as a whole is never granted: it holds `shadow`, `gshadow`, `sudoers`,
/// ssh host keys and TLS private keys.
const ETC_ENTRIES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/host.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/terminfo",
    "/etc/inputrc",
    "/etc/os-release",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/pki/tls/certs",
    "/etc/gitconfig",
];

/// Device files a program may read and write (the harmless ones).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// System-wide `/proc` files programs read for sizing themselves. `/proc` as a whole is never
/// granted: `/proc/<pid>/environ` and `maps` of the host (same user) stay readable under
/// Landlock's ptrace rule, and the host's environment may hold secrets.
const PROC_FILES: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
];

/// Resource limits set in the child (`setrlimit`), inherited by everything it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimits {
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Address space per process in bytes (`RLIMIT_AS`).
    pub address_space_bytes: u64,
    /// Largest file a process may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// Processes (threads included) of the whole user, not just this tree (`RLIMIT_NPROC`; the
    /// kernel does not apply it to root).
    pub processes: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

impl Default for Rlimits {
    /// 300 CPU seconds (the longest timeout), 4 GiB address space, 1 GiB files, 4096 processes
    /// (the count is per user, and a desktop session alone runs hundreds of threads), 1024 open
    /// files.
    fn default() -> Self {
        Self {
            cpu_secs: 300,
            address_space_bytes: 4 << 30,
            file_size_bytes: 1 << 30,
            processes: 4096,
            open_files: 1024,
        }
    }
}

/// What the Landlock domain of a grant allows, besides each call's scratch directory.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The workspace (canonical): read-write, or read-only when `workspace_writable` is false.
    pub workspace: PathBuf,
    /// Whether the grant lets processes write the workspace.
    pub workspace_writable: bool,
    /// The granted programs (absolute): each may be read and executed wherever it lives.
    pub programs: Vec<PathBuf>,
    /// Whether TCP connect and bind are allowed.
    pub network: bool,
}

/// Whether and how the kernel can confine processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Landlock at this ABI (≥ [`MIN_LANDLOCK_ABI`]).
    Landlock(i32),
    /// Landlock is missing or older than needed; the ABI the kernel reports (≤ 0: none).
    Unavailable(i32),
}

impl Support {
    /// Ask the kernel which Landlock ABI it offers.
    pub fn detect() -> Self {
        // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only
        // returns the ABI version (or -1 with errno); it touches no memory.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        let abi = i32::try_from(abi).unwrap_or(-1);
        if abi >= MIN_LANDLOCK_ABI {
            Self::Landlock(abi)
        } else {
            Self::Unavailable(abi)
        }
    }

    /// A sentence for the start banner and refusals.
    pub fn describe(&self) -> String {
        match self {
            Self::Landlock(abi) => format!("Landlock ABI {abi}"),
            Self::Unavailable(abi) if *abi <= 0 => {
                "Landlock is not available in this kernel".to_owned()
            }
            Self::Unavailable(abi) => format!(
                "the kernel's Landlock ABI {abi} is older than the {MIN_LANDLOCK_ABI} chitin needs \
                 to confine files and network"
            ),
        }
    }
}

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The confinement could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// Building the Landlock ruleset failed.
    #[error("cannot build the Landlock ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The kernel gave no ruleset descriptor.
    #[error("cannot build the Landlock ruleset: the kernel returned no ruleset")]
    NoRuleset,
    /// The kernel refused a rule.
    #[error("cannot add the Landlock rule for {path}: {source}")]
    AddRule {
        /// The path the rule names.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The rules of a grant that are the same for every call (system paths, devices, the granted
/// programs, the workspace), each with a descriptor opened once and the identity (device and
/// inode) of what its path named then.
///
/// Landlock binds a rule to the inode its descriptor refers to. Each call checks that its path
/// still names that same inode (a `stat`; the descriptor held open keeps the inode number from
/// being reused) and opens the path afresh when it does not, so every call's domain binds what
/// each path names at that call, exactly as opening every path per call would; only the
/// `open` / `fstat` / `close` of unchanged paths is saved.
#[derive(Debug)]
pub struct Rules {
    abi: ABI,
    network: bool,
    fixed: Vec<FixedRule>,
}

#[derive(Debug)]
struct FixedRule {
    path: PathBuf,
    access: BitFlags<AccessFs>,
    opened: Option<Opened>,
}

/// A path opened with `O_PATH`, and what it was.
#[derive(Debug)]
struct Opened {
    fd: OwnedFd,
    dev: u64,
    ino: u64,
    is_dir: bool,
}

/// A path's device and inode, or none when it is missing: what a rule bound.
type Identity = Option<(u64, u64)>;

/// What `path` names now (following symlinks, as opening it does).
fn identity(path: &Path) -> Identity {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Opened {
    fn open(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        // O_PATH: a handle on the inode for Landlock, without reading it.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)?;
        let meta = file.metadata()?;
        Ok(Self {
            fd: file.into(),
            dev: meta.dev(),
            ino: meta.ino(),
            is_dir: meta.is_dir(),
        })
    }
}

impl Rules {
    /// The fixed rules of `plan` at the kernel's `abi`; paths missing now are looked for again
    /// at each call.
    pub fn new(plan: &Plan, abi: i32) -> Self {
        let abi = ABI::from(abi);
        let fixed = fs_rules(plan, abi)
            .into_iter()
            .map(|(path, access)| FixedRule {
                opened: Opened::open(&path).ok(),
                path,
                access,
            })
            .collect();
        Self {
            abi,
            network: plan.network,
            fixed,
        }
    }
}

/// A prepared confinement: the Landlock ruleset (when confined) and the limits, ready to apply
/// in each child.
#[derive(Debug)]
pub struct Confinement {
    ruleset: Option<OwnedFd>,
    rlimits: Rlimits,
    /// Whether IP sockets may be made (the grant's `network`; always when unconfined).
    network: bool,
    /// What each fixed rule, then the scratch, bound when the ruleset was built (empty when
    /// unconfined).
    bound: Vec<Identity>,
}

impl Confinement {
    /// Build the Landlock ruleset of `rules` plus `scratch` (read-write) for one call.
    pub fn landlock(rules: &Rules, scratch: &Path, rlimits: Rlimits) -> Result<Self, ConfineError> {
        let abi = rules.abi;
        let all = AccessFs::from_all(abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(all)?;
        if !rules.network {
            // Handled with no rule: every TCP connect and bind is refused. A network grant leaves
            // TCP unhandled, since Landlock has no "any port" rule.
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        // Signals and abstract UNIX sockets stay inside the domain (ABI 6; best effort below).
        let ruleset: Option<OwnedFd> = ruleset
            .set_compatibility(CompatLevel::BestEffort)
            .scope(Scope::from_all(abi))?
            .create()?
            .into();
        let ruleset = ruleset.ok_or(ConfineError::NoRuleset)?;
        let mut bound = Vec::with_capacity(rules.fixed.len() + 1);
        for rule in &rules.fixed {
            let now = identity(&rule.path);
            let held = rule
                .opened
                .as_ref()
                .filter(|opened| Some((opened.dev, opened.ino)) == now);
            let bound_now = match (now, held) {
                // This system lacks it (opening it would fail the same way).
                (None, _) => None,
                (Some(_), Some(opened)) => {
                    add_rule(&ruleset, &rule.path, opened, rule.access, abi)?;
                    now
                }
                (Some(_), None) => match Opened::open(&rule.path) {
                    Ok(fresh) => {
                        add_rule(&ruleset, &rule.path, &fresh, rule.access, abi)?;
                        Some((fresh.dev, fresh.ino))
                    }
                    Err(_) => None,
                },
            };
            bound.push(bound_now);
        }
        let scratch_bound = match Opened::open(scratch) {
            Ok(fresh) => {
                add_rule(&ruleset, scratch, &fresh, write_access(abi), abi)?;
                Some((fresh.dev, fresh.ino))
            }
            Err(_) => None,
        };
        bound.push(scratch_bound);
        Ok(Self {
            ruleset: Some(ruleset),
            rlimits,
            network: rules.network,
            bound,
        })
    }

    /// Whether this ruleset, built earlier, binds what every path of `rules` and `scratch`
    /// names now: then it confines a call starting now exactly as one built now would. A rule
    /// holds its inode, so an unchanged device and inode is the same file, not a reused number.
    pub fn is_current(&self, rules: &Rules, scratch: &Path) -> bool {
        if self.ruleset.is_none() {
            return true;
        }
        let now = rules
            .fixed
            .iter()
            .map(|rule| identity(&rule.path))
            .chain(std::iter::once(identity(scratch)));
        now.eq(self.bound.iter().copied())
    }

    /// No Landlock domain: only the process group, limits and seccomp filter (for hosts whose
    /// policy explicitly allows unconfined processes).
    pub fn unconfined(rlimits: Rlimits) -> Self {
        Self {
            ruleset: None,
            rlimits,
            // Unconfined processes reach the network over TCP anyway.
            network: true,
            bound: Vec::new(),
        }
    }

    /// Whether a Landlock domain is applied.
    pub fn is_confined(&self) -> bool {
        self.ruleset.is_some()
    }

    /// What the child applies before `exec`, with the CPU limit for this run; it borrows the
    /// ruleset descriptor, so the confinement outlives the spawn.
    pub fn in_child(&self, cpu_secs: u64) -> InChild<'_> {
        InChild {
            ruleset: self.ruleset.as_ref().map(AsFd::as_fd),
            network: self.network,
            limits: Rlimits {
                cpu_secs: cpu_secs.min(self.rlimits.cpu_secs).max(1),
                ..self.rlimits
            },
        }
    }
}

/// The confinement of one spawn, ready to apply in the child: only system calls remain.
#[derive(Debug, Clone, Copy)]
pub struct InChild<'a> {
    ruleset: Option<BorrowedFd<'a>>,
    network: bool,
    limits: Rlimits,
}

/// Everything but device creation: for the workspace (when writable) and the scratch.
fn write_access(abi: ABI) -> BitFlags<AccessFs> {
    // Device nodes are never created, whatever the grant.
    AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// The fixed filesystem rules of `plan`: system directories and selected `/etc` entries read
/// and execute, a few devices read-write, a few `/proc` files read, the granted programs and the
/// workspace. With each call's scratch directory, nothing else — home directories, the data
/// directory, `/root`, `/tmp`, `/run` — is reachable.
fn fs_rules(plan: &Plan, abi: ABI) -> Vec<(PathBuf, BitFlags<AccessFs>)> {
    let read_exec = AccessFs::from_read(abi);
    let workspace = if plan.workspace_writable {
        write_access(abi)
    } else {
        read_exec
    };
    let device = AccessFs::ReadFile | AccessFs::WriteFile;
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    rules.extend(SYSTEM_DIRS.iter().map(|d| (PathBuf::from(d), read_exec)));
    rules.extend(ETC_ENTRIES.iter().map(|e| (PathBuf::from(e), read_exec)));
    rules.extend(DEVICES.iter().map(|d| (PathBuf::from(d), device)));
    rules.extend(PROC_FILES.iter().map(|f| (PathBuf::from(f), read_exec)));
    // A program inside the workspace has the workspace's rule. A rule of its own would follow
    // whatever link an agent put at its path, out of the workspace, at the next call.
    let outside = |program: &PathBuf| {
        !program
            .canonicalize()
            .unwrap_or_else(|_| program.clone())
            .starts_with(&plan.workspace)
    };
    rules.extend(
        plan.programs
            .iter()
            .filter(|p| outside(p))
            .map(|p| (p.clone(), read_exec)),
    );
    rules.push((plan.workspace.clone(), workspace));
    rules
}

/// `landlock_add_rule` of a path-beneath rule: `access` on what `opened` is (only the file
/// rights for a file, which the kernel requires).
fn add_rule(
    ruleset: &OwnedFd,
    path: &Path,
    opened: &Opened,
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<(), ConfineError> {
    let access = if opened.is_dir {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    let attr = PathBeneathAttr {
        allowed_access: access.bits(),
        parent_fd: opened.fd.as_raw_fd(),
    };
    // SAFETY: both descriptors are open for the call, and `attr` is the kernel's packed
    // `landlock_path_beneath_attr`, read during the call only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc != 0 {
        return Err(ConfineError::AddRule {
            path: path.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// The kernel's `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

impl InChild<'_> {
    /// Apply it to the calling process: its own group, the limits, `no_new_privs`, no
    /// capability, the seccomp filter, then the Landlock domain. Only system calls, no
    /// allocation: this runs in the child, which shares the parent's memory until it execs.
    pub fn apply(&self) -> Result<(), (Step, std::io::Error)> {
        use rustix::process::{Resource, Rlimit, setrlimit};
        // Its own process group, so the host can kill it and everything it starts at once.
        rustix::process::setpgid(None, None).map_err(|e| (Step::Group, e.into()))?;
        let set = |resource, value: u64| {
            setrlimit(
                resource,
                Rlimit {
                    current: Some(value),
                    maximum: Some(value),
                },
            )
            .map_err(|e| (Step::Limits, e.into()))
        };
        let limits = &self.limits;
        set(Resource::Cpu, limits.cpu_secs)?;
        set(Resource::As, limits.address_space_bytes)?;
        set(Resource::Fsize, limits.file_size_bytes)?;
        set(Resource::Nproc, limits.processes)?;
        set(Resource::Nofile, limits.open_files)?;
        rustix::thread::set_no_new_privs(true).map_err(|e| (Step::NoNewPrivs, e.into()))?;
        drop_capabilities().map_err(|e| (Step::Capabilities, e))?;
        seccomp::install(self.network).map_err(|e| (Step::Seccomp, e))?;
        if let Some(fd) = self.ruleset {
            // SAFETY: `fd` is the ruleset descriptor borrowed from the `Confinement`, open for
            // the whole spawn; the call only reads it.
            let rc =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
            if rc != 0 {
                return Err((Step::Landlock, std::io::Error::last_os_error()));
            }
        }
        Ok(())
    }
}

/// The kernel's `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// The kernel's `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets, as two `CapData`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Empty the calling thread's effective, permitted, inheritable (and so ambient) capabilities.
/// A host running as root would otherwise hand every program all of root's capabilities, which
/// Landlock does not rule: raw sockets, real-time scheduling that starves the host, network
/// and clock administration, rebooting. With `no_new_privs` set, `execve` cannot give any back,
/// even to root.
fn drop_capabilities() -> std::io::Result<()> {
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: `header` and `none` are the kernel's capset structures (version 3: two data
    // entries), read during the call only; pid 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, none.as_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A seccomp filter that keeps a confined process in the process group the host kills at the
/// timeout (`setsid sleep 1000 &` would otherwise outlive the call) and away from the sockets
/// Landlock does not confine: Landlock (up to ABI 7) rules TCP only and sees no path a UNIX
/// socket connects to, so UDP, raw and other families would reach the network without a network
/// grant, and a UNIX socket anywhere on the host (an ssh agent, a container runtime) would be
/// reachable whatever the grant.
mod seccomp {
    use libc::{sock_filter, sock_fprog};

    const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const BPF_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const BPF_AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const OFFSET_NR: u32 = 0;
    const OFFSET_ARCH: u32 = 4;
    /// The low 32 bits of the first three arguments (little-endian).
    const OFFSET_ARG0: u32 = 16;
    const OFFSET_ARG1: u32 = 24;
    const OFFSET_ARG2: u32 = 32;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    /// `clone` flags that make a new namespace (mount, cgroup, UTS, IPC, user, PID, network).
    const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
        | libc::CLONE_NEWCGROUP
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET) as u32;
    /// The socket type without its `SOCK_NONBLOCK` / `SOCK_CLOEXEC` flags.
    const SOCK_TYPE_MASK: u32 = 0xf;

    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
    /// x32 system calls on x86_64 carry this bit; they are refused rather than decoded.
    const X32_BIT: u32 = 0x4000_0000;

    const fn stmt(code: u16, k: u32) -> sock_filter {
        sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
        sock_filter { code, jt, jf, k }
    }

    /// The filter; `network` lets `AF_INET` and `AF_INET6` sockets be made (Landlock still
    /// rules TCP's ports), and `NETLINK_ROUTE` ones, which name resolution reads the machine's
    /// addresses through. Without it no netlink socket is made: the kernel's socket table
    /// (`ss`), routes and neighbours (`ip`) are the host's, not the workspace's. No namespace
    /// is made or entered (`unshare`, `setns`, `clone` with a namespace flag): a user namespace
    /// opens kernel interfaces an unprivileged process never reaches otherwise. `clone3`, whose
    /// flags a filter cannot read, answers `ENOSYS`, and the C library falls back to `clone`.
    /// Jumps count the instructions skipped: ALLOW is at 25, EPERM at 26, ENOSYS at 27.
    const fn filter(network: bool) -> [sock_filter; 28] {
        // From 16, 17 and 19 (an IP or route netlink socket): to ALLOW with a network grant,
        // else to EPERM.
        let (inet, inet6, route) = if network { (8, 7, 5) } else { (9, 8, 6) };
        [
            /* 0 */ stmt(BPF_LD_W_ABS, OFFSET_ARCH),
            // Another architecture's system calls (e.g. 32-bit `int 0x80`) have other numbers.
            /* 1 */
            jump(BPF_JEQ_K, ARCH, 1, 0),
            /* 2 */ stmt(BPF_RET_K, ENOSYS),
            /* 3 */ stmt(BPF_LD_W_ABS, OFFSET_NR),
            /* 4 */ jump(BPF_JGE_K, X32_BIT, 21, 0),
            /* 5 */ jump(BPF_JEQ_K, libc::SYS_setsid as u32, 20, 0),
            /* 6 */ jump(BPF_JEQ_K, libc::SYS_setpgid as u32, 19, 0),
            // io_uring makes and connects sockets without the system calls below.
            /* 7 */
            jump(BPF_JEQ_K, libc::SYS_io_uring_setup as u32, 18, 0),
            /* 8 */ jump(BPF_JEQ_K, libc::SYS_unshare as u32, 17, 0),
            /* 9 */ jump(BPF_JEQ_K, libc::SYS_setns as u32, 16, 0),
            /* 10 */ jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 16, 0),
            /* 11 */ jump(BPF_JEQ_K, libc::SYS_clone as u32, 11, 0),
            /* 12 */ jump(BPF_JEQ_K, libc::SYS_socket as u32, 1, 0),
            /* 13 */ jump(BPF_JEQ_K, libc::SYS_socketpair as u32, 6, 11),
            // socket(): IP and route netlink with a network grant. Every other family, AF_UNIX
            // included, is refused.
            /* 14 */
            stmt(BPF_LD_W_ABS, OFFSET_ARG0),
            /* 15 */ jump(BPF_JEQ_K, libc::AF_NETLINK as u32, 2, 0),
            /* 16 */ jump(BPF_JEQ_K, libc::AF_INET as u32, inet, 0),
            /* 17 */ jump(BPF_JEQ_K, libc::AF_INET6 as u32, inet6, 8),
            /* 18 */ stmt(BPF_LD_W_ABS, OFFSET_ARG2),
            /* 19 */ jump(BPF_JEQ_K, libc::NETLINK_ROUTE as u32, route, 6),
            // socketpair(): connected pairs, except datagrams, which `sendto` can still aim at
            // any UNIX socket path.
            /* 20 */
            stmt(BPF_LD_W_ABS, OFFSET_ARG1),
            /* 21 */ stmt(BPF_AND_K, SOCK_TYPE_MASK),
            /* 22 */ jump(BPF_JEQ_K, libc::SOCK_DGRAM as u32, 3, 2),
            // clone(): any process or thread, in no new namespace.
            /* 23 */
            stmt(BPF_LD_W_ABS, OFFSET_ARG0),
            /* 24 */ jump(BPF_JSET_K, NAMESPACE_FLAGS, 1, 0),
            /* 25 */ stmt(BPF_RET_K, ALLOW),
            /* 26 */ stmt(BPF_RET_K, EPERM),
            /* 27 */ stmt(BPF_RET_K, ENOSYS),
        ]
    }

    static WITH_NETWORK: [sock_filter; 28] = filter(true);
    static WITHOUT_NETWORK: [sock_filter; 28] = filter(false);

    /// Install the filter on the calling thread (requires `no_new_privs`).
    pub fn install(network: bool) -> std::io::Result<()> {
        let filter = if network {
            &WITH_NETWORK
        } else {
            &WITHOUT_NETWORK
        };
        let prog = sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points at a static, valid BPF program for the duration of the call.
        let rc = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const sock_fprog,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}
