//! Test fixture: tools that misbehave on purpose (spin, sleep, exhaust memory or stack, flood
//! output and logs, panic, reach for the network and the host's files), so the host can prove
//! its limits hold and that it carries on afterwards.

use std::hint::black_box;

use chitin_sdk::prelude::*;

const MIB: usize = 1 << 20;

#[derive(Serialize, JsonSchema)]
struct OkOutput {
    /// Always true
    ok: bool,
}

fn ok(_: NoArgs) -> Result<OkOutput, ToolError> {
    Ok(OkOutput { ok: true })
}

fn spin(_: NoArgs) -> Result<OkOutput, ToolError> {
    let mut counter: u64 = 0;
    // black_box hides the counter from the optimiser, so the loop cannot be removed.
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

fn nap(_: NoArgs) -> Result<OkOutput, ToolError> {
    // `wasi:clocks` and a blocking poll: the call waits in the host, where no epoch tick
    // reaches it, so only the sandbox's wall-clock limit can end it.
    std::thread::sleep(std::time::Duration::from_secs(3600));
    Ok(OkOutput { ok: true })
}

fn grow(_: NoArgs) -> Result<OkOutput, ToolError> {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        // A non-zero fill writes every page (a zeroed allocation could skip fresh pages), and the
        // infallible allocation aborts the instance once memory runs out.
        kept.push(black_box(vec![0xa5; MIB]));
    }
}

#[derive(Deserialize, JsonSchema)]
struct RecurseArgs {
    /// How deep to recurse; by default deeper than any stack allows
    depth: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Recursed {
    /// The depth reached
    depth: u64,
    /// A value computed on the way back up, so the recursion cannot be optimised away
    checksum: u64,
}

fn recurse(args: RecurseArgs) -> Result<Recursed, ToolError> {
    let depth = args.depth.unwrap_or(u64::MAX);
    Ok(Recursed {
        depth,
        checksum: descend(depth),
    })
}

/// Each level combines the level below's result non-associatively, so it is no tail call and
/// cannot become a loop. Everything stays in wasm locals: nothing on Rust's shadow stack in linear
/// memory, which would otherwise run out first and fault as an out-of-bounds access instead of
/// exhausting the wasm call stack.
fn descend(depth: u64) -> u64 {
    if depth == 0 {
        return 0;
    }
    descend(depth - 1).rotate_left(1) ^ depth
}

#[derive(Deserialize, JsonSchema)]
struct HugeOutputArgs {
    /// Length of the returned string, in bytes
    bytes: u32,
}

#[derive(Serialize, JsonSchema)]
struct HugeOutput {
    /// "x" repeated `bytes` times
    data: String,
}

fn huge_output(args: HugeOutputArgs) -> Result<HugeOutput, ToolError> {
    Ok(HugeOutput {
        data: "x".repeat(args.bytes as usize),
    })
}

#[derive(Deserialize, JsonSchema)]
struct LogFloodArgs {
    /// How many ~100-byte entries to log (one 10 KiB entry follows them)
    count: u32,
}

#[derive(Serialize, JsonSchema)]
struct Logged {
    /// The count asked for
    logged: u32,
}

fn log_flood(args: LogFloodArgs) -> Result<Logged, ToolError> {
    for i in 0..args.count {
        chitin_sdk::log::info(&format!("log_flood entry {i:>10}: {}", "-".repeat(72)));
    }
    chitin_sdk::log::info(&"L".repeat(10 * 1024));
    Ok(Logged { logged: args.count })
}

#[derive(Deserialize, JsonSchema)]
struct StdoutFloodArgs {
    /// How many ~80-character lines to print to stdout, and again to stderr
    lines: u32,
}

#[derive(Serialize, JsonSchema)]
struct Printed {
    /// The line count asked for
    printed: u32,
}

fn stdout_flood(args: StdoutFloodArgs) -> Result<Printed, ToolError> {
    let filler = "=".repeat(60);
    for i in 0..args.lines {
        println!("stdout line {i:>8} {filler}");
        eprintln!("stderr line {i:>8} {filler}");
    }
    Ok(Printed {
        printed: args.lines,
    })
}

#[derive(Deserialize, JsonSchema)]
struct ReachArgs {
    /// An address to connect to (`127.0.0.1:PORT`)
    connect: String,
}

#[derive(Serialize, JsonSchema)]
struct Reached {
    /// What a TCP connect got: `ok` or the error
    connect: String,
    /// What binding a UDP socket got
    udp_bind: String,
    /// What a name lookup of `localhost` got
    lookup: String,
    /// What opening `/etc/passwd` got
    open_passwd: String,
}

fn outcome<T>(result: std::io::Result<T>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}

fn reach(args: ReachArgs) -> Result<Reached, ToolError> {
    use std::net::ToSocketAddrs;
    Ok(Reached {
        connect: outcome(std::net::TcpStream::connect(&args.connect)),
        udp_bind: outcome(std::net::UdpSocket::bind("0.0.0.0:0")),
        lookup: outcome("localhost:80".to_socket_addrs()),
        open_passwd: outcome(std::fs::File::open("/etc/passwd")),
    })
}

fn panic(_: NoArgs) -> Result<OkOutput, ToolError> {
    panic!("deliberate panic");
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("ok", "Returns {\"ok\": true}.", ok).output_schema::<OkOutput>(),
        Tool::new("spin", "Loops forever.", spin),
        Tool::new("nap", "Sleeps for an hour, waiting in the host.", nap),
        Tool::new(
            "grow",
            "Allocates 1 MiB blocks until memory runs out.",
            grow,
        ),
        Tool::new("recurse", "Recurses until the stack overflows.", recurse)
            .output_schema::<Recursed>(),
        Tool::new(
            "huge_output",
            "Returns a string of `bytes` bytes.",
            huge_output,
        )
        .output_schema::<HugeOutput>(),
        Tool::new(
            "log_flood",
            "Logs `count` entries and one 10 KiB entry.",
            log_flood,
        )
        .output_schema::<Logged>(),
        Tool::new(
            "stdout_flood",
            "Prints `lines` lines to stdout and to stderr.",
            stdout_flood,
        )
        .output_schema::<Printed>(),
        Tool::new("panic", "Panics.", panic),
        Tool::new(
            "reach",
            "Tries a TCP connect, a UDP bind, a name lookup and opening /etc/passwd.",
            reach,
        )
        .output_schema::<Reached>(),
    ]
}

chitin_sdk::export_tools!(tools);
