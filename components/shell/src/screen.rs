//! The screening layers a command passes before it runs, in order: blocked commands, dangerous
//! patterns, command-injection detection (each refuses), then the never-auto-approve patterns
//! (which require a person's approval). Every layer sees the command as the shell will, after
//! [`crate::lex`] undid quoting and pulled out nested scripts, which are screened too.

use crate::lex::{self, Simple, Word};

/// Which layer refused a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// Immediately destructive commands.
    Blocked,
    /// Privilege escalation and secret access.
    Dangerous,
    /// Commands built or decoded at run time to slip past the other layers.
    Injection,
}

/// The outcome of screening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Refused by `layer`, with the reason.
    Refused(Layer, String),
    /// May run; each reason listed needs a person's approval first.
    Allowed(Vec<String>),
}

/// Shells: their `-c` argument is a script of its own.
const POSIX_SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
];
/// Shells and interpreters: piping anything downloaded or decoded into one runs it.
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "php",
    "lua",
    "osascript",
];
/// Programs that fetch from the network.
const FETCHERS: &[&str] = &["curl", "wget", "fetch", "aria2c", "httpie", "http"];
/// Programs that decode or reverse text, used to hide a command from screening.
const DECODERS: &[&str] = &[
    "base64", "base32", "xxd", "od", "rev", "printf", "openssl", "uudecode", "gzip", "zcat",
    "gunzip", "tr",
];
/// Raw socket tools.
const NETCAT: &[&str] = &["nc", "ncat", "netcat", "socat", "telnet"];
/// Prefixes that run the command after them.
const WRAPPERS: &[&str] = &[
    "env", "command", "builtin", "exec", "nohup", "time", "nice", "ionice", "stdbuf", "timeout",
    "xargs", "chroot", "setsid", "unbuffer", "watch",
];

/// Layer 1: programs that are refused whatever their arguments.
const BLOCKED_PROGRAMS: &[&str] = &[
    "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "parted", "wipefs", "shutdown", "reboot",
    "poweroff", "halt", "init", "telinit",
];
/// Layer 2: privilege escalation.
const ESCALATION: &[&str] = &["sudo", "doas", "su", "pkexec", "runuser", "eval"];
/// Layer 2: paths that hold secrets or credentials (matched anywhere in a word or redirect).
const SECRET_PATHS: &[&str] = &[
    "/etc/passwd",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/.ssh",
    "~/.ssh",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    ".bash_history",
    ".zsh_history",
    ".sh_history",
    ".python_history",
    ".aws/credentials",
    ".netrc",
    ".gnupg",
    ".docker/config.json",
    ".kube/config",
    "/dev/tcp/",
    "/dev/udp/",
    "/proc/self/environ",
    "/environ",
    ".git-credentials",
    ".pgpass",
];
/// System roots whose recursive deletion is refused outright.
const SYSTEM_ROOTS: &[&str] = &[
    "/", "/*", "~", "~/", "~/*", "$home", "/bin", "/boot", "/dev", "/etc", "/home", "/lib",
    "/lib64", "/opt", "/proc", "/root", "/sbin", "/sys", "/usr", "/var", ".", "./", "..", "*",
];

/// Screen `command` through every layer.
pub fn screen(command: &str) -> Verdict {
    let mut approvals = Vec::new();
    match screen_script(command, 0, &mut approvals) {
        Err((layer, reason)) => Verdict::Refused(layer, reason),
        Ok(()) => {
            approvals.dedup();
            Verdict::Allowed(approvals)
        }
    }
}

type Refusal = (Layer, String);

fn screen_script(text: &str, depth: usize, approvals: &mut Vec<String>) -> Result<(), Refusal> {
    if depth > 8 {
        return Err((Layer::Injection, "commands nested more than 8 deep".into()));
    }
    if text.contains('\0') {
        return Err((Layer::Injection, "a null byte in the command".into()));
    }
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if is_fork_bomb(&compact) {
        return Err((Layer::Blocked, "a fork bomb".into()));
    }
    let lower = text.to_lowercase();
    for windows in ["format c:", "del /f", "del /s", "rmdir /s", "rd /s"] {
        if lower.contains(windows) {
            return Err((Layer::Blocked, format!("`{windows}` (destroys a disk)")));
        }
    }
    let script = lex::lex(text);
    for pipeline in &script.pipelines {
        screen_pipeline(pipeline, depth, approvals)?;
    }
    for nested in &script.nested {
        if let Some(fetch) = first_program_in(nested, FETCHERS) {
            return Err((
                Layer::Injection,
                format!(
                    "`{fetch}` inside a command substitution (its output would run or be used unseen)"
                ),
            ));
        }
        screen_script(nested, depth + 1, approvals)?;
    }
    Ok(())
}

/// The first program of `names` run by any command of `text`.
fn first_program_in(text: &str, names: &[&str]) -> Option<String> {
    lex::lex(text)
        .pipelines
        .iter()
        .flatten()
        .filter_map(|s| program(s).map(|(p, _)| p))
        .find(|p| names.contains(&p.as_str()))
}

fn is_fork_bomb(compact: &str) -> bool {
    // `f(){ f|f& };f` under any name: a function that pipes itself into itself in the background.
    let Some(open) = compact.find("(){") else {
        return false;
    };
    let name = compact[..open]
        .rsplit(|c: char| !(c.is_alphanumeric() || c == ':' || c == '_'))
        .next()
        .unwrap_or("");
    !name.is_empty() && compact[open..].contains(&format!("{name}|{name}&"))
}

/// The program a simple command runs (basename, lower case) and its arguments, skipping
/// assignments and wrappers such as `env`, `nohup` and `timeout 5`.
fn program(simple: &Simple) -> Option<(String, Vec<&Word>)> {
    let mut words = simple.words.iter().peekable();
    while let Some(word) = words.peek() {
        let text = &word.text;
        let is_assignment = text.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
        let base = basename(text);
        if is_assignment
            || WRAPPERS.contains(&base.as_str())
            || text.starts_with('-')
            || (text.chars().all(|c| c.is_ascii_digit() || c == '.') && !text.is_empty())
        {
            words.next();
        } else {
            break;
        }
    }
    let first = words.next()?;
    Some((basename(&first.text), words.collect()))
}

fn basename(text: &str) -> String {
    text.rsplit('/').next().unwrap_or(text).to_lowercase()
}

fn screen_pipeline(
    pipeline: &[Simple],
    depth: usize,
    approvals: &mut Vec<String>,
) -> Result<(), Refusal> {
    let programs: Vec<Option<(String, Vec<&Word>)>> = pipeline.iter().map(program).collect();
    for (i, simple) in pipeline.iter().enumerate() {
        if let Some(first) = simple.words.iter().find(|w| !is_assignment(&w.text))
            && first.dynamic
            && !first.text.starts_with('~')
        {
            return Err((
                Layer::Injection,
                format!(
                    "the command name `{}` is computed at run time, so it cannot be checked",
                    first.text
                ),
            ));
        }
        screen_redirects(simple)?;
        if simple
            .words
            .iter()
            .any(|w| w.text.starts_with("LD_PRELOAD=") || w.text.starts_with("LD_AUDIT="))
        {
            return Err((
                Layer::Dangerous,
                "LD_PRELOAD (code injected into every program)".into(),
            ));
        }
        let Some((prog, args)) = &programs[i] else {
            continue;
        };
        let later_shell = programs[i + 1..]
            .iter()
            .flatten()
            .find(|(p, _)| SHELLS.contains(&p.as_str()));
        screen_simple(prog, args, depth, approvals)?;
        if let Some((shell, _)) = later_shell {
            if FETCHERS.contains(&prog.as_str()) {
                return Err((
                    Layer::Blocked,
                    format!("downloaded code piped into `{shell}` (`{prog} … | {shell}`)"),
                ));
            }
            if DECODERS.contains(&prog.as_str())
                || prog == "echo" && args.iter().any(|a| a.text == "-e")
            {
                return Err((
                    Layer::Injection,
                    format!("decoded or reversed text piped into `{shell}` (`{prog} … | {shell}`)"),
                ));
            }
            if NETCAT.contains(&prog.as_str()) {
                return Err((
                    Layer::Injection,
                    format!("network input piped into `{shell}`"),
                ));
            }
        }
        if NETCAT.contains(&prog.as_str()) && pipeline.len() > 1 {
            return Err((
                Layer::Injection,
                format!("`{prog}` in a pipeline (a raw network channel)"),
            ));
        }
    }
    Ok(())
}

fn is_assignment(text: &str) -> bool {
    text.split_once('=')
        .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_'))
}

fn screen_redirects(simple: &Simple) -> Result<(), Refusal> {
    for (op, target) in &simple.redirects {
        let t = target.to_lowercase();
        if op.contains('>')
            && [
                "/dev/sd",
                "/dev/hd",
                "/dev/vd",
                "/dev/xvd",
                "/dev/nvme",
                "/dev/mmcblk",
                "/dev/mem",
                "/dev/kmem",
            ]
            .iter()
            .any(|d| t.starts_with(d))
        {
            return Err((
                Layer::Blocked,
                format!("writing to the raw device `{target}`"),
            ));
        }
        if let Some(secret) = SECRET_PATHS.iter().find(|s| t.contains(*s)) {
            return Err((
                Layer::Dangerous,
                format!("`{secret}` (credentials or a raw socket)"),
            ));
        }
    }
    Ok(())
}

fn screen_simple(
    prog: &str,
    args: &[&Word],
    depth: usize,
    approvals: &mut Vec<String>,
) -> Result<(), Refusal> {
    let lower: Vec<String> = args.iter().map(|a| a.text.to_lowercase()).collect();
    let has = |flag: &str| lower.iter().any(|a| a == flag);
    let short_flags: String = lower
        .iter()
        .filter(|a| a.starts_with('-') && !a.starts_with("--"))
        .flat_map(|a| a.chars().skip(1))
        .collect();
    // Layer 1: blocked.
    if BLOCKED_PROGRAMS.contains(&prog) || prog.starts_with("mkfs.") {
        return Err((
            Layer::Blocked,
            format!("`{prog}` (formats disks or stops the system)"),
        ));
    }
    if prog == "systemctl"
        && lower
            .iter()
            .any(|a| ["poweroff", "reboot", "halt", "kexec"].contains(&a.as_str()))
    {
        return Err((Layer::Blocked, "`systemctl` stopping the system".into()));
    }
    let recursive = short_flags.contains('r') || has("--recursive");
    let force = short_flags.contains('f') || has("--force");
    if prog == "rm" && recursive {
        if let Some(root) = lower.iter().find(|a| {
            SYSTEM_ROOTS.contains(&a.trim_end_matches('/').trim_end_matches("/*"))
                || SYSTEM_ROOTS.contains(&a.as_str())
        }) {
            return Err((
                Layer::Blocked,
                format!("`rm -r{}` of `{root}`", if force { "f" } else { "" }),
            ));
        }
        approvals.push(format!(
            "recursive delete (`rm -r{}`)",
            if force { "f" } else { "" }
        ));
    }
    if prog == "dd"
        && lower
            .iter()
            .any(|a| a.starts_with("if=/dev/") || a.starts_with("of=/dev/"))
    {
        return Err((Layer::Blocked, "`dd` from or to a device".into()));
    }
    if (prog == "chmod" || prog == "chown") && lower.iter().any(|a| a == "/" || a == "/*") {
        return Err((Layer::Blocked, format!("`{prog}` of the whole filesystem")));
    }
    // Layer 2: dangerous.
    if ESCALATION.contains(&prog) {
        return Err((
            Layer::Dangerous,
            format!("`{prog}` (privilege escalation or unchecked evaluation)"),
        ));
    }
    if let Some(secret) = lower
        .iter()
        .find_map(|a| SECRET_PATHS.iter().find(|s| a.contains(*s)))
    {
        return Err((
            Layer::Dangerous,
            format!("`{secret}` (credentials or a raw socket)"),
        ));
    }
    // Layer 3: injection.
    if NETCAT.contains(&prog)
        && (short_flags.contains('e') || short_flags.contains('c') || has("exec:"))
    {
        return Err((Layer::Injection, format!("`{prog} -e` (a reverse shell)")));
    }
    if FETCHERS.contains(&prog) {
        let posts_file = lower.windows(2).any(|w| {
            [
                "-d",
                "--data",
                "--data-binary",
                "--data-raw",
                "--data-urlencode",
                "-f",
                "--form",
                "-t",
                "--upload-file",
            ]
            .contains(&w[0].as_str())
                && (w[1].starts_with('@')
                    || w[1].contains("=@")
                    || w[0] == "-t"
                    || w[0] == "--upload-file")
        }) || lower.iter().any(|a| {
            a.starts_with("--data=@")
                || a.starts_with("-d@")
                || a.starts_with("--post-file")
                || a.starts_with("--body-file")
                || a.starts_with("--upload-file")
        });
        if posts_file {
            return Err((Layer::Injection, format!("`{prog}` uploading a local file")));
        }
    }
    if ["dig", "nslookup", "host", "drill", "ping"].contains(&prog)
        && args.iter().any(|a| a.dynamic)
    {
        return Err((
            Layer::Injection,
            format!("`{prog}` with a computed name (DNS exfiltration)"),
        ));
    }
    if SHELLS.contains(&prog) {
        // `sh -c '…'`, `python -c '…'`: the script is screened as a command of its own.
        if let Some(pos) = lower
            .iter()
            .position(|a| a == "-c" || a == "-e" || a == "--command")
            && let Some(body) = args.get(pos + 1)
        {
            if POSIX_SHELLS.contains(&prog) {
                screen_script(&body.text, depth + 1, approvals)?;
            } else if body.text.contains("b64decode")
                || body.text.contains("decode(")
                || body.text.contains("exec(")
                || body.text.contains("system(")
            {
                return Err((
                    Layer::Injection,
                    format!("`{prog}` decoding or executing generated code"),
                ));
            }
        }
    }
    // Layer 4: never auto-approve.
    never_auto_approve(prog, &lower, &short_flags, approvals);
    Ok(())
}

/// Irreversible operations: they may run, but only after a person approves.
fn never_auto_approve(prog: &str, args: &[String], short: &str, approvals: &mut Vec<String>) {
    let has = |a: &str| args.iter().any(|x| x == a);
    let sub = args.first().map(String::as_str).unwrap_or("");
    let joined = args.join(" ");
    let mut need = |why: &str| approvals.push(why.to_owned());
    match prog {
        "git" => {
            if sub == "push"
                && (has("--force")
                    || has("-f")
                    || has("--force-with-lease")
                    || args
                        .iter()
                        .any(|a| a.starts_with("+") || a.starts_with("--force")))
            {
                need("force push (`git push --force`)");
            }
            if sub == "push"
                && (has("--delete") || has("-d") || args.iter().any(|a| a.starts_with(':')))
            {
                need("deleting a remote branch");
            }
            if sub == "reset" && has("--hard") {
                need("`git reset --hard` (discards changes)");
            }
            if sub == "clean" && short.contains('f') {
                need("`git clean -f` (deletes untracked files)");
            }
            if sub == "branch" && (has("-d") || short.contains('D') || has("--delete")) {
                need("deleting a branch");
            }
            if (sub == "checkout" && has("--")) || sub == "restore" {
                need("discarding working-tree changes");
            }
            if sub == "rebase" || sub == "filter-branch" || sub == "filter-repo" {
                need("rewriting history");
            }
            if sub == "stash" && (has("drop") || has("clear")) {
                need("dropping stashes");
            }
        }
        "shred" | "wipe" | "srm" => need("secure deletion"),
        "truncate" => need("truncating files"),
        "find" if has("-delete") || (has("-exec") && joined.contains("rm ")) => {
            need("deleting files with `find`")
        }
        "xargs" if joined.starts_with("rm") => need("deleting files with `xargs rm`"),
        "kill" | "killall" | "pkill" => need("killing processes"),
        "chmod" | "chown" | "chgrp" if short.contains('r') || has("--recursive") => {
            need("recursive permission change")
        }
        "crontab" if short.contains('r') => need("removing the crontab"),
        "iptables" | "nft" | "ufw" => need("changing the firewall"),
        "userdel" | "groupdel" | "passwd" | "usermod" => need("changing accounts"),
        "docker" | "podman"
            if ["rm", "rmi", "prune", "system", "volume", "kill"].contains(&sub) =>
        {
            need("removing containers or images")
        }
        "kubectl" if ["delete", "drain", "replace"].contains(&sub) => {
            need("deleting Kubernetes resources")
        }
        "terraform" | "tofu" if ["destroy", "apply"].contains(&sub) => {
            need("changing infrastructure")
        }
        "npm" | "cargo" | "twine" | "gem" | "pnpm" | "yarn"
            if sub == "publish" || (sub == "upload") =>
        {
            need("publishing a package")
        }
        "mv" if args.last().is_some_and(|a| a == "/dev/null") => need("moving files to /dev/null"),
        "dd" => need("raw copy with `dd`"),
        _ => {}
    }
    for sql in [
        "drop table",
        "drop database",
        "drop schema",
        "truncate table",
        "delete from",
        "alter table",
    ] {
        if joined.contains(sql) {
            need(&format!("SQL `{}`", sql.to_uppercase()));
        }
    }
}
