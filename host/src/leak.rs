//! Leak detection: find credentials in text a component sends out or hands back.
//!
//! A [`LeakScanner`] knows two kinds of needle: built-in patterns of well-known credential
//! formats (cloud keys, tokens, private keys, connection strings with passwords), each with an
//! [`Action`], and the exact values of the secrets the call could reach. Outbound requests are
//! checked with [`LeakScanner::scan_outbound`] before the host injects credentials (any hit
//! refuses the request); results are passed through [`LeakScanner::scrub`], which replaces each
//! hit with `[REDACTED:name]` or blocks the whole text. Every other string a component sends
//! out (log entries, progress messages, approval reasons) passes [`LeakScanner::redact`].
//!
//! Obfuscation is looked through: the text is also scanned with invisible Unicode characters
//! removed and percent-escapes and JSON string escapes decoded (a tool's result is JSON, so a
//! file's `password = "..."` or a token at the start of a line reaches the scan as
//! `password = \"...\"` or `\ntoken`), and every base64, base64url or hex run of at least 16
//! characters is decoded and scanned, as is every such stream wrapped into lines of one width
//! (`base64`'s output, PEM, `xxd -p`), whole. Names, never values, appear in what is reported.
//!
//! Speed: every pattern begins with one of a few literal anchors (`AKIA`, `ghp_`, `-----BEGIN `,
//! `password`, ...). One vectorised multi-literal search over the lower-cased text finds where
//! they occur, and a pattern is tried, anchored, only there; its hits are exactly those of a
//! full regex pass (the tests compare the two). Only candidate runs are decoded.

use std::borrow::Cow;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use regex::bytes::{Regex, RegexSet};
use regex_automata::util::pool::Pool;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, PatternID, hybrid, meta};

use crate::secrets::{decode_hex, is_hex};

mod runs;
mod wrapped;

/// What to do when a pattern is found in a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Replace the match with `[REDACTED:name]`.
    Redact,
    /// Withhold the whole text.
    Block,
}

/// Exact secret values shorter than this are not looked for: a short value ("admin", a PIN)
/// occurs in ordinary text by chance, and redacting it would corrupt results without protecting
/// anything a guess could not find.
pub const MIN_SECRET_LEN: usize = 8;

/// Shortest base64/hex run that is decoded and scanned: the shortest credential worth finding
/// (8 bytes) encodes to at least 11 base64 characters; 16 keeps ordinary words out.
const MIN_ENCODED_RUN: usize = 16;

/// Text with more pattern anchors than one per this many bytes takes the whole-set pass: past
/// that, trying each anchor costs more than the pass (prose about APIs and tokens has a few per
/// KiB, and is faster tried at each).
const ANCHOR_SPACING: usize = 64;

/// Bytes the anchored pass may walk, per byte scanned, before it gives way to the whole-set
/// pass. A trial that fails can walk far (`eyJ-` followed by a megabyte of letters walks to the
/// end looking for the `.`), and a thousand such anchors in one text would cost a thousand walks:
/// the budget keeps a scan linear in its text whatever the text holds.
const TRIAL_STEPS_PER_BYTE: usize = 2;
/// Steps every text may take besides [`TRIAL_STEPS_PER_BYTE`], so short texts never switch.
const TRIAL_STEPS_BASE: usize = 64 * 1024;

/// Bytes of text lowered and searched for anchors at a time: small enough to stay in the CPU's
/// cache between the two.
const LOWER_WINDOW: usize = 32 * 1024;

/// A view with more edits than one per this many bytes is searched whole: where edits lie that
/// close together, searching around each (a byte at a time, the offsets looked up edit by edit)
/// costs more than the whole passes (a megabyte escaped throughout took 1.5× as long).
const EDIT_SPACING: usize = 64;

/// Text up to this many bytes is searched for anchors a byte at a time against the table of
/// their first two bytes ([`Compiled::leads`]): on so little text the SIMD search costs more to
/// set up than the bytes cost to check (a call's short result: ~640 instructions, against ~60).
const SHORT_TEXT: usize = 64;

/// A built-in credential pattern.
struct Pattern {
    /// The name reported (`github_token`).
    name: &'static str,
    /// The expression; a capture group named `s`, when present, is the part redacted.
    regex: &'static str,
    /// Every match begins with one of these, ASCII case folded to lower case: where they occur
    /// is where the expression is tried (the equivalence tests hold them to it).
    anchors: &'static [&'static str],
    /// What a hit does to a result.
    action: Action,
    /// Whether the redacted part must look random (generic key-like assignments: `password =
    /// see_the_docs` is prose, `password = "k8Jd2.Qz9wLp3"` is a credential).
    random: bool,
}

/// The built-in patterns. All are ASCII (`(?-u)`), so the DFA never gives up on non-ASCII input.
/// Order matters on ties: the more specific pattern comes first (`sk-ant-` before `sk-`).
const PATTERNS: &[Pattern] = &[
    Pattern {
        name: "private_key",
        regex: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        anchors: &["-----begin "],
        action: Action::Block,
        random: false,
    },
    Pattern {
        name: "aws_access_key_id",
        // In either case: a key ID lower-cased on its way out (a header name, which HTTP
        // lower-cases, or by the sender) is the same key to whoever upper-cases it again.
        regex: r"(?i)\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        anchors: &["akia", "asia"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "github_token",
        regex: r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "github_token",
        regex: r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
        anchors: &["github_pat_"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "slack_token",
        regex: r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        anchors: &["xox"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "stripe_key",
        regex: r"\b(?:sk|rk)_live_[A-Za-z0-9]{16,}",
        anchors: &["sk_live_", "rk_live_"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "anthropic_key",
        regex: r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        anchors: &["sk-ant-"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "openai_key",
        regex: r"\bsk-(?P<s>(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})",
        anchors: &["sk-"],
        action: Action::Redact,
        random: true,
    },
    Pattern {
        name: "google_api_key",
        regex: r"\bAIza[0-9A-Za-z_-]{35}",
        anchors: &["aiza"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "jwt",
        regex: r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        anchors: &["eyj"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "connection_string_password",
        regex: r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb|rediss?|amqps?)(?:\+[a-z0-9]+)?://[^\s:/@]*:(?P<s>[^\s@/]+)@",
        anchors: &["postgres", "mysql", "mariadb", "mongodb", "redis", "amqp"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "bearer_token",
        regex: r"(?i)\bauthorization[ \t]*:[ \t]*(?:bearer|token|basic)[ \t]+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)",
        anchors: &["authorization"],
        action: Action::Redact,
        random: false,
    },
    Pattern {
        name: "secret_assignment",
        regex: r#"(?i)(?:api[_-]?key|apikey|secret|secret[_-]?key|client[_-]?secret|password|passwd|access[_-]?token|auth[_-]?token)[A-Za-z0-9_-]*["']?[ \t]*[:=][ \t]*["']?(?P<s>[A-Za-z0-9._~+/=!@#$%^&*-]{12,})"#,
        anchors: &["api", "secret", "client", "passw", "access", "auth"],
        action: Action::Redact,
        random: true,
    },
];

/// The secret values a call can reach could not be compiled into one search; the call is
/// refused rather than run with its output unscanned for them.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot build the search for {values} secret values, so a call could not be kept from returning them: {source}"
)]
pub struct ScannerError {
    values: usize,
    #[source]
    source: aho_corasick::BuildError,
}

/// A credential found in outbound data: the request is refused. Names the pattern or the
/// secret, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Leak {
    /// A built-in pattern matched.
    #[error("the request carries what looks like a credential ({0}); refused")]
    Pattern(&'static str),
    /// The value of a secret the call can reach.
    #[error(
        "the request carries the value of secret `{0}`; refused (the host injects credentials \
         itself: see capabilities.http.credentials)"
    )]
    Secret(String),
}

/// What [`LeakScanner::scrub`] made of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scrubbed {
    /// Nothing found; use the text as it is.
    Clean,
    /// Hits were replaced by `[REDACTED:name]`: the new text and the names found (sorted, once).
    Redacted(String, Vec<String>),
    /// A pattern whose action is [`Action::Block`] matched: withhold the text.
    Blocked(String),
}

/// What a hit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needle {
    /// Index into [`PATTERNS`].
    Pattern(usize),
    /// Index into the scanner's secret names.
    Secret(usize),
}

/// A hit: a byte span of the original text and what was found there.
#[derive(Debug, Clone, Copy)]
struct Hit {
    start: usize,
    end: usize,
    needle: Needle,
}

/// Finds credentials in text. Built per call from the secrets the call can reach.
pub struct LeakScanner {
    /// The built-in patterns, compiled once per process.
    compiled: &'static Compiled,
    /// Names of the secrets looked for, by Aho-Corasick pattern index.
    secret_names: Vec<String>,
    /// The secrets' values; holds secret bytes, hence the hand-written `Debug`.
    secrets: Option<AhoCorasick>,
}

/// The built-in patterns compiled: the same for every scanner, so built once (a scanner is made
/// per call, and compiling the patterns costs milliseconds).
struct Compiled {
    /// Finds where any anchor occurs in lower-cased text.
    anchor_search: AnchorSearch,
    /// Every pattern's anchors (lower case) with the pattern each belongs to, sorted by anchor,
    /// so those that can begin where the search found one are a range (see [`lead`]).
    anchors: Vec<(&'static [u8], usize)>,
    /// The length of the longest anchor.
    longest_anchor: usize,
    /// Which bytes occur in an anchor (lower case).
    in_anchors: [bool; 256],
    /// Which pairs of bytes begin an anchor: bit `a << 8 | b` of this set is on where one
    /// begins with `a`, `b` (every anchor is longer than two bytes).
    leads: Box<[u64; 1024]>,
    /// The patterns, tried anchored where one of their anchors occurs.
    anchored: Vec<meta::Regex>,
    /// The patterns as one lazy DFA with a start state each: a trial walks it first, counting
    /// its steps, and only a trial that reaches a match runs `anchored` for the captures.
    trial: hybrid::dfa::DFA,
    /// The lazy DFA's caches, one per scan in flight, kept warm between scans.
    trial_caches: Pool<hybrid::dfa::Cache, TrialCacheFn>,
    /// All patterns at once, for text dense with anchors (see [`LeakScanner::find_patterns`]).
    set: RegexSet,
    /// The patterns for unanchored iteration, with the set.
    regexes: Vec<Regex>,
}

/// Makes a cache for [`Compiled::trial`].
type TrialCacheFn = Box<
    dyn Fn() -> hybrid::dfa::Cache
        + Send
        + Sync
        + std::panic::UnwindSafe
        + std::panic::RefUnwindSafe,
>;

/// The trial walk ran out of steps: the text goes to the whole-set pass.
struct OverBudget;

/// The search for anchors: Teddy (SIMD) where the CPU has it, else an Aho-Corasick automaton.
enum AnchorSearch {
    Packed(aho_corasick::packed::Searcher),
    Automaton(AhoCorasick),
}

impl AnchorSearch {
    /// Where the first anchor at or after `at` begins.
    fn next(&self, lowered: &[u8], at: usize) -> Option<usize> {
        match self {
            Self::Packed(searcher) => searcher
                .find_in(lowered, aho_corasick::Span::from(at..lowered.len()))
                .map(|m| m.start()),
            Self::Automaton(ac) => ac
                .find(aho_corasick::Input::new(lowered).span(at..lowered.len()))
                .map(|m| m.start()),
        }
    }
}

/// Append `bytes` to `out` lowered (ASCII), copied and lowered in one pass: 32 bytes an
/// instruction where the CPU has AVX2, 16 otherwise.
fn extend_lowered(out: &mut Vec<u8>, bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { extend_lowered_avx2(out, bytes) };
    }
    out.extend(bytes.iter().map(u8::to_ascii_lowercase));
}

/// [`extend_lowered`], compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn extend_lowered_avx2(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend(bytes.iter().map(u8::to_ascii_lowercase));
}

/// The first two bytes of `text` (fewer if it is shorter): every anchor that begins where
/// another was found shares that one's, and every anchor is longer.
fn lead(text: &[u8]) -> &[u8] {
    &text[..text.len().min(2)]
}

static COMPILED: std::sync::LazyLock<Compiled> = std::sync::LazyLock::new(|| {
    let mut anchors: Vec<(&'static [u8], usize)> = PATTERNS
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.anchors.iter().map(move |a| (a.as_bytes(), i)))
        .collect();
    anchors.sort_unstable();
    let literals = anchors.iter().map(|(a, _)| *a);
    let anchor_search = match aho_corasick::packed::Config::new()
        .builder()
        .extend(literals.clone())
        .build()
    {
        Some(searcher) => AnchorSearch::Packed(searcher),
        None => AnchorSearch::Automaton(
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(literals)
                .expect("leak pattern anchors build"),
        ),
    };
    let sources: Vec<String> = PATTERNS
        .iter()
        .map(|p| format!("(?-u){}", p.regex))
        .collect();
    // The patterns are constants covered by the tests: compiling them cannot fail.
    let trial = hybrid::dfa::DFA::builder()
        .configure(hybrid::dfa::Config::new().starts_for_each_pattern(true))
        .syntax(syntax::Config::new().utf8(false))
        .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
        .build_many(&sources)
        .expect("built-in leak patterns compile to a lazy DFA");
    let for_caches = trial.clone();
    let mut leads = Box::new([0u64; 1024]);
    for (anchor, _) in &anchors {
        let pair = usize::from(anchor[0]) << 8 | usize::from(anchor[1]);
        leads[pair / 64] |= 1 << (pair % 64);
    }
    Compiled {
        anchor_search,
        longest_anchor: anchors.iter().map(|(a, _)| a.len()).max().unwrap_or(1),
        in_anchors: {
            let mut table = [false; 256];
            for &b in anchors.iter().flat_map(|(a, _)| a.iter()) {
                table[usize::from(b)] = true;
            }
            table
        },
        leads,
        anchors,
        anchored: sources
            .iter()
            .map(|source| {
                // Byte semantics, as `regex::bytes::Regex`: the patterns are ASCII (`(?-u)`) and
                // the text may hold any bytes.
                meta::Regex::builder()
                    .syntax(syntax::Config::new().utf8(false))
                    .configure(meta::Config::new().utf8_empty(false))
                    .build(source)
                    .expect("built-in leak pattern compiles")
            })
            .collect(),
        trial,
        trial_caches: Pool::new(Box::new(move || for_caches.create_cache())),
        set: RegexSet::new(&sources).expect("built-in leak patterns compile"),
        regexes: sources
            .iter()
            .map(|s| Regex::new(s).expect("built-in leak pattern compiles"))
            .collect(),
    }
});

impl Compiled {
    /// [`LeakScanner::candidates`] of text up to [`SHORT_TEXT`] bytes, unsorted, looked for a
    /// byte at a time; `None` beyond `most` of them.
    fn short_candidates(
        &self,
        bytes: &[u8],
        most: usize,
        candidates: &mut Vec<(usize, usize)>,
    ) -> Option<()> {
        let mut buffer = [0u8; SHORT_TEXT];
        let lowered = buffer.get_mut(..bytes.len())?;
        lowered.copy_from_slice(bytes);
        lowered.make_ascii_lowercase();
        for (start, pair) in lowered.windows(2).enumerate() {
            if self.is_lead(pair) {
                self.anchors_at(&lowered[start..], start, candidates);
                if candidates.len() > most {
                    return None;
                }
            }
        }
        Some(())
    }

    /// [`LeakScanner::candidates`] of text of any length, unsorted, found by the anchor search;
    /// `None` beyond `most` of them.
    fn windowed_candidates(
        &self,
        bytes: &[u8],
        most: usize,
        candidates: &mut Vec<(usize, usize)>,
    ) -> Option<()> {
        // The text is lowered and searched a window at a time in one buffer, which stays in the
        // CPU's cache between the two, rather than copied whole first (a megabyte's copy was
        // ~5 % of a `read_file` of it). A window carries the bytes after it that an anchor
        // beginning inside it may need; one beginning in them is the next window's.
        let carry = self.longest_anchor - 1;
        let mut lowered = Vec::with_capacity(bytes.len().min(LOWER_WINDOW) + carry);
        let mut base = 0;
        while base < bytes.len() {
            let end = (base + LOWER_WINDOW).min(bytes.len());
            lowered.clear();
            extend_lowered(&mut lowered, &bytes[base..(end + carry).min(bytes.len())]);
            let mut at = 0;
            while let Some(start) = self.anchor_search.next(&lowered, at) {
                if base + start >= end {
                    break;
                }
                // Every anchor beginning here, not just the one the search reported: they
                // overlap (`sk-` and `sk-ant-`), and one may begin inside another
                // (`sk-----BEGIN`), hence the search goes on from the next byte.
                self.anchors_at(&lowered[start..], base + start, candidates);
                if candidates.len() > most {
                    return None;
                }
                at = start + 1;
            }
            base = end;
        }
        Some(())
    }

    /// The candidates of `view`, as [`LeakScanner::candidates`] would find them there (sorted),
    /// from those of the original text. An anchor is ASCII without `%` or `\`, so none the
    /// original holds takes in an edit's bytes: each is one the view holds too, unless it begins
    /// inside an escape (its letter or hex digits). What the view holds besides are anchors that
    /// an edit changed, which begin at most the longest anchor's length before its end and hold
    /// its bytes: only around an edit that left bytes an anchor may hold (or none, joining its
    /// neighbours) is the view searched again. A line break or tab decoded from a JSON escape,
    /// in no anchor, needs no search.
    fn view_candidates(&self, view: &View, original: &[(usize, usize)]) -> Vec<(usize, usize)> {
        let mut candidates: Vec<(usize, usize)> = original
            .iter()
            .filter_map(|&(i, at)| Some((i, view.in_view(at)?)))
            .collect();
        let reach = self.longest_anchor - 1;
        let bytes = &view.bytes;
        let mut lowered = Vec::with_capacity(self.longest_anchor);
        let mut searched = 0;
        for edit in &view.edits {
            let end = edit.at + edit.len;
            let decoded = &bytes[edit.at..end];
            if !decoded.is_empty()
                && decoded
                    .iter()
                    .all(|b| !self.in_anchors[usize::from(b.to_ascii_lowercase())])
            {
                continue;
            }
            for start in edit.at.saturating_sub(reach).max(searched)..end {
                let Some(pair) = bytes.get(start..start + 2) else {
                    break;
                };
                if self.is_lead(&[pair[0].to_ascii_lowercase(), pair[1].to_ascii_lowercase()]) {
                    lowered.clear();
                    let until = (start + self.longest_anchor).min(bytes.len());
                    lowered.extend(bytes[start..until].iter().map(u8::to_ascii_lowercase));
                    self.anchors_at(&lowered, start, &mut candidates);
                }
            }
            searched = searched.max(end);
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates
    }

    /// Whether an anchor begins with the two bytes `pair` (lower case).
    fn is_lead(&self, pair: &[u8]) -> bool {
        let pair = usize::from(pair[0]) << 8 | usize::from(pair[1]);
        self.leads[pair / 64] & (1 << (pair % 64)) != 0
    }

    /// Add (pattern, `at`) to `out` for every anchor that `here` (lower case) begins with. Only
    /// the anchors sharing its first two bytes can: a range of the sorted list, not every anchor
    /// (prose dense with anchor words finds one every few dozen bytes).
    fn anchors_at(&self, here: &[u8], at: usize, out: &mut Vec<(usize, usize)>) {
        let from = self
            .anchors
            .partition_point(|(anchor, _)| lead(anchor) < lead(here));
        out.extend(
            self.anchors[from..]
                .iter()
                .take_while(|(anchor, _)| lead(anchor) == lead(here))
                .filter(|(anchor, _)| here.starts_with(anchor))
                .map(|&(_, i)| (i, at)),
        );
    }

    /// Whether pattern `i` matches at `start`, by a walk of the lazy DFA that takes one step of
    /// `budget` per byte; a DFA that gives up counts as the budget running out.
    fn trial_matches(
        &self,
        cache: &mut hybrid::dfa::Cache,
        i: usize,
        bytes: &[u8],
        start: usize,
        budget: &mut usize,
    ) -> Result<bool, OverBudget> {
        let pattern = PatternID::new(i).map_err(|_| OverBudget)?;
        let input = Input::new(bytes)
            .range(start..)
            .anchored(Anchored::Pattern(pattern));
        let dfa = &self.trial;
        let mut state = dfa
            .start_state_forward(cache, &input)
            .map_err(|_| OverBudget)?;
        for &byte in &bytes[start..] {
            *budget = budget.checked_sub(1).ok_or(OverBudget)?;
            state = dfa.next_state(cache, state, byte).map_err(|_| OverBudget)?;
            if state.is_tagged() {
                // Matches show one byte late; any match means the full search finds one.
                if state.is_match() {
                    return Ok(true);
                }
                if state.is_dead() {
                    return Ok(false);
                }
                if state.is_quit() {
                    return Err(OverBudget);
                }
            }
        }
        let state = dfa.next_eoi_state(cache, state).map_err(|_| OverBudget)?;
        Ok(state.is_match())
    }
}

impl fmt::Debug for LeakScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeakScanner")
            .field("secrets", &self.secret_names)
            .finish_non_exhaustive()
    }
}

/// Forgiving base64 decoding: padding optional, stray trailing bits ignored.
const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
/// Lenient standard-alphabet base64.
const LENIENT_B64: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
/// Lenient URL-safe base64.
const LENIENT_B64URL: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

/// Bytes past a cut that are scanned with what is kept: a secret, plain or encoded, or a token
/// that crosses the cut is found whole and redacted before the cut is made.
pub const CUT_OVERLAP: usize = 16 * 1024;

/// What of `text` needs scanning when only its first `keep` bytes are kept: those and
/// [`CUT_OVERLAP`] more. A scan then costs what is kept, not what a component sent (a log entry
/// of megabytes held the serving thread for a second per entry).
pub fn scan_window(text: &str, keep: usize) -> &str {
    &text[..text.floor_char_boundary(keep.saturating_add(CUT_OVERLAP))]
}

impl LeakScanner {
    /// A scanner for the built-in patterns and the values of `secrets` (name, value). Values
    /// shorter than [`MIN_SECRET_LEN`] bytes are not looked for. Fails, rather than scan without
    /// them, when the values cannot be compiled into one search.
    pub fn new<'a>(
        secrets: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ScannerError> {
        let (secret_names, values): (Vec<String>, Vec<&str>) = secrets
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_SECRET_LEN)
            .map(|(name, value)| (name.to_owned(), value))
            .unzip();
        let secrets = if values.is_empty() {
            None
        } else {
            // Standard matching, searched with overlaps: a value that overlaps another's match
            // is found too, not hidden behind it. ASCII case is ignored: a hex or base32 value
            // printed in the other case is the same secret.
            let search = AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .ascii_case_insensitive(true)
                .build(&values)
                .map_err(|source| ScannerError {
                    values: values.len(),
                    source,
                })?;
            Some(search)
        };
        Ok(Self {
            compiled: &COMPILED,
            secret_names,
            secrets,
        })
    }

    /// The scanner for a call that can reach no secret: the built-in patterns alone, one
    /// shared instance rather than one built per call.
    pub fn patterns_only() -> std::sync::Arc<Self> {
        static SHARED: std::sync::LazyLock<std::sync::Arc<LeakScanner>> =
            std::sync::LazyLock::new(|| {
                std::sync::Arc::new(LeakScanner {
                    compiled: &COMPILED,
                    secret_names: Vec::new(),
                    secrets: None,
                })
            });
        SHARED.clone()
    }

    /// Check outbound data (URL, header lines, body) before credentials are injected: any
    /// credential pattern or reachable secret value refuses the request.
    pub fn scan_outbound(&self, text: &str) -> Result<(), Leak> {
        match self.hits(text).first() {
            None => Ok(()),
            Some(hit) => Err(match hit.needle {
                Needle::Pattern(i) => Leak::Pattern(PATTERNS[i].name),
                Needle::Secret(i) => Leak::Secret(self.secret_names[i].clone()),
            }),
        }
    }

    /// The one redactor for text a component sends out besides its result (log entries,
    /// progress messages, approval reasons, the arguments of a call it makes): every hit
    /// redacted, or, when a blocking pattern matched, a marker saying `what` was withheld.
    pub fn redact(&self, text: &str, what: &str) -> String {
        match self.scrub(text) {
            Scrubbed::Clean => text.to_owned(),
            Scrubbed::Redacted(redacted, _) => redacted,
            Scrubbed::Blocked(pattern) => {
                format!("[chitin: {what} withheld: it contained {pattern}]")
            }
        }
    }

    /// Scrub a result: redact every hit, or block the text when a blocking pattern matched.
    pub fn scrub(&self, text: &str) -> Scrubbed {
        let hits = self.hits(text);
        if hits.is_empty() {
            return Scrubbed::Clean;
        }
        if let Some(block) = hits.iter().find_map(|h| match h.needle {
            Needle::Pattern(i) if PATTERNS[i].action == Action::Block => Some(PATTERNS[i].name),
            _ => None,
        }) {
            return Scrubbed::Blocked(block.to_owned());
        }
        self.replaced(text, hits)
    }

    /// Whether the scanner looks for secret values (the call can reach some).
    pub fn has_values(&self) -> bool {
        self.secrets.is_some()
    }

    /// Redact the secret values from `bytes`, plain or encoded, and leave the built-in patterns
    /// be: for what a server sends a component, which must never hand it a value the host
    /// injected (an echo of the request, an account page), while a token the server issues is
    /// the component's to use. Bytes that are not UTF-8 are searched for the plain values only.
    pub fn redact_values<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        if self.secrets.is_none() {
            return Cow::Borrowed(bytes);
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            let mut hits = Vec::new();
            self.find_secrets(bytes, &mut hits);
            if hits.is_empty() {
                return Cow::Borrowed(bytes);
            }
            let mut out = Vec::with_capacity(bytes.len());
            let mut at = 0;
            for hit in merge(hits) {
                out.extend_from_slice(&bytes[at..hit.start]);
                out.extend_from_slice(format!("[REDACTED:{}]", self.name(hit.needle)).as_bytes());
                at = hit.end;
            }
            out.extend_from_slice(&bytes[at..]);
            return Cow::Owned(out);
        };
        let hits: Vec<Hit> = self
            .hits(text)
            .into_iter()
            .filter(|h| matches!(h.needle, Needle::Secret(_)))
            .collect();
        match self.replaced(text, hits) {
            Scrubbed::Redacted(out, _) => Cow::Owned(out.into_bytes()),
            Scrubbed::Clean | Scrubbed::Blocked(_) => Cow::Borrowed(bytes),
        }
    }

    /// `text` with every hit replaced by `[REDACTED:name]`.
    fn replaced(&self, text: &str, hits: Vec<Hit>) -> Scrubbed {
        if hits.is_empty() {
            return Scrubbed::Clean;
        }
        let mut out = String::with_capacity(text.len());
        let mut names: Vec<String> = Vec::new();
        let mut at = 0;
        for hit in merge(hits) {
            let name = self.name(hit.needle);
            // A span that begins just after the backslash of an escape takes the backslash too,
            // so that a JSON result stays JSON.
            let escaping = text.as_bytes()[at..hit.start]
                .iter()
                .rev()
                .take_while(|&&b| b == b'\\')
                .count();
            out.push_str(&text[at..hit.start - escaping % 2]);
            out.push_str("[REDACTED:");
            out.push_str(name);
            out.push(']');
            at = hit.end;
            names.push(name.to_owned());
        }
        out.push_str(&text[at..]);
        names.sort();
        names.dedup();
        Scrubbed::Redacted(out, names)
    }

    /// The name reported for a needle.
    fn name(&self, needle: Needle) -> &str {
        match needle {
            Needle::Pattern(i) => PATTERNS[i].name,
            Needle::Secret(i) => &self.secret_names[i],
        }
    }

    /// Every hit in `text` and in its decoded views, as spans of `text` on char boundaries.
    fn hits(&self, text: &str) -> Vec<Hit> {
        self.hits_with(text, View::is_sparse)
    }

    /// [`LeakScanner::hits`], the view searched only around its edits where `by_edits` says so
    /// and by whole passes otherwise; the hits are the same either way.
    fn hits_with(&self, text: &str, by_edits: impl Fn(&View) -> bool) -> Vec<Hit> {
        let raw = text.as_bytes();
        let mut hits = Vec::new();
        let candidates = self.find_patterns(raw, &mut hits);
        self.find_secrets(raw, &mut hits);
        // The run search notes, in the same pass, where an obfuscation may begin; most text has
        // no such byte and needs no view.
        let leads = self.find_encoded(raw, &mut hits);
        if leads.any()
            && let Some(view) = self.view(raw, &leads, candidates.as_deref())
        {
            let mut found = Vec::new();
            if by_edits(&view) {
                self.find_view_patterns(&view, candidates.as_deref(), &mut found);
                self.find_view_encoded(&view, &mut found);
            } else {
                self.find_patterns(&view.bytes, &mut found);
                self.find_encoded(&view.bytes, &mut found);
            }
            self.find_secrets(&view.bytes, &mut found);
            hits.extend(found.into_iter().map(|h| Hit {
                start: view.original(h.start),
                end: view.original(h.end),
                needle: h.needle,
            }));
        }
        for hit in &mut hits {
            hit.start = text.floor_char_boundary(hit.start);
            hit.end = text.ceil_char_boundary(hit.end);
        }
        hits
    }

    /// Hits of the built-in patterns, by pattern in table order and by position within one:
    /// what each pattern's leftmost-first iteration over the whole text finds. A pattern is only
    /// tried, anchored, where one of its anchors occurs, so a megabyte without anchors costs one
    /// lower-casing copy and one SIMD multi-literal search instead of a DFA pass. Text dense with
    /// anchors (more than one per [`ANCHOR_SPACING`] bytes) takes the whole-set pass instead,
    /// whose cost does not grow with them: the search stops at the bound, so such text costs
    /// little more than that pass. So does text whose trials walk more than
    /// [`TRIAL_STEPS_PER_BYTE`] steps a byte.
    ///
    /// Returns the candidates when the anchored pass answered, for the view's pass (see
    /// [`LeakScanner::find_view_patterns`]).
    fn find_patterns(&self, bytes: &[u8], out: &mut Vec<Hit>) -> Option<Vec<(usize, usize)>> {
        let candidates = self.candidates(bytes, most_candidates(bytes));
        self.find_patterns_from(bytes, candidates, out)
    }

    /// Hits of the built-in patterns: tried anchored at `candidates` when the search gave them
    /// (no more than [`most_candidates`]) and the trials keep within their budget, else by the
    /// whole-set pass. Returns the candidates when they answered.
    fn find_patterns_from(
        &self,
        bytes: &[u8],
        candidates: Option<Vec<(usize, usize)>>,
        out: &mut Vec<Hit>,
    ) -> Option<Vec<(usize, usize)>> {
        if let Some(candidates) = candidates.filter(|c| c.len() <= most_candidates(bytes)) {
            let found = out.len();
            let budget = TRIAL_STEPS_BASE + TRIAL_STEPS_PER_BYTE * bytes.len();
            match self.find_anchored(bytes, &candidates, budget, out) {
                Ok(()) => return Some(candidates),
                Err(OverBudget) => out.truncate(found),
            }
        }
        self.find_patterns_everywhere(bytes, out);
        None
    }

    /// Hits of the built-in patterns in `view`, the same as its own [`LeakScanner::find_patterns`]
    /// finds. An anchor the view holds away from every edit is one the original holds, so where
    /// the original's pass was anchored its `original` candidates are taken over and only the
    /// bytes around the edits are searched again (see [`Compiled::view_candidates`]).
    fn find_view_patterns(
        &self,
        view: &View,
        original: Option<&[(usize, usize)]>,
        out: &mut Vec<Hit>,
    ) {
        let candidates = match original {
            Some(original) => Some(self.compiled.view_candidates(view, original)),
            None => self.candidates(&view.bytes, most_candidates(&view.bytes)),
        };
        self.find_patterns_from(&view.bytes, candidates, out);
    }

    /// Where each pattern could match (pattern, start), sorted; `None` beyond `most` of them.
    fn candidates(&self, bytes: &[u8], most: usize) -> Option<Vec<(usize, usize)>> {
        let mut candidates: Vec<(usize, usize)> = Vec::new();
        if bytes.len() <= SHORT_TEXT {
            self.compiled
                .short_candidates(bytes, most, &mut candidates)?;
        } else {
            self.compiled
                .windowed_candidates(bytes, most, &mut candidates)?;
        }
        candidates.sort_unstable();
        candidates.dedup();
        Some(candidates)
    }

    /// Hits of the patterns tried anchored at `candidates`: each pattern's leftmost-first
    /// iteration, which only ever finds a match at one of them. The trials walk at most `budget`
    /// bytes in all; beyond that the hits pushed so far are incomplete.
    fn find_anchored(
        &self,
        bytes: &[u8],
        candidates: &[(usize, usize)],
        mut budget: usize,
        out: &mut Vec<Hit>,
    ) -> Result<(), OverBudget> {
        let compiled = self.compiled;
        let Some(&(first, _)) = candidates.first() else {
            return Ok(());
        };
        let mut cache = compiled.trial_caches.get();
        // Where the current pattern's iteration stands: its last match ended at `resume`.
        let mut pattern = first;
        let mut caps = compiled.anchored[pattern].create_captures();
        let mut resume = 0;
        for &(i, start) in candidates {
            if i != pattern {
                pattern = i;
                caps = compiled.anchored[i].create_captures();
                resume = 0;
            }
            if start < resume
                || !compiled.trial_matches(&mut cache, i, bytes, start, &mut budget)?
            {
                continue;
            }
            let input = Input::new(bytes).range(start..).anchored(Anchored::Yes);
            compiled.anchored[i].search_captures(&input, &mut caps);
            let Some(whole) = caps.get_match() else {
                continue;
            };
            resume = whole.end();
            let span = caps.get_group_by_name("s").unwrap_or(whole.span());
            self.push_pattern_hit(i, bytes, span.range(), out);
        }
        Ok(())
    }

    /// Hits of the built-in patterns by one pass of the whole set, then each matched pattern's
    /// iteration: for text dense with anchors.
    fn find_patterns_everywhere(&self, bytes: &[u8], out: &mut Vec<Hit>) {
        for i in self.compiled.set.matches(bytes).iter() {
            for caps in self.compiled.regexes[i].captures_iter(bytes) {
                if let Some(span) = caps.name("s").or_else(|| caps.get(0)) {
                    self.push_pattern_hit(i, bytes, span.range(), out);
                }
            }
        }
    }

    /// Record a hit of pattern `i` on `span` of `bytes`. The `s` group, where a pattern has one,
    /// is the credential itself: only it is redacted, so `Authorization: Bearer` or
    /// `postgres://user:` stay readable.
    fn push_pattern_hit(
        &self,
        i: usize,
        bytes: &[u8],
        span: std::ops::Range<usize>,
        out: &mut Vec<Hit>,
    ) {
        if PATTERNS[i].random && !looks_random(&bytes[span.clone()]) {
            return;
        }
        out.push(Hit {
            start: span.start,
            end: span.end,
            needle: Needle::Pattern(i),
        });
    }

    /// Hits of the secret values.
    fn find_secrets(&self, bytes: &[u8], out: &mut Vec<Hit>) {
        if let Some(ac) = &self.secrets {
            for m in ac.find_overlapping_iter(bytes) {
                out.push(Hit {
                    start: m.start(),
                    end: m.end(),
                    needle: Needle::Secret(m.pattern().as_usize()),
                });
            }
        }
    }

    /// Hits inside base64/base64url/hex runs of `bytes`, decoded: each is reported as the whole
    /// run (a part of an encoding cannot be redacted meaningfully). A run that begins with the
    /// letter of a JSON escape (`\n`, `\r`, `\t`, `\b`, `\f`: a line break or tab in a tool's
    /// result) is also decoded without it, as the view holds it, so that the view's pass need
    /// not search it again (see [`LeakScanner::find_view_encoded`]). Returns where in `bytes`
    /// an obfuscation or escape may begin.
    fn find_encoded(&self, bytes: &[u8], out: &mut Vec<Hit>) -> runs::Leads {
        let mut found = Vec::new();
        // A stream wrapped into lines is decoded whole too, from its first line; its other
        // lines begin no stream of their own.
        let (mut stream, mut stream_end) = (Vec::new(), 0);
        runs::encoded_runs(bytes, |run| {
            self.find_in_run(run.clone(), &bytes[run.clone()], &mut found, out);
            if run.start > 0
                && bytes[run.start - 1] == b'\\'
                && is_escape_letter(bytes[run.start])
                && run.len() > MIN_ENCODED_RUN
            {
                let unescaped = run.start + 1..run.end;
                self.find_in_run(unescaped.clone(), &bytes[unescaped], &mut found, out);
            }
            if run.start >= stream_end
                && let Some(span) = wrapped::stream_from(bytes, run, &mut stream)
            {
                stream_end = span.end;
                self.find_in_run(span, &stream, &mut found, out);
            }
        })
    }

    /// The hit, if any, in `encoded` decoded, reported as `span` (`found` is scratch space).
    fn find_in_run(
        &self,
        span: std::ops::Range<usize>,
        encoded: &[u8],
        found: &mut Vec<Hit>,
        out: &mut Vec<Hit>,
    ) {
        // With no secret values to look for, only a decoding that is text can hold a hit: most
        // long runs are ruled out by their first bytes without decoding them whole.
        if self.secrets.is_none() && !may_decode_to_text(encoded) {
            return;
        }
        let Some(decoded) = decode_run(encoded) else {
            return;
        };
        found.clear();
        self.find_secrets(&decoded, found);
        // Decoded binary (an image, compressed data) is only searched for secret values:
        // patterns are text, and running them over every identifier-like run that decodes to
        // noise would cost time for nothing.
        if looks_like_text(&decoded) {
            self.find_patterns(&decoded, found);
        }
        // One hit per needle kind in a run is enough to redact or refuse it.
        if let Some(hit) = found.iter().min_by_key(|h| priority(h.needle)) {
            out.push(Hit {
                start: span.start,
                end: span.end,
                needle: hit.needle,
            });
        }
    }

    /// Hits inside the encoded runs of `view` that an edit touches. Every other run of the view
    /// is, with the bytes on either side of it, one of the original's, whose hits are in already:
    /// only the stretches around the edits are searched, each widened to bytes no run or its
    /// padding can cross.
    ///
    /// A JSON escape of one letter decoded to a byte outside the runs' alphabet (`\n`, `\"`,
    /// `\\`; not `\/`) needs no search: the runs before it end at its `\` in the original as at
    /// its byte in the view, and the run after it is the original's, or the original's without
    /// the escape's letter, which the original's pass decoded too.
    fn find_view_encoded(&self, view: &View, out: &mut Vec<Hit>) {
        let bytes = &view.bytes;
        let widen_left = |mut at: usize| {
            while at > 0 && runs::in_run(bytes[at - 1]) {
                at -= 1;
            }
            at
        };
        let widen_right = |mut at: usize| {
            while at < bytes.len() && runs::in_run(bytes[at]) {
                at += 1;
            }
            at
        };
        let mut stretches: Vec<std::ops::Range<usize>> = Vec::new();
        let one_letter = |edit: &&Edit| {
            edit.original.len() == 2 && edit.len == 1 && !runs::in_run(bytes[edit.at])
        };
        for edit in view.edits.iter().filter(|e| !one_letter(e)) {
            // The edit's bytes, widened to the runs on either side (which a deleted character
            // joins, and a decoded one extends or ends).
            let (start, end) = (edit.at, edit.at + edit.len);
            match stretches.last_mut() {
                Some(last) if start <= last.end => last.end = widen_right(end.max(last.end)),
                _ => stretches.push(widen_left(start)..widen_right(end)),
            }
        }
        let mut found = Vec::new();
        for stretch in stretches {
            found.clear();
            self.find_encoded(&bytes[stretch.clone()], &mut found);
            out.extend(found.iter().map(|h| Hit {
                start: stretch.start + h.start,
                end: stretch.start + h.end,
                needle: h.needle,
            }));
        }
    }
}

/// The most candidates the anchored pass tries in `bytes` before the whole-set pass is cheaper:
/// one per [`ANCHOR_SPACING`] bytes, and a few for short text.
fn most_candidates(bytes: &[u8]) -> usize {
    64 + bytes.len() / ANCHOR_SPACING
}

/// Sort key: a blocking pattern first, then secrets, then redacting patterns in table order.
fn priority(needle: Needle) -> (u8, usize) {
    match needle {
        Needle::Pattern(i) if PATTERNS[i].action == Action::Block => (0, i),
        Needle::Secret(i) => (1, i),
        Needle::Pattern(i) => (2, i),
    }
}

/// Non-overlapping hits in text order; overlapping ones become one span named after the most
/// important of them.
fn merge(mut hits: Vec<Hit>) -> Vec<Hit> {
    hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end), priority(h.needle)));
    let mut out: Vec<Hit> = Vec::with_capacity(hits.len());
    for hit in hits {
        match out.last_mut() {
            Some(last) if hit.start < last.end => {
                last.end = last.end.max(hit.end);
                if priority(hit.needle) < priority(last.needle) {
                    last.needle = hit.needle;
                }
            }
            _ => out.push(hit),
        }
    }
    out
}

/// Whether `b`, after a `\`, is a JSON escape that decodes to a control character.
fn is_escape_letter(b: u8) -> bool {
    matches!(b, b'n' | b'r' | b't' | b'b' | b'f')
}

/// How a run decodes.
enum Encoding {
    Hex,
    Base64(&'static GeneralPurpose),
}

/// The part of a run that is decoded, and how: hex when it is all hex digits of even length (a
/// digest or hex-wrapped text), else lenient base64 of whichever alphabet it uses. `None` when
/// it is neither.
fn encoding(run: &[u8]) -> Option<(Encoding, &[u8])> {
    let trimmed = unpadded(run);
    if is_hex_run(trimmed) {
        return Some((Encoding::Hex, trimmed));
    }
    Some((Encoding::Base64(base64_alphabet(trimmed)?), usable(trimmed)))
}

/// A run without its `=` padding.
fn unpadded(run: &[u8]) -> &[u8] {
    run.strip_suffix(b"==")
        .or(run.strip_suffix(b"="))
        .unwrap_or(run)
}

/// Whether an unpadded run is hex: all hex digits, of even length.
fn is_hex_run(trimmed: &[u8]) -> bool {
    trimmed.len().is_multiple_of(2) && is_hex(trimmed)
}

/// The base64 alphabet `chars` are in: URL-safe when they hold `-` or `_`, standard otherwise;
/// `None` when they hold signs of both, which is not base64 (a path or an identifier).
fn base64_alphabet(chars: &[u8]) -> Option<&'static GeneralPurpose> {
    let url_safe = memchr::memchr2(b'-', b'_', chars).is_some();
    if url_safe && memchr::memchr2(b'+', b'/', chars).is_some() {
        return None;
    }
    Some(if url_safe {
        &LENIENT_B64URL
    } else {
        &LENIENT_B64
    })
}

/// An unpadded base64 run without a dangling sixth of a byte, which cannot be decoded: dropped
/// rather than the whole run.
fn usable(trimmed: &[u8]) -> &[u8] {
    &trimmed[..trimmed.len() - usize::from(trimmed.len() % 4 == 1)]
}

/// Decode a run (see [`encoding`]). `None` when it does not decode to anything long enough to
/// hold a credential.
fn decode_run(run: &[u8]) -> Option<Vec<u8>> {
    match encoding(run)? {
        (Encoding::Hex, digits) => Some(decode_hex(digits)),
        (Encoding::Base64(engine), usable) => engine
            .decode(usable)
            .ok()
            .filter(|d| d.len() >= MIN_SECRET_LEN),
    }
}

/// Characters of a long run decoded first to rule out text (48 bytes of base64, 32 of hex).
const PROBE: usize = 64;

/// Whether a run's decoding may be text: `false` only when it certainly is not, because its
/// first bytes already are not (an image, compressed data, an identifier). The three bytes of
/// a base64 run's first four characters are the start of its decoding, and the decoding of a
/// long run's first [`PROBE`] characters the start of the rest.
fn may_decode_to_text(run: &[u8]) -> bool {
    let trimmed = unpadded(run);
    let hex = is_hex_run(trimmed);
    let usable = if hex { trimmed } else { usable(trimmed) };
    // Most runs that are not text are ruled out by their first quad alone, short ones too. It
    // is decoded by a table of both alphabets: where the run mixes them, it is not base64 and
    // decodes to nothing (see `encoding`), so ruling it out changes nothing.
    if !hex && first_quad(usable).is_some_and(|bytes| !begins_as_text(&bytes)) {
        return false;
    }
    let Some(probe) = usable.get(..PROBE).filter(|_| usable.len() > PROBE) else {
        return true;
    };
    // Only the probe's signs choose the alphabet it is decoded in, so the rest of a long run is
    // not read here. Where the rest has signs of the other alphabet, the whole run is not base64
    // and decodes to nothing: no text either way.
    let engine = if hex {
        None
    } else {
        match base64_alphabet(probe) {
            Some(engine) => Some(engine),
            None => return true,
        }
    };
    let mut buffer = [0u8; PROBE];
    // A probe that does not decode says nothing of the run: it may be text.
    decode_probe(probe, engine, &mut buffer).is_none_or(begins_as_text)
}

/// The value of each base64 character in either alphabet (`+` and `-` are 62, `/` and `_`
/// 63); [`NOT_BASE64`] for any other byte.
const BASE64_VALUES: [u8; 256] = {
    let mut table = [NOT_BASE64; 256];
    let mut i = 0;
    while i < 26 {
        table[b'A' as usize + i] = i as u8;
        table[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        table[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    table[b'+' as usize] = 62;
    table[b'-' as usize] = 62;
    table[b'/' as usize] = 63;
    table[b'_' as usize] = 63;
    table
};
/// A byte that is no base64 character.
const NOT_BASE64: u8 = 0xFF;

/// The three bytes the first four base64 characters of `chars` decode to; `None` when one of
/// them is not base64.
fn first_quad(chars: &[u8]) -> Option<[u8; 3]> {
    let quad = chars.first_chunk::<4>()?;
    let mut bits = 0u32;
    for &c in quad {
        let value = BASE64_VALUES[usize::from(c)];
        if value == NOT_BASE64 {
            return None;
        }
        bits = bits << 6 | u32::from(value);
    }
    let [_, a, b, c] = bits.to_be_bytes();
    Some([a, b, c])
}

/// `chars` decoded into `buffer` (on the stack: a probe's 64 characters are at most 48 bytes) as
/// base64 by `engine`, or as hex without one; `None` when they do not decode.
fn decode_probe<'b>(
    chars: &[u8],
    engine: Option<&GeneralPurpose>,
    buffer: &'b mut [u8; PROBE],
) -> Option<&'b [u8]> {
    let len = match engine {
        Some(engine) => engine.decode_slice(chars, buffer).ok()?,
        None => {
            let bytes = decode_hex(chars);
            buffer.get_mut(..bytes.len())?.copy_from_slice(&bytes);
            bytes.len()
        }
    };
    buffer.get(..len)
}

/// Whether `decoded` may be the start of text: what [`looks_like_text`] accepts, or that cut
/// inside a character at its end.
fn begins_as_text(decoded: &[u8]) -> bool {
    match std::str::from_utf8(decoded) {
        Ok(_) => looks_like_text(decoded),
        // A character cut at the end of the probe may go on in the rest.
        Err(e) if e.error_len().is_none() => looks_like_text(&decoded[..e.valid_up_to()]),
        Err(_) => false,
    }
}

/// A decoded copy of the text and where it differs from the original.
struct View {
    bytes: Vec<u8>,
    /// The obfuscations removed, in order.
    edits: Vec<Edit>,
}

/// One obfuscation removed: `original` of the text became the `len` bytes (what a decoded
/// escape stands for, or none) at `at` in the view.
struct Edit {
    at: usize,
    len: usize,
    original: std::ops::Range<usize>,
}

impl View {
    /// Whether the view has at most one edit per [`EDIT_SPACING`] bytes, so that searching it
    /// around its edits is cheaper than searching it whole.
    fn is_sparse(&self) -> bool {
        self.edits.len() <= self.bytes.len() / EDIT_SPACING
    }

    /// The offset in the original text of the view's offset `at` (its end included): a decoded
    /// byte's is its escape's.
    fn original(&self, at: usize) -> usize {
        let before = self.edits.partition_point(|e| e.at <= at);
        match before.checked_sub(1).map(|i| &self.edits[i]) {
            None => at,
            Some(edit) if at < edit.at + edit.len => edit.original.start,
            Some(edit) => edit.original.end + (at - edit.at - edit.len),
        }
    }

    /// The view's offset of the original's offset `at`, or `None` where an edit removed it.
    fn in_view(&self, at: usize) -> Option<usize> {
        let before = self.edits.partition_point(|e| e.original.start <= at);
        match before.checked_sub(1).map(|i| &self.edits[i]) {
            None => Some(at),
            Some(edit) if at < edit.original.end => None,
            Some(edit) => Some(edit.at + edit.len + (at - edit.original.end)),
        }
    }
}

impl LeakScanner {
    /// The view of `raw` (the text with invisible characters removed and escapes decoded), or
    /// `None` when it has neither or when its passes could find nothing the original's did not.
    ///
    /// That is so, and the view not worth its copy of the text (a megabyte's result of 1,024
    /// lines holds 1,024 `\n`), when there are no secret values to look for, the original
    /// holds no pattern's anchor (`candidates` is empty), and every obfuscation is a one-letter
    /// JSON escape whose byte is in no anchor and no encoded run: the view then holds no anchor
    /// either (see [`Compiled::view_candidates`]) and no run the original's pass did not decode
    /// (see [`LeakScanner::find_view_encoded`]).
    fn view(
        &self,
        raw: &[u8],
        leads: &runs::Leads,
        candidates: Option<&[(usize, usize)]>,
    ) -> Option<View> {
        let found = obfuscations(raw, leads);
        if found.is_empty() {
            return None;
        }
        let nothing_more = self.secrets.is_none()
            && candidates.is_some_and(<[_]>::is_empty)
            && found.iter().all(|m| {
                escaped_byte(&raw[m.clone()]).is_some_and(|b| {
                    !runs::in_run(b)
                        && !self.compiled.in_anchors[usize::from(b.to_ascii_lowercase())]
                })
            });
        (!nothing_more).then(|| build_view(raw, found))
    }
}

/// The view of `raw` with the obfuscations `found` (in order, not empty) removed or decoded.
fn build_view(raw: &[u8], found: Vec<std::ops::Range<usize>>) -> View {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut edits = Vec::with_capacity(found.len());
    let mut at = 0;
    for m in found {
        bytes.extend_from_slice(&raw[at..m.start]);
        let view_at = bytes.len();
        decode_obfuscation(&raw[m.clone()], &mut bytes);
        edits.push(Edit {
            at: view_at,
            len: bytes.len() - view_at,
            original: m.clone(),
        });
        at = m.end;
    }
    bytes.extend_from_slice(&raw[at..]);
    View { bytes, edits }
}

/// Where the obfuscations of `raw` (UTF-8, whose `leads` the run search noted) lie, in order:
/// percent-escapes, JSON string escapes (a surrogate pair's two as one) and the characters that
/// render as nothing and so can split a credential unseen (see [`obfuscation_len`]). Found from
/// the bytes each begins with (the escapes' from the run search's masks, the invisible
/// characters' by SIMD searches), then checked there: the same matches as one regex of them all
/// (the tests hold the two equal), whose prefilter over so many literals walks a megabyte a
/// byte at a time (~2 ms).
fn obfuscations(raw: &[u8], leads: &runs::Leads) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    // Escapes are ASCII and invisible characters are not, so neither kind overlaps the other;
    // an escape may hold another's `\` (`\\n`), so each begins past the last.
    let mut end = 0;
    for at in leads.escapes() {
        if at >= end
            && let Some(len) = obfuscation_len(&raw[at..])
        {
            end = at + len;
            found.push(at..end);
        }
    }
    if leads.non_ascii {
        let escapes = found.len();
        // In UTF-8 no lead byte is another's continuation, so these never overlap either.
        let leads = memchr::memchr3_iter(0xC2, 0xCD, 0xD8, raw)
            .chain(memchr::memchr3_iter(0xE1, 0xE2, 0xE3, raw))
            .chain(memchr::memchr2_iter(0xEF, 0xF3, raw));
        for at in leads {
            if let Some(len) = obfuscation_len(&raw[at..]) {
                found.push(at..at + len);
            }
        }
        if found.len() > escapes {
            found.sort_unstable_by_key(|m| m.start);
        }
    }
    found
}

/// The length of the obfuscation `bytes` begin with, if they begin with one: a percent-escape
/// (`%XX`); a JSON string escape (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\uXXXX`, a
/// surrogate pair's `\uD8XX\uDCXX` as one); or, as UTF-8, a character that renders as nothing:
/// zero-width space, joiners and marks (U+200B–U+200F), the directional embeddings, overrides
/// and isolates (U+202A–U+202E, U+2066–U+2069), word joiner, invisible operators and deprecated
/// format characters (U+2060–U+2064, U+206A–U+206F), the combining grapheme joiner (U+034F),
/// the Arabic letter mark (U+061C), the Mongolian free variation selectors and vowel separator
/// (U+180B–U+180F), the variation selectors (U+FE00–U+FE0F), the byte-order mark (U+FEFF), the
/// soft hyphen (U+00AD), the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and the tag
/// characters (U+E0000–U+E007F).
fn obfuscation_len(bytes: &[u8]) -> Option<usize> {
    let hex = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_hexdigit);
    let byte = |at: usize| bytes.get(at).copied().unwrap_or(0);
    let unicode_escape =
        |at: usize| byte(at) == b'\\' && byte(at + 1) == b'u' && (2..6).all(|i| hex(at + i));
    let surrogate = |at: usize, low: bool| {
        let range = if low { b'c'..=b'f' } else { b'8'..=b'b' };
        unicode_escape(at)
            && byte(at + 2).eq_ignore_ascii_case(&b'd')
            && range.contains(&byte(at + 3).to_ascii_lowercase())
    };
    let len = match (byte(0), byte(1), byte(2)) {
        (b'%', _, _) if hex(1) && hex(2) => 3,
        (b'\\', b'u', _) if surrogate(0, false) && surrogate(6, true) => 12,
        (b'\\', b'u', _) if unicode_escape(0) => 6,
        (b'\\', b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't', _) => 2,
        (0xC2, 0xAD, _) | (0xCD, 0x8F, _) | (0xD8, 0x9C, _) => 2,
        (0xE2, 0x80, 0x8B..=0x8F | 0xAA..=0xAE)
        | (0xE2, 0x81, 0xA0..=0xA4 | 0xA6..=0xAF)
        | (0xE1, 0xA0, 0x8B..=0x8F)
        | (0xE1, 0x85, 0x9F | 0xA0)
        | (0xE3, 0x85, 0xA4)
        | (0xEF, 0xB8, 0x80..=0x8F)
        | (0xEF, 0xBB, 0xBF)
        | (0xEF, 0xBE, 0xA0) => 3,
        (0xF3, 0xA0, 0x80 | 0x81) if (0x80..=0xBF).contains(&byte(3)) => 4,
        _ => return None,
    };
    Some(len)
}

/// Append to `out` what `matched`, an obfuscation (see [`obfuscation_len`]), stands for: a
/// percent-escape's byte, a JSON escape's character (nothing for an invisible one, a
/// replacement character for a lone surrogate), and nothing for an invisible character.
fn decode_obfuscation(matched: &[u8], out: &mut Vec<u8>) {
    // An escape holds only ASCII hex digits after `\u`, so these parse.
    let unit = |hex: &[u8]| {
        std::str::from_utf8(hex)
            .ok()
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
            .unwrap_or(0xFFFD)
    };
    match matched {
        [b'%', hex @ ..] => out.extend(decode_hex(hex)),
        [b'\\', b'u', ..] => {
            let units = matched
                .split(|&b| b == b'\\')
                .filter_map(|part| part.strip_prefix(b"u"))
                .map(unit);
            let c = char::decode_utf16(units)
                .next()
                .and_then(Result::ok)
                .unwrap_or(char::REPLACEMENT_CHARACTER);
            let mut buffer = [0u8; 4];
            let encoded = c.encode_utf8(&mut buffer).as_bytes();
            // A single character that is an obfuscation whole renders as nothing.
            if obfuscation_len(encoded) != Some(encoded.len()) {
                out.extend_from_slice(encoded);
            }
        }
        _ => out.extend(escaped_byte(matched)),
    }
}

/// The byte a one-letter JSON escape (`\n`, `\"`, ...) stands for; `None` for any other
/// obfuscation.
fn escaped_byte(matched: &[u8]) -> Option<u8> {
    match matched {
        [b'\\', escaped] => Some(match escaped {
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            other => *other,
        }),
        _ => None,
    }
}

/// Whether decoded bytes are text: valid UTF-8 without control characters other than
/// whitespace. Noise decoded from a word that merely looked like base64 almost never is.
fn looks_like_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|t| {
        t.bytes()
            .all(|b| (b >= 0x20 && b != 0x7F) || matches!(b, b'\t' | b'\n' | b'\r'))
    })
}

/// Whether a value looks like a generated credential rather than a word or an expression: long
/// enough, letters and digits mixed, and about 3 bits of entropy per character or more, in the
/// whole value or in its letters and digits alone (so that filler such as a run of dots after
/// the credential cannot dilute it below the bound).
fn looks_random(value: &[u8]) -> bool {
    if value.len() < 12 {
        return false;
    }
    let letters = value.iter().any(u8::is_ascii_alphabetic);
    let digits = value.iter().any(u8::is_ascii_digit);
    if !(letters && digits) {
        return false;
    }
    if shannon_bits(value) >= 3.0 {
        return true;
    }
    let alphanumeric: Vec<u8> = value
        .iter()
        .copied()
        .filter(u8::is_ascii_alphanumeric)
        .collect();
    alphanumeric.len() >= 12 && shannon_bits(&alphanumeric) >= 3.0
}

/// Shannon entropy of `value`, in bits per byte.
fn shannon_bits(value: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in value {
        counts[b as usize] += 1;
    }
    let n = value.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

impl Scrubbed {
    /// The text to pass on: the original when clean, the redacted copy otherwise; `None` when
    /// blocked.
    pub fn text<'a>(&'a self, original: &'a str) -> Option<Cow<'a, str>> {
        match self {
            Self::Clean => Some(Cow::Borrowed(original)),
            Self::Redacted(text, _) => Some(Cow::Borrowed(text.as_str())),
            Self::Blocked(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`obfuscation_len`] matches, as one regex: the definition its matches are held to.
    /// Percent-escapes, JSON string escapes (a surrogate pair's two as one), and the characters
    /// that render as nothing and so can split a credential unseen, as UTF-8 bytes: zero-width space, joiners and marks (U+200B–U+200F), the directional
    /// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), word joiner, invisible
    /// operators and deprecated format characters (U+2060–U+2064, U+206A–U+206F), the combining
    /// grapheme joiner (U+034F), the Arabic letter mark (U+061C), the Mongolian free variation
    /// selectors and vowel separator (U+180B–U+180F), the variation selectors (U+FE00–U+FE0F), the
    /// byte-order mark (U+FEFF), the soft hyphen (U+00AD), the Hangul fillers (U+115F, U+1160,
    /// U+3164, U+FFA0) and the tag characters (U+E0000–U+E007F).
    const OBFUSCATION: &str = r"(?-u)%[0-9A-Fa-f]{2}|\\(?:u[dD][89abAB][0-9A-Fa-f]{2}\\u[dD][c-fC-F][0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|[\x22\\/bfnrt])|\xE2\x80[\x8B-\x8F\xAA-\xAE]|\xE2\x81[\xA0-\xA4\xA6-\xAF]|\xCD\x8F|\xD8\x9C|\xE1\xA0[\x8B-\x8F]|\xE1\x85[\x9F\xA0]|\xE3\x85\xA4|\xEF\xB8[\x80-\x8F]|\xEF\xBB\xBF|\xEF\xBE\xA0|\xC2\xAD|\xF3\xA0[\x80\x81][\x80-\xBF]";

    #[test]
    fn lowering_is_ascii_lowercase_on_every_path() {
        // Every byte value, at lengths around the 32-byte vector and past it.
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let expected = bytes.to_ascii_lowercase();
        for len in [0, 1, 31, 32, 33, 63, 64, 65, 256, 1000] {
            let mut out = vec![b'#'];
            extend_lowered(&mut out, &bytes[..len]);
            assert_eq!(out[0], b'#', "what was in the buffer stays");
            assert_eq!(out[1..], expected[..len], "{len} bytes");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut out = vec![b'#'];
                // SAFETY: the CPU has AVX2, checked just above.
                unsafe { extend_lowered_avx2(&mut out, &bytes[..len]) };
                assert_eq!(out[1..], expected[..len], "avx2: {len} bytes");
            }
        }
    }

    #[test]
    fn short_text_finds_the_anchors_the_search_finds() {
        let compiled = &*COMPILED;
        assert!(
            compiled.anchors.iter().all(|(anchor, _)| anchor.len() > 2),
            "the table of leads needs anchors longer than two bytes"
        );
        // Every anchor, alternately upper case, some overlapping or run together.
        let mut sample = String::from("x");
        for (n, (anchor, _)) in compiled.anchors.iter().enumerate() {
            let anchor = std::str::from_utf8(anchor).expect("anchors are ASCII");
            if n % 2 == 1 {
                sample.push_str(&anchor.to_uppercase());
            } else {
                sample.push_str(anchor);
            }
            sample.push_str(["", " ", "-", "sk-", "é"][n % 5]);
        }
        let bytes = sample.as_bytes();
        let mut everywhere = Vec::new();
        compiled.windowed_candidates(bytes, usize::MAX, &mut everywhere);
        let patterns: std::collections::BTreeSet<usize> =
            everywhere.iter().map(|&(i, _)| i).collect();
        assert_eq!(
            patterns.len(),
            PATTERNS.len(),
            "the sample holds every anchor"
        );
        for start in 0..bytes.len() {
            for end in start..=(start + SHORT_TEXT).min(bytes.len()) {
                let text = &bytes[start..end];
                for most in [0, 1, 2, usize::MAX] {
                    let (mut short, mut windowed) = (Vec::new(), Vec::new());
                    let short_within = compiled.short_candidates(text, most, &mut short);
                    let windowed_within = compiled.windowed_candidates(text, most, &mut windowed);
                    assert_eq!(short_within, windowed_within, "{text:?} within {most}");
                    short.sort_unstable();
                    windowed.sort_unstable();
                    assert_eq!(short, windowed, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn encoded_runs_are_what_the_run_regex_finds() {
        let regex =
            Regex::new(&format!("(?-u)[A-Za-z0-9+/_-]{{{MIN_ENCODED_RUN},}}=*")).expect("regex");
        let mut cases: Vec<Vec<u8>> = [
            "",
            "short words only",
            "aGVsbG8gd29ybGQgaGVsbG8=",
            "x=aGVsbG8gd29ybGQgaGVsbG8==,aGVsbG8gd29ybGQgaGVsbG8",
            "0123456789abcdef0123456789abcdef=== =abcdefghijklmnop",
            "abcdefghijklmno abcdefghijklmnop\nabcdefghijklmnopq",
            "é✓aaaaaaaaaaaaaaaaaaaa✓/+_-aaaaaaaaaaaa",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        // Pseudo-random bytes over a small alphabet, so runs of every length and padding occur.
        let alphabet = b"aZ9+/_-=.= \n\xff";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in [15, 16, 17, 64, 500, 4096] {
            let bytes = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let pick = (state % 100) as usize;
                    if pick < 85 {
                        b'a'
                    } else {
                        alphabet[pick % alphabet.len()]
                    }
                })
                .collect();
            cases.push(bytes);
        }
        // Bytes of every value, with runs of alphabet bytes of every length.
        for len in 0..300 {
            let bytes = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if state % 10 < 8 {
                        b"Az09+/_-"[(state >> 8) as usize % 8]
                    } else {
                        (state >> 16) as u8
                    }
                })
                .collect();
            cases.push(bytes);
        }
        for bytes in &cases {
            let expected: Vec<_> = regex.find_iter(bytes).map(|m| m.range()).collect();
            let mut found = Vec::new();
            runs::encoded_runs(bytes, |run| found.push(run));
            assert_eq!(found, expected, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    /// The pattern pass as it was before anchors (a regex set over the whole text, then each
    /// matched pattern's leftmost-first iteration): the reference the anchored pass must equal.
    fn reference_patterns(bytes: &[u8]) -> Vec<(usize, usize, usize)> {
        static REFERENCE: std::sync::LazyLock<(regex::bytes::RegexSet, Vec<Regex>)> =
            std::sync::LazyLock::new(|| {
                let sources: Vec<String> = PATTERNS
                    .iter()
                    .map(|p| format!("(?-u){}", p.regex))
                    .collect();
                (
                    regex::bytes::RegexSet::new(&sources).expect("set"),
                    sources
                        .iter()
                        .map(|s| Regex::new(s).expect("regex"))
                        .collect(),
                )
            });
        let (set, regexes) = &*REFERENCE;
        let mut out = Vec::new();
        for i in set.matches(bytes).iter() {
            for caps in regexes[i].captures_iter(bytes) {
                let span = caps.name("s").or_else(|| caps.get(0)).expect("group 0");
                if PATTERNS[i].random && !looks_random(span.as_bytes()) {
                    continue;
                }
                out.push((span.start(), span.end(), i));
            }
        }
        out
    }

    /// The hits of one of the scanner's pattern passes as (start, end, pattern).
    fn pattern_hits(pass: impl FnOnce(&LeakScanner, &mut Vec<Hit>)) -> Vec<(usize, usize, usize)> {
        let mut hits = Vec::new();
        pass(&scanner(), &mut hits);
        hits.iter()
            .map(|h| match h.needle {
                Needle::Pattern(i) => (h.start, h.end, i),
                Needle::Secret(_) => unreachable!("no secrets in this scanner"),
            })
            .collect()
    }

    /// Every pass the scanner may take over `bytes`: anchored (however many candidates), the
    /// whole set, and the one it picks.
    fn every_pass(bytes: &[u8]) -> [Vec<(usize, usize, usize)>; 3] {
        [
            pattern_hits(|s, out| {
                let candidates = s.candidates(bytes, usize::MAX).expect("no bound");
                assert!(s.find_anchored(bytes, &candidates, usize::MAX, out).is_ok());
            }),
            pattern_hits(|s, out| s.find_patterns_everywhere(bytes, out)),
            pattern_hits(|s, out| {
                s.find_patterns(bytes, out);
            }),
        ]
    }

    /// A xorshift generator, so the pseudo-random cases are the same on every run.
    struct Xorshift(u64);

    impl Xorshift {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Pseudo-random texts built from the patterns' pieces in mixed case, random word runs,
    /// separators and non-ASCII bytes: near-misses, overlaps and real matches of every pattern.
    fn adversarial_texts(count: usize) -> Vec<Vec<u8>> {
        let pieces: &[&[u8]] = &[
            b"AKIA",
            b"akia",
            b"Asia",
            b"ASIA",
            b"ghp_",
            b"GHP_",
            b"gho_",
            b"ghr_",
            b"github_pat_",
            b"xoxb-",
            b"XOXP-",
            b"xoxz-",
            b"sk_live_",
            b"rk_live_",
            b"sk-ant-",
            b"sk-",
            b"SK-",
            b"sk-proj-",
            b"AIza",
            b"aiza",
            b"eyJ",
            b".eyJ",
            b".",
            b"-----BEGIN ",
            b"-----begin ",
            b"-----",
            b"RSA ",
            b"EC ",
            b"PRIVATE KEY",
            b" BLOCK",
            b"postgres",
            b"PostgreSQL",
            b"mysql",
            b"MariaDB",
            b"mongodb+srv",
            b"rediss",
            b"amqps",
            b"://",
            b":",
            b"@",
            b"/",
            b"Authorization",
            b"AUTHORIZATION",
            b": ",
            b"Bearer ",
            b"token ",
            b"basic\t",
            b"api_key",
            b"API-KEY",
            b"apikey",
            b"secret",
            b"Secret_Key",
            b"client-secret",
            b"password",
            b"passwd",
            b"access_token",
            b"auth-token",
            b"\"",
            b"'",
            b" = ",
            b"=",
            b"==",
            b" ",
            b"\n",
            b"\t",
            b"_",
            b"-",
            b"+",
            b"%",
            b"\xc3\xa9",
            b"\xff",
            b"\xe2\x80\x8b",
        ];
        let word = b"a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ";
        let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
        (0..count)
            .map(|_| {
                let mut text = Vec::new();
                for _ in 0..1 + rng.below(40) {
                    if rng.below(3) == 0 {
                        // A word run long enough, often, to complete a token.
                        for _ in 0..1 + rng.below(60) {
                            text.push(word[rng.below(word.len())]);
                        }
                    } else {
                        text.extend_from_slice(pieces[rng.below(pieces.len())]);
                    }
                }
                text
            })
            .collect()
    }

    #[test]
    fn anchors_are_lower_case_ascii_since_the_text_searched_is() {
        for pattern in PATTERNS {
            assert!(!pattern.anchors.is_empty(), "{}", pattern.name);
            for anchor in pattern.anchors {
                assert!(anchor.is_ascii(), "{anchor}");
                // `candidates` finds the anchors beginning at a place by their first two bytes.
                assert!(anchor.len() > 2, "{anchor}");
                assert_eq!(*anchor, anchor.to_ascii_lowercase(), "{}", pattern.name);
                // The view's pass takes over the original's anchors because none can hold a byte
                // of an obfuscation: a `%`, a `\`, or one outside ASCII
                // (`Compiled::view_candidates`).
                assert!(!anchor.contains(['%', '\\']), "{anchor}");
            }
        }
    }

    #[test]
    fn anchored_patterns_find_what_the_regex_set_found() {
        let mut cases = adversarial_texts(20_000);
        for (_, sample) in samples() {
            for text in [
                sample.clone(),
                format!("x{sample}"),
                format!("_{sample}_"),
                format!("{sample}{sample}"),
                format!("{sample} {sample}"),
                sample.to_lowercase(),
                sample.to_uppercase(),
                format!("sk{sample}"),
                format!("sk-{sample}"),
            ] {
                cases.push(text.into_bytes());
            }
        }
        // Anchors inside other anchors and matches that overlap.
        for text in [
            "sk-----BEGIN RSA PRIVATE KEY-----",
            "sk-ant-sk-ant-a1B2c3D4e5F6g7H8i9J0k1L2m3",
            "xoxb-xoxb-xoxb-1234567890",
            "AKIAAKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLEAKIA",
            "authorization: bearer api_key=a1B2c3D4e5F6g7H8i9J0",
            "passwordpassword=a1B2c3D4e5F6g7H8 password=password=a1B2c3D4e5F6g7H8",
            "postgres://u:postgres://v:p4ss@h@h",
            "eyJeyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.a1B2c3D4e5F6g7H8",
        ] {
            cases.push(text.as_bytes().to_vec());
        }
        let mut matched = [0usize; PATTERNS.len()];
        for bytes in &cases {
            let expected = reference_patterns(bytes);
            for &(_, _, i) in &expected {
                matched[i] += 1;
            }
            for found in every_pass(bytes) {
                assert_eq!(found, expected, "{:?}", String::from_utf8_lossy(bytes));
            }
        }
        // The cases reach every pattern, so the equality above says something about each.
        for (i, n) in matched.iter().enumerate() {
            assert!(*n > 0, "no case matched {}", PATTERNS[i].name);
        }
    }

    #[test]
    fn trials_that_walk_far_give_way_to_the_whole_set_pass() {
        // A thousand `eyJ` anchors, each walking the megabyte of letters after them looking for
        // the `.` a JWT needs: a thousand megabyte walks without the budget. Credentials after
        // them and between them must still be found.
        let mut text = "eyJ-".repeat(500);
        text.push_str(&samples()[0].1);
        text.push(' ');
        text.push_str(&"eyJ-".repeat(500));
        text.push_str(&"a".repeat(1 << 20));
        for (_, sample) in samples() {
            text.push(' ');
            text.push_str(&sample);
        }
        let bytes = text.as_bytes();
        let s = scanner();
        let candidates = s.candidates(bytes, usize::MAX).expect("no bound");
        assert!(
            candidates.len() < 64 + bytes.len() / ANCHOR_SPACING,
            "the anchored pass takes it"
        );
        let budget = TRIAL_STEPS_BASE + TRIAL_STEPS_PER_BYTE * bytes.len();
        assert!(
            s.find_anchored(bytes, &candidates, budget, &mut Vec::new())
                .is_err(),
            "the walks run over the budget"
        );
        let expected = reference_patterns(bytes);
        assert!(expected.len() > 10);
        for found in every_pass(bytes) {
            assert_eq!(found, expected);
        }
    }

    #[test]
    fn anchors_across_the_lowering_windows_are_all_found() {
        // Every anchor, in mixed case, beginning at each place around the edges of the first
        // and second windows: it begins in one window and ends in the next, or begins in the
        // carried bytes. The candidates must be every place each anchor begins, as a naive
        // search of the lower-cased text finds them, and the hits those of the reference.
        let s = scanner();
        let compiled = s.compiled;
        for &(anchor, pattern) in &compiled.anchors {
            let mixed: Vec<u8> = anchor
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    if i % 2 == 0 {
                        b.to_ascii_uppercase()
                    } else {
                        *b
                    }
                })
                .collect();
            for edge in [LOWER_WINDOW, 2 * LOWER_WINDOW] {
                for back in 0..=compiled.longest_anchor + 1 {
                    let mut bytes = vec![b'.'; 2 * LOWER_WINDOW + 64];
                    let at = edge - back;
                    bytes[at..at + mixed.len()].copy_from_slice(&mixed);
                    let lowered = bytes.to_ascii_lowercase();
                    let mut expected: Vec<(usize, usize)> = Vec::new();
                    for start in 0..bytes.len() {
                        for &(a, i) in &compiled.anchors {
                            if lowered[start..].starts_with(a) {
                                expected.push((i, start));
                            }
                        }
                    }
                    expected.sort_unstable();
                    expected.dedup();
                    assert!(expected.contains(&(pattern, at)));
                    let found = s.candidates(&bytes, usize::MAX).expect("no bound");
                    assert_eq!(
                        found,
                        expected,
                        "{:?} at {at}",
                        String::from_utf8_lossy(anchor)
                    );
                }
            }
        }
        // A credential across each edge is found, as the reference finds it.
        for (_, sample) in samples() {
            for back in 1..sample.len() {
                let mut text = ".".repeat(LOWER_WINDOW - back);
                text.push_str(&sample);
                text.push_str(&" .".repeat(LOWER_WINDOW));
                let bytes = text.as_bytes();
                let expected = reference_patterns(bytes);
                assert!(!expected.is_empty(), "{sample} at {}", LOWER_WINDOW - back);
                assert_eq!(
                    every_pass(bytes)[0],
                    expected,
                    "{sample} at {}",
                    LOWER_WINDOW - back
                );
            }
        }
    }

    #[test]
    fn ordinary_text_stays_within_the_trial_budget() {
        let samples = samples();
        // A credential and two anchor words every KiB, as in prose about APIs.
        let filler = "The quick brown fox jumps over the lazy dog; see the docs.\n".repeat(16);
        let mut text = String::new();
        while text.len() < 1 << 20 {
            for (_, sample) in &samples {
                text.push_str(&filler);
                text.push_str(sample);
                text.push_str(" (the api key, as the auth docs say)\n");
            }
        }
        let bytes = text.as_bytes();
        let s = scanner();
        let candidates = s
            .candidates(bytes, 64 + bytes.len() / ANCHOR_SPACING)
            .expect("under the density bound");
        let budget = TRIAL_STEPS_BASE + TRIAL_STEPS_PER_BYTE * bytes.len();
        let mut found = Vec::new();
        assert!(
            s.find_anchored(bytes, &candidates, budget, &mut found)
                .is_ok()
        );
        assert_eq!(
            pattern_hits(|_, out| out.extend(found)),
            reference_patterns(bytes)
        );
    }

    #[test]
    fn a_mebibyte_sparse_or_dense_gives_the_same_hits_and_redactions() {
        let samples = samples();
        let filler = "The quick brown fox jumps over the lazy dog; see the docs.\n";
        // Sparse: samples at the start, the end, and across every 64 KiB boundary.
        let mut sparse = String::new();
        for (k, (_, sample)) in samples.iter().cycle().take(17).enumerate() {
            while sparse.len() + sample.len() / 2 < k * 65_536 {
                sparse.push_str(filler);
            }
            sparse.push_str(sample);
            sparse.push(' ');
        }
        sparse.push_str(&samples[2].1);
        // Dense: pieces of patterns everywhere, far more candidates than the anchored pass takes.
        let dense: Vec<u8> = adversarial_texts(3_000).concat();
        for bytes in [sparse.as_bytes(), dense.as_slice()] {
            let expected = reference_patterns(bytes);
            assert!(expected.len() > 10);
            for found in every_pass(bytes) {
                assert_eq!(found, expected);
            }
        }
        let s = scanner();
        let Scrubbed::Redacted(text, _) = s.scrub(&sparse) else {
            panic!("the samples are found");
        };
        assert!(
            text.starts_with("[REDACTED:aws_access_key_id] "),
            "{}",
            &text[..40]
        );
        assert!(text.ends_with("[REDACTED:github_token]"));
    }

    /// A hit as a sortable tuple: (start, end, 0 for a pattern or 1 for a secret, its index).
    fn hit_key(hit: &Hit) -> (usize, usize, u8, usize) {
        match hit.needle {
            Needle::Pattern(i) => (hit.start, hit.end, 0, i),
            Needle::Secret(i) => (hit.start, hit.end, 1, i),
        }
    }

    /// What `hits` found before it took anything over from the original's pass: the text and
    /// its whole view each searched by every pass over all of it (the patterns by the regex set),
    /// with the view's offsets taken back by a map of every byte. Sorted, each hit once.
    fn hits_by_whole_passes(s: &LeakScanner, text: &str) -> Vec<(usize, usize, u8, usize)> {
        let raw = text.as_bytes();
        let mut hits = Vec::new();
        s.find_patterns_everywhere(raw, &mut hits);
        s.find_secrets(raw, &mut hits);
        s.find_encoded(raw, &mut hits);
        if let Some((bytes, map)) = whole_view(raw) {
            let mut found = Vec::new();
            s.find_patterns_everywhere(&bytes, &mut found);
            s.find_secrets(&bytes, &mut found);
            s.find_encoded(&bytes, &mut found);
            hits.extend(found.into_iter().map(|h| Hit {
                start: map[h.start],
                end: map[h.end],
                needle: h.needle,
            }));
        }
        let mut keys: Vec<_> = hits
            .iter()
            .map(|h| {
                let mut key = hit_key(h);
                key.0 = text.floor_char_boundary(key.0);
                key.1 = text.ceil_char_boundary(key.1);
                key
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// The view as it was built before its edits were kept: the decoded bytes and, for each
    /// (and one past the end), the offset in `raw` it came from.
    fn whole_view(raw: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
        let obfuscation = Regex::new(OBFUSCATION).expect("compiles");
        let mut found = obfuscation.find_iter(raw).peekable();
        found.peek()?;
        let (mut bytes, mut map, mut at) = (Vec::new(), Vec::new(), 0);
        for m in found {
            bytes.extend_from_slice(&raw[at..m.start()]);
            map.extend(at..m.start());
            let before = bytes.len();
            decode_obfuscation(m.as_bytes(), &mut bytes);
            map.extend(std::iter::repeat_n(m.start(), bytes.len() - before));
            at = m.end();
        }
        bytes.extend_from_slice(&raw[at..]);
        map.extend(at..=raw.len());
        Some((bytes, map))
    }

    /// Texts that obfuscate: the adversarial texts with some of their characters percent-escaped,
    /// `\u`-escaped or preceded by an invisible character, anywhere (inside anchors, runs and
    /// padding), and stray `%` and `\` signs, escapes of `%` itself, JSON escapes (a surrogate
    /// pair, a lone surrogate, an escaped invisible character) and credentials and a secret value
    /// encoded whole, escaped or split.
    fn obfuscated_texts(count: usize) -> Vec<String> {
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let secret = b64(SECRET);
        let pieces = [
            "%".to_owned(),
            "%4".to_owned(),
            "%25".to_owned(),
            "%3D".to_owned(),
            b64("ghp_a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ"),
            b64("password = Zq9x7Vb2Lm4Kp8Rt"),
            secret.clone(),
            format!("{}\u{200b}{}", &secret[..9], &secret[9..]),
            format!("{}%3D", &secret[..secret.len() - 1]),
            "\\".to_owned(),
            "\\n".to_owned(),
            "\\t".to_owned(),
            "\\\"".to_owned(),
            "\\\\".to_owned(),
            "\\u200b".to_owned(),
            "\\ud83d\\ude00".to_owned(),
            "\\udc00".to_owned(),
            format!("\\n{secret}"),
        ];
        let invisible = [
            "\u{200b}",
            "\u{200d}",
            "\u{feff}",
            "\u{ad}",
            "\u{2060}",
            "\u{2066}",
            "\u{fe0f}",
            "\u{e0020}",
        ];
        let credentials = samples();
        let mut rng = Xorshift(0x2545_F491_4F6C_DD1D);
        adversarial_texts(count)
            .into_iter()
            .map(|word| {
                // A credential of each kind, whole, for the obfuscation to fall inside.
                let (_, credential) = &credentials[rng.below(credentials.len())];
                let mut plain = String::from_utf8_lossy(&word).into_owned();
                plain.insert_str(
                    plain.floor_char_boundary(rng.below(plain.len() + 1)),
                    credential,
                );
                let mut text = String::new();
                for c in plain.chars() {
                    match rng.below(24) {
                        0 if c.is_ascii() => text.push_str(&format!("%{:02X}", c as u32)),
                        1 if c.is_ascii() => text.push_str(&format!("%{:02x}", c as u32)),
                        4 if c.is_ascii() => text.push_str(&format!("\\u{:04X}", c as u32)),
                        2 => {
                            text.push_str(invisible[rng.below(invisible.len())]);
                            text.push(c);
                        }
                        3 => {
                            text.push_str(&pieces[rng.below(pieces.len())]);
                            text.push(c);
                        }
                        _ => text.push(c),
                    }
                }
                text
            })
            .collect()
    }

    /// A secret value the obfuscated texts carry, plainly and encoded.
    const SECRET: &str = "Zq9-unusual-value-77";

    #[test]
    fn the_obfuscation_matcher_is_the_regex_at_every_start() {
        let regex = Regex::new(&format!("^(?:{OBFUSCATION})")).expect("compiles");
        let by_regex = |bytes: &[u8]| regex.find(bytes).map(|m| m.end());
        let mut checked = 0;
        let mut check = |bytes: &[u8]| {
            assert_eq!(obfuscation_len(bytes), by_regex(bytes), "{bytes:x?}");
            checked += 1;
        };
        // Every lead byte of an invisible character, then every two bytes (and, for the tag
        // characters' four, every last byte after their first three).
        for lead in [0xC2, 0xCD, 0xD8, 0xE1, 0xE2, 0xE3, 0xEF, 0xF3] {
            for second in 0..=255u8 {
                for third in 0..=255u8 {
                    check(&[lead, second, third]);
                }
                check(&[lead, second]);
            }
        }
        for third in 0..=255u8 {
            for fourth in 0..=255u8 {
                check(&[0xF3, 0xA0, third, fourth]);
            }
        }
        // Escapes: `%` and `\` before every two of a set of bytes, `\u` before every four,
        // and surrogate pairs whole, cut and out of range.
        let some = b"09afAFgG%\\u\"/bnDd8Cc ";
        for &a in some {
            for &b in some {
                check(&[b'%', a, b]);
                check(&[b'\\', a, b]);
            }
        }
        for b in 0..=255u8 {
            check(&[b'\\', b]);
        }
        for a in some {
            for b in some {
                for c in some {
                    for d in some {
                        check(&[b'\\', b'u', *a, *b, *c, *d]);
                    }
                }
            }
        }
        for high in ["d800", "DBFF", "d83d", "d7ff", "dc00", "D8", "d8zz"] {
            for low in ["dc00", "DFFF", "de00", "dbff", "e000", "DC", "dcz0"] {
                check(format!("\\u{high}\\u{low}").as_bytes());
                check(format!("\\u{high}\\{low}").as_bytes());
            }
        }
        assert!(checked > 500_000);
    }

    #[test]
    fn the_obfuscations_found_are_the_regexs_matches() {
        let regex = Regex::new(OBFUSCATION).expect("compiles");
        let mixed =
            "ção\\u00e9%41 漢字ひらがな\u{200b}\\\\n—“q”\u{feff}\u{e0041}%%4\\uD83D\\uDE00\\";
        for text in obfuscated_texts(500)
            .into_iter()
            .chain([mixed.to_owned(), mixed.repeat(40)])
        {
            let raw = text.as_bytes();
            let expected: Vec<_> = regex.find_iter(raw).map(|m| m.range()).collect();
            let leads = runs::encoded_runs(raw, |_| {});
            assert_eq!(obfuscations(raw, &leads), expected, "{text:?}");
        }
    }

    /// The view of `text`, made whether or not its passes could find more, or `None` when the
    /// text holds no obfuscation.
    fn view_of(text: &str) -> Option<View> {
        let raw = text.as_bytes();
        let found = obfuscations(raw, &runs::encoded_runs(raw, |_| {}));
        (!found.is_empty()).then(|| build_view(raw, found))
    }

    #[test]
    fn a_view_not_made_is_one_that_would_find_nothing_more() {
        let plain = scanner();
        let with_secret = LeakScanner::new([("deploy_key", SECRET)]).expect("scanner");
        let json = |text: &str| serde_json::to_string(text).expect("a string");
        // Lines of a file as a result carries them (a megabyte of them in the bench's row 3),
        // prose with quotes, tabs and letters outside ASCII, and the same with what makes the view needed: an anchor,
        // an escape of `/` (in the runs' alphabet), a percent-escape, an invisible character.
        let lines = format!("{}\n", "x".repeat(1023)).repeat(64);
        let prose = "He said \"no\".\tThen:\r\n\\ ok, café \x08end\x0c.\n".repeat(40);
        let not_made = [json(&lines), json(&prose)];
        let made = [
            json(&format!("{lines}password = Zq9x7Vb2Lm4Kp8Rt\n")),
            format!("{prose}a\\/b"),
            format!("{prose}%20"),
            format!("{prose}\u{200b}"),
            json(&format!("{lines}ghp_")),
        ];
        let viewed = |s: &LeakScanner, text: &str| {
            let raw = text.as_bytes();
            let mut hits = Vec::new();
            let candidates = s.find_patterns(raw, &mut hits);
            let leads = s.find_encoded(raw, &mut hits);
            assert!(leads.any(), "{text:?}");
            s.view(raw, &leads, candidates.as_deref()).is_some()
        };
        for text in &not_made {
            assert!(!viewed(&plain, text), "{text:?}");
            // With a secret value to look for, the view is searched for it.
            assert!(viewed(&with_secret, text), "{text:?}");
            // Made anyway, the view's passes find nothing.
            let view = view_of(text).expect("escapes");
            let mut found = Vec::new();
            plain.find_patterns_everywhere(&view.bytes, &mut found);
            plain.find_encoded(&view.bytes, &mut found);
            assert!(found.is_empty(), "{text:?}");
        }
        for text in &made {
            assert!(viewed(&plain, text), "{text:?}");
        }
        // Where the view is not made, the hits are still those of whole passes over the text and
        // its view, in every text of the equivalence tests that gets there.
        let mut skipped = 0;
        for text in obfuscated_texts(2000)
            .iter()
            .chain(&not_made)
            .chain(&made)
            .map(|t| json(t))
            .chain(
                adversarial_texts(2000)
                    .iter()
                    .map(|t| json(&String::from_utf8_lossy(t))),
            )
        {
            let raw = text.as_bytes();
            let mut hits = Vec::new();
            let candidates = plain.find_patterns(raw, &mut hits);
            let leads = plain.find_encoded(raw, &mut hits);
            if !leads.any() || plain.view(raw, &leads, candidates.as_deref()).is_some() {
                continue;
            }
            skipped += 1;
            let mut hits: Vec<_> = plain.hits(&text).iter().map(hit_key).collect();
            hits.sort_unstable();
            hits.dedup();
            assert_eq!(hits, hits_by_whole_passes(&plain, &text), "{text:?}");
        }
        assert!(skipped > 100, "{skipped}");
    }

    #[test]
    fn the_view_keeps_every_offset_of_the_map_it_replaced() {
        for text in obfuscated_texts(500) {
            let view = view_of(&text);
            let whole = whole_view(text.as_bytes());
            let (Some(view), Some((bytes, map))) = (view, whole) else {
                continue;
            };
            assert_eq!(view.bytes, bytes, "{text:?}");
            for (at, &original) in map.iter().enumerate() {
                assert_eq!(view.original(at), original, "{at} of {text:?}");
                let decoded = view
                    .edits
                    .iter()
                    .any(|e| (e.at..e.at + e.len).contains(&at));
                if !decoded {
                    assert_eq!(view.in_view(original), Some(at), "{at} of {text:?}");
                }
            }
            for edit in &view.edits {
                for removed in edit.original.clone() {
                    assert_eq!(view.in_view(removed), None, "{removed} of {text:?}");
                }
            }
        }
    }

    #[test]
    fn a_view_is_searched_around_its_edits_only_when_they_are_few() {
        let view = |text: &str| view_of(text).expect("an edit");
        // A URL's escape in a page of text; an escape every 64 bytes of the view, then a little
        // more often.
        assert!(view(&format!("{}%20{}", "a".repeat(4000), "b".repeat(4000))).is_sparse());
        assert!(view(&format!("{}%41", "a".repeat(63)).repeat(100)).is_sparse());
        assert!(!view(&format!("{}%41", "a".repeat(62)).repeat(100)).is_sparse());
        // Text escaped or split throughout.
        assert!(!view(&"%41%6b".repeat(1000)).is_sparse());
        assert!(!view(&"ab\u{200b}".repeat(1000)).is_sparse());
    }

    #[test]
    fn the_view_finds_what_a_whole_pass_over_it_found() {
        let s = LeakScanner::new([("deploy_key", SECRET)]).expect("scanner");
        let plain = scanner();
        let mut texts = obfuscated_texts(2000);
        // Each credential with one character escaped, or an invisible one before it, at every
        // place: inside its anchor too, up to its first and last byte.
        for (_, credential) in samples() {
            for (at, c) in credential.char_indices() {
                let (before, after) = (&credential[..at], &credential[at + c.len_utf8()..]);
                for obfuscated in [format!("%{:02X}", c as u32), format!("\u{200b}{c}")] {
                    texts.push(format!("x {before}{obfuscated}{after} y"));
                }
            }
        }
        // Long texts too: the original's anchor search in windows, the view's in its own stretches.
        let long: Vec<String> = texts
            .chunks(40)
            .take(40)
            .map(|c| c.concat().repeat(8))
            .collect();
        texts.extend(long);
        let mut seen_only_in_view = 0;
        for text in &texts {
            for scanner in [&s, &plain] {
                let expected = hits_by_whole_passes(scanner, text);
                // The view searched around its edits however dense they are, and searched whole.
                let by_edits = |_: &View| true;
                let whole = |_: &View| false;
                for hits in [
                    scanner.hits_with(text, by_edits),
                    scanner.hits_with(text, whole),
                ] {
                    let mut hits: Vec<_> = hits.iter().map(hit_key).collect();
                    hits.sort_unstable();
                    hits.dedup();
                    assert_eq!(hits, expected, "{text:?}");
                }
                let mut direct = Vec::new();
                scanner.find_patterns_everywhere(text.as_bytes(), &mut direct);
                scanner.find_secrets(text.as_bytes(), &mut direct);
                scanner.find_encoded(text.as_bytes(), &mut direct);
                if direct.len() < expected.len() {
                    seen_only_in_view += 1;
                }
            }
        }
        // The texts exercise the view: many of them hold what only it shows.
        assert!(seen_only_in_view > 500, "{seen_only_in_view}");
    }

    #[test]
    fn a_run_ruled_out_by_its_probe_never_decodes_to_text() {
        let b64 = |t: &[u8]| base64::engine::general_purpose::STANDARD.encode(t);
        let b64url = |t: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t);
        let hex = |t: &[u8]| t.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let mut rng = Xorshift(0x1234_5678_9abc_def1);
        let mut ruled_out = 0;
        for round in 0..3_000 {
            let len = 1 + rng.below(200);
            // Text, text with a control character or a bad byte somewhere, or random bytes.
            let mut plain: Vec<u8> = match round % 3 {
                0 => "é✓ key=a1B2c3D4 ".bytes().cycle().take(len).collect(),
                1 => (0..len).map(|_| b"abc \n\t"[rng.below(6)]).collect(),
                _ => (0..len).map(|_| rng.below(256) as u8).collect(),
            };
            if round % 7 == 0 {
                let at = rng.below(plain.len());
                plain[at] = [0x01, 0xff, 0x7f, 0xc3][rng.below(4)];
            }
            let mut runs = vec![b64(&plain), b64url(&plain), hex(&plain)];
            runs.push(format!("{}===", b64(&plain)));
            runs.push("x".repeat(len));
            for run in runs {
                let run = run.as_bytes();
                let text = decode_run(run).is_some_and(|d| looks_like_text(&d));
                if !may_decode_to_text(run) {
                    ruled_out += 1;
                    assert!(!text, "{:?}", String::from_utf8_lossy(run));
                }
            }
        }
        assert!(ruled_out > 1_000, "{ruled_out}");
    }

    #[test]
    fn the_first_quad_decodes_as_either_alphabet_does() {
        let mut rng = Xorshift(0x0bad_cafe_f00d_d00d);
        let standard = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let url_safe = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for _ in 0..5_000 {
            for (alphabet, engine) in [(standard, &LENIENT_B64), (url_safe, &LENIENT_B64URL)] {
                let quad: Vec<u8> = (0..4).map(|_| alphabet[rng.below(64)]).collect();
                let decoded = engine.decode(&quad).expect("a quad of the alphabet");
                assert_eq!(first_quad(&quad).map(Vec::from), Some(decoded), "{quad:?}");
            }
        }
        for byte in 0..=255u8 {
            let quad = [b'A', b'A', byte, b'A'];
            let in_either = LENIENT_B64.decode(quad).is_ok() || LENIENT_B64URL.decode(quad).is_ok();
            assert_eq!(first_quad(&quad).is_some(), in_either, "{byte:#x}");
        }
    }

    /// One sample per pattern, built at run time so no credential-shaped literal sits in the
    /// source for other scanners to trip over.
    fn samples() -> Vec<(&'static str, String)> {
        let r36 = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
        vec![
            ("aws_access_key_id", format!("AKIA{}", "IOSFODNN7EXAMPLE")),
            ("aws_access_key_id", format!("ASIA{}", "Y3NPSPUJZRS7LWQX")),
            ("github_token", format!("ghp_{r36}")),
            ("github_token", format!("gho_{r36}")),
            ("github_token", format!("ghu_{r36}")),
            ("github_token", format!("ghs_{r36}")),
            ("github_token", format!("ghr_{r36}")),
            (
                "github_token",
                format!("github_pat_11ABCDEFG0{}", &r36[..24]),
            ),
            ("slack_token", format!("xoxb-{}", "1234567890-abcdefghij")),
            ("slack_token", format!("xoxp-{}", "1234567890-abcdefghij")),
            ("stripe_key", format!("sk_live_{}", &r36[..24])),
            ("stripe_key", format!("rk_live_{}", &r36[..24])),
            ("openai_key", format!("sk-{}", &r36[..32])),
            ("openai_key", format!("sk-proj-{}", &r36[..32])),
            ("anthropic_key", format!("sk-ant-api03-{}", &r36[..30])),
            (
                "google_api_key",
                format!("AIza{}", &format!("{r36}xyz")[..35]),
            ),
            (
                "jwt",
                format!(
                    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.{}",
                    &r36[..20]
                ),
            ),
            ("private_key", "-----BEGIN RSA PRIVATE KEY-----".to_owned()),
            (
                "private_key",
                "-----BEGIN OPENSSH PRIVATE KEY-----".to_owned(),
            ),
            ("private_key", "-----BEGIN PRIVATE KEY-----".to_owned()),
            (
                "connection_string_password",
                "postgres://app:s3cretPw@db.internal:5432/app".to_owned(),
            ),
            (
                "connection_string_password",
                "mysql://root:hunter2@localhost/db".to_owned(),
            ),
            (
                "connection_string_password",
                "mongodb+srv://u:p4ss@cluster0.example.net".to_owned(),
            ),
            (
                "connection_string_password",
                "redis://:redispass@cache:6379".to_owned(),
            ),
            (
                "connection_string_password",
                "postgresql+psycopg2://app:s3cretPw9x@db/app".to_owned(),
            ),
            (
                "bearer_token",
                format!("Authorization: Bearer {}", &r36[..24]),
            ),
            ("secret_assignment", format!("api_key={}", &r36[..20])),
            (
                "secret_assignment",
                format!("\"password\": \"{}\"", &r36[..16]),
            ),
            ("secret_assignment", format!("SECRET = '{}'", &r36[..16])),
            // Names that end in a keyword after an underscore, or go on past it, as `env`,
            // `.env` files and `~/.aws/credentials` write them.
            (
                "secret_assignment",
                format!("AWS_SECRET_ACCESS_KEY={}", &r36[..20]),
            ),
            (
                "secret_assignment",
                format!("aws_secret_access_key = {}", &r36[..20]),
            ),
            ("secret_assignment", format!("DB_PASSWORD={}", &r36[..16])),
            // Filler after the credential does not dilute it below the entropy bound.
            (
                "secret_assignment",
                format!("password={}{}", &r36[..12], ".".repeat(60)),
            ),
        ]
    }

    fn scanner() -> LeakScanner {
        LeakScanner::new([]).expect("scanner")
    }

    fn hit_name(s: &LeakScanner, text: &str) -> Option<String> {
        match s.scan_outbound(text) {
            Ok(()) => None,
            Err(Leak::Pattern(name)) => Some(name.to_owned()),
            Err(Leak::Secret(name)) => Some(name),
        }
    }

    #[test]
    fn every_pattern_is_caught() {
        let s = scanner();
        for (name, sample) in samples() {
            let text = format!("some text before {sample} and after");
            assert_eq!(hit_name(&s, &text).as_deref(), Some(name), "{sample}");
        }
    }

    /// `text` as a tool's result holds it: a JSON string, its line breaks, tabs and quotes
    /// escaped.
    fn json_string(text: &str) -> String {
        serde_json::to_string(text).expect("JSON")
    }

    #[test]
    fn credentials_in_a_json_string_are_caught_wherever_an_escape_leaves_them() {
        let s = scanner();
        for (name, sample) in samples() {
            for text in [
                format!("first line\n{sample}\nlast line"),
                format!("a\t{sample}"),
                format!("quoted \"{sample}\""),
            ] {
                let json = json_string(&text);
                assert_eq!(hit_name(&s, &json).as_deref(), Some(name), "{json}");
            }
        }
        // Every character escaped, as `\uXXXX` (an astral one as a surrogate pair) or with an
        // invisible character escaped between.
        let r36 = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
        let token = format!("ghp_{r36}");
        let escaped: String = token
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let split: String = token
            .chars()
            .flat_map(|c| [c.to_string(), "\\u200B".into()])
            .collect();
        let pair = format!("\\ud83d\\ude00{token}");
        for json in [escaped, split, pair] {
            let json = format!("{{\"content\":\"{json}\"}}");
            assert_eq!(
                hit_name(&s, &json).as_deref(),
                Some("github_token"),
                "{json}"
            );
        }
    }

    #[test]
    fn a_json_result_stays_json_when_redacted() {
        let s = scanner();
        let r36 = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
        let file = format!(
            "[db]\npassword = \"{}\"\nAKIA{}\n\tghp_{r36}\n",
            &r36[..16],
            "IOSFODNN7EXAMPLE"
        );
        let result = serde_json::json!({ "content": file }).to_string();
        let Scrubbed::Redacted(redacted, _) = s.scrub(&result) else {
            panic!("not redacted: {result}");
        };
        let content =
            serde_json::from_str::<serde_json::Value>(&redacted).expect("JSON")["content"]
                .as_str()
                .expect("content")
                .to_owned();
        assert_eq!(
            content,
            "[db]\npassword = \"[REDACTED:secret_assignment]\"\n[REDACTED:aws_access_key_id]\n\t\
             [REDACTED:github_token]\n"
        );
    }

    #[test]
    fn a_span_after_an_escapes_backslash_takes_the_backslash() {
        let s = LeakScanner::new([("k", "nasty-secret-value-1")]).expect("scanner");
        // The value as it stands in the text, its `n` the end of the escape `\n`.
        let result = r#"{"a":"x\nasty-secret-value-1","b":"\\nasty-secret-value-1"}"#;
        let Scrubbed::Redacted(redacted, _) = s.scrub(result) else {
            panic!("not redacted: {result}");
        };
        assert_eq!(redacted, r#"{"a":"x[REDACTED:k]","b":"\\[REDACTED:k]"}"#);
        serde_json::from_str::<serde_json::Value>(&redacted).expect("JSON");
    }

    #[test]
    fn a_secret_value_encoded_after_an_escape_is_caught() {
        let value = "Zq9-unusual-value-77";
        let s = LeakScanner::new([("deploy_key", value)]).expect("scanner");
        let b64 = base64::engine::general_purpose::STANDARD.encode(value);
        let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
        for text in [
            format!("line\n{b64}\n"),
            format!("a\t{b64}"),
            format!("line\n{hex}"),
        ] {
            let json = json_string(&text);
            assert_eq!(
                s.scan_outbound(&json),
                Err(Leak::Secret("deploy_key".into())),
                "{json}"
            );
        }
    }

    /// `encoded` wrapped into lines of `width` characters, as `base64` and `xxd -p` print it.
    fn wrap(encoded: &str, width: usize) -> String {
        let lines: Vec<&str> = encoded
            .as_bytes()
            .chunks(width)
            .map(|line| std::str::from_utf8(line).expect("ascii"))
            .collect();
        lines.join("\n") + "\n"
    }

    #[test]
    fn credentials_encoded_across_wrapped_lines_are_caught() {
        let value = "Zq9-unusual-value-77";
        let s = LeakScanner::new([("deploy_key", value)]).expect("scanner");
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let hex = |t: &str| t.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let token = "ghp_a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ";
        let mut split = 0;
        // Every offset of the credential against the line breaks, in `base64`'s 76 columns,
        // PEM's 64 and `xxd -p`'s 60, as plain text and inside a JSON result.
        for pad in 0..60 {
            let before = "x".repeat(pad);
            let config = format!("{before}\ndeploy: {value}\ntoken: {token}\nend\n");
            for (wrapped, name) in [
                (wrap(&b64(&config), 76), "deploy_key"),
                (wrap(&b64(&config), 64), "deploy_key"),
                (wrap(&hex(&config), 60), "deploy_key"),
                (
                    wrap(&b64(&format!("{before} {token} ")), 76),
                    "github_token",
                ),
            ] {
                let lines: Vec<&str> = wrapped.lines().collect();
                // The lines alone, as the run search found them, miss the credential.
                let missed_by_lines = lines.iter().all(|l| s.scrub(l) == Scrubbed::Clean);
                split += usize::from(missed_by_lines);
                for text in [format!("output:\n{wrapped}done"), json_string(&wrapped)] {
                    let Scrubbed::Redacted(redacted, names) = s.scrub(&text) else {
                        panic!("not redacted: {text}");
                    };
                    assert!(names.contains(&name.to_owned()), "{names:?} {text}");
                    // The whole stream goes, every line of it.
                    assert!(lines.iter().all(|l| !redacted.contains(l)), "{redacted}");
                }
            }
        }
        // Most offsets put the credential across a line break, where no line alone shows it.
        assert!(split > 60, "{split}");
    }

    #[test]
    fn wrapped_lines_that_hide_nothing_pass_untouched() {
        let s = LeakScanner::new([("deploy_key", "Zq9-unusual-value-77")]).expect("scanner");
        let b64 = |t: &[u8]| base64::engine::general_purpose::STANDARD.encode(t);
        let certificate = format!(
            "-----BEGIN CERTIFICATE-----\n{}-----END CERTIFICATE-----\n",
            wrap(&b64(&(0..=255u8).cycle().take(900).collect::<Vec<_>>()), 64)
        );
        let prose = wrap(
            &b64(b"nothing secret in here at all, just words. "
                .repeat(20)
                .as_slice()),
            76,
        );
        let digests = format!("{}\n{}\n", "ab12".repeat(16), "cd34".repeat(16));
        for text in [certificate, prose, digests] {
            assert_eq!(s.scrub(&text), Scrubbed::Clean, "{text}");
            assert_eq!(s.scrub(&json_string(&text)), Scrubbed::Clean, "{text}");
        }
    }

    #[test]
    fn obfuscated_credentials_are_caught() {
        let s = scanner();
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let b64url = |t: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t);
        let hex = |t: &str| t.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let pct = |t: &str| t.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
        let zw = |t: &str| {
            let mut out = String::new();
            for (i, c) in t.chars().enumerate() {
                out.push(c);
                let sep = ['\u{200B}', '\u{2060}', '\u{FEFF}', '\u{00AD}', '\u{180E}'];
                out.push(sep[i % sep.len()]);
            }
            out
        };
        for (name, sample) in samples() {
            for (how, text) in [
                ("base64", b64(&sample)),
                ("base64url", b64url(&sample)),
                ("hex", hex(&sample)),
                ("percent", pct(&sample)),
                ("zero-width", zw(&sample)),
                (
                    "in a URL",
                    format!("https://x.test/?q={}&b=1", pct(&sample)),
                ),
                (
                    "in a JSON body",
                    format!("{{\"data\":\"{}\"}}", b64(&sample)),
                ),
            ] {
                assert_eq!(
                    hit_name(&s, &text).as_deref(),
                    Some(name),
                    "{how} of {sample}: {text}"
                );
            }
        }
    }

    #[test]
    fn one_obfuscating_character_is_looked_through_wherever_it_falls() {
        // The run search notes where an obfuscation may begin, 64 bytes at a time and a byte at
        // a time in the tail: one percent-escape or one invisible character, at every place
        // across the blocks and into the tail of ASCII text, is still looked through.
        let s = scanner();
        let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        let (head, tail) = token.split_at(5);
        let escaped = format!("{head}%{:02X}{}", tail.as_bytes()[0], &tail[1..]);
        let hidden = format!("{head}\u{200B}{tail}");
        for obfuscated in [escaped, hidden] {
            for at in 0..140 {
                let text = format!("{}{obfuscated}{}", ".".repeat(at), " ".repeat(at * 7 % 50));
                assert_eq!(
                    hit_name(&s, &text).as_deref(),
                    Some("github_token"),
                    "at {at}: {text}"
                );
            }
        }
    }

    #[test]
    fn every_character_that_renders_as_nothing_is_looked_through() {
        let s = scanner();
        let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        let (head, tail) = token.split_at(9);
        let invisible = (0x200B..=0x200F)
            .chain(0x202A..=0x202E)
            .chain(0x2060..=0x2064)
            .chain(0x2066..=0x206F)
            .chain([
                0x034F, 0x061C, 0x00AD, 0xFEFF, 0x115F, 0x1160, 0x3164, 0xFFA0,
            ])
            .chain(0x180B..=0x180F)
            .chain(0xFE00..=0xFE0F)
            .chain(0xE0000..=0xE007F);
        for code in invisible {
            let c = char::from_u32(code).expect("a character");
            let text = format!("token: {head}{c}{tail}");
            assert_eq!(
                hit_name(&s, &text).as_deref(),
                Some("github_token"),
                "U+{code:04X}"
            );
        }
    }

    #[test]
    fn values_are_redacted_from_what_a_server_sends_and_patterns_left_for_the_component() {
        use base64::Engine as _;
        let value = "S3cr3tV4lue_Zq9xWm2Lp7";
        let s = LeakScanner::new([("tok_a", value)]).expect("scanner");
        let token = format!(
            "ghp_{}",
            "a1B2c3D4e5".repeat(4).get(..36).unwrap_or_default()
        );
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("me:{value}"));
        let echo = format!(
            "{{\"authorization\": \"Bearer {value}\", \"basic\": \"{basic}\", \
             \"issued\": \"{token}\"}}"
        );
        let out = s.redact_values(echo.as_bytes());
        let out = std::str::from_utf8(&out).expect("UTF-8");
        assert!(!out.contains(value) && !out.contains(&basic), "{out}");
        assert!(out.contains("Bearer [REDACTED:tok_a]"), "{out}");
        assert!(
            out.contains(&token),
            "an issued token is the component's: {out}"
        );
        serde_json::from_str::<serde_json::Value>(out).expect("still JSON");
        // Not UTF-8: the plain value, in either case.
        let binary = [
            b"\xff\x00".as_slice(),
            value.to_uppercase().as_bytes(),
            b"\xfe",
        ]
        .concat();
        let out = s.redact_values(&binary);
        assert_eq!(
            &*out,
            [b"\xff\x00".as_slice(), b"[REDACTED:tok_a]", b"\xfe"].concat()
        );
        // Nothing found, or no value to look for: the bytes as they came.
        assert!(matches!(s.redact_values(b"plain"), Cow::Borrowed(_)));
        let none = LeakScanner::patterns_only();
        assert!(!none.has_values() && s.has_values());
        assert!(matches!(
            none.redact_values(echo.as_bytes()),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn an_aws_key_id_is_found_in_either_case_and_in_a_header_name() {
        let s = LeakScanner::patterns_only();
        for text in [
            "k=AKIAIOSFODNN7EXAMPLQ",
            "k=akiaiosfodnn7examplq",
            "x-akiaiosfodnn7examplq-y: 1",
        ] {
            assert_eq!(
                s.scan_outbound(text),
                Err(Leak::Pattern("aws_access_key_id")),
                "{text}"
            );
        }
        assert_eq!(s.scan_outbound("xakiaiosfodnn7examplq"), Ok(()));
    }

    #[test]
    fn a_secret_crossing_the_cut_is_inside_the_scanned_window() {
        let value = "S3cr3tV4lue_Zq9xWm2Lp7";
        let s = LeakScanner::new([("tok_a", value)]).expect("scanner");
        let keep = 100;
        // The value begins just before the cut, and the text runs on for megabytes.
        let text = format!("{}{value}{}", "x".repeat(keep - 5), "y".repeat(4 << 20));
        let window = scan_window(&text, keep);
        assert_eq!(window.len(), keep + CUT_OVERLAP);
        let redacted = s.redact(window, "log entry");
        assert!(redacted[..keep].ends_with("[REDA"), "{}", &redacted[..keep]);
        assert!(!redacted.contains("S3cr3"));
        assert_eq!(scan_window("short", keep), "short");
    }

    #[test]
    fn a_secret_value_in_the_other_ascii_case_is_redacted() {
        let s = LeakScanner::new([("hex", "deadbeefcafe0123456789ab")]).expect("scanner");
        let redacted = s.redact("id DEADBEEFCAFE0123456789AB end", "the result");
        assert_eq!(redacted, "id [REDACTED:hex] end");
    }

    #[test]
    fn a_secret_value_overlapping_anothers_match_is_redacted_too() {
        let s = LeakScanner::new([("a", "XXXXXXXXYYYY"), ("b", "YYYYZZZZZZZZ")]).expect("scanner");
        let text = "<XXXXXXXXYYYYZZZZZZZZ>";
        let redacted = s.redact(text, "the result");
        assert!(!redacted.contains("ZZZZ"), "{redacted}");
        assert!(!redacted.contains("XXXX"), "{redacted}");
        assert!(
            redacted.starts_with('<') && redacted.ends_with('>'),
            "{redacted}"
        );
    }

    #[test]
    fn secret_values_are_caught_by_name_plainly_and_encoded() {
        let value = "Zq9-unusual-value-77";
        let s = LeakScanner::new([("deploy_key", value), ("pin", "1234")]).expect("scanner");
        let b64 = base64::engine::general_purpose::STANDARD.encode(value);
        for text in [
            format!("x {value} y"),
            format!("x={b64}"),
            value.chars().flat_map(|c| [c, '\u{200D}']).collect(),
            value.bytes().map(|b| format!("%{b:02x}")).collect(),
        ] {
            assert_eq!(
                s.scan_outbound(&text),
                Err(Leak::Secret("deploy_key".into())),
                "{text}"
            );
        }
        // Too short to be looked for.
        assert_eq!(s.scan_outbound("code 1234"), Ok(()));
        let err = s.scan_outbound(value).unwrap_err().to_string();
        assert!(!err.contains(value) && err.contains("deploy_key"), "{err}");
        assert!(!format!("{s:?}").contains(value));
    }

    #[test]
    fn ordinary_text_and_code_pass_untouched() {
        let s = LeakScanner::new([("t", "a-long-secret-value")]).expect("scanner");
        // Deterministic pseudo-random bytes standing for an image.
        let mut x: u32 = 0x1234_5678;
        let image: Vec<u8> = (0..48_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 24) as u8
            })
            .collect();
        let image = format!(
            "<img src=\"data:image/png;base64,{}\">",
            base64::engine::general_purpose::STANDARD.encode(&image)
        );
        let corpus = [
            "The token is refreshed every hour; see the docs for the token format.",
            "password: see the docs",
            "Set your password = <your password here>",
            r#"api_key = os.environ["X"]"#,
            r#"api_key = os.environ.get("OPENAI_API_KEY")"#,
            "let secret = config.secret_key_from_env();",
            "request id 550e8400-e29b-41d4-a716-446655440000 failed",
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
            "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "max_tokens = 4096; temperature = 0.7",
            "Authorization: Bearer {{GITHUB_TOKEN}}",
            "sk-learn is a library; so is scikit-learn-intelex",
            "use the class sk-button-primary-large-rounded in the template",
            "postgres://localhost/db and redis://cache:6379/0",
            "-----BEGIN PUBLIC KEY-----",
            "Café — “quoted” text with 100% of the usual punctuation… and %20 escapes",
            "/usr/local/lib/python3.12/site-packages/requests/adapters.py",
            "ThisIsAVeryLongIdentifierName_WithUnderscores_AndMore",
            &image,
        ];
        for text in corpus {
            let shown = &text[..text.len().min(80)];
            assert_eq!(s.scan_outbound(text), Ok(()), "{shown}");
            assert_eq!(s.scrub(text), Scrubbed::Clean, "{shown}");
        }
    }

    #[test]
    fn redaction_text_is_exact() {
        let s = LeakScanner::new([("github_token", "my-precious-token-9")]).expect("scanner");
        let ghp = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
        let text =
            format!("echo: my-precious-token-9, pattern {ghp}, db postgres://u:pw12345@h/db ok");
        assert_eq!(
            s.scrub(&text),
            Scrubbed::Redacted(
                "echo: [REDACTED:github_token], pattern [REDACTED:github_token], db \
                 postgres://u:[REDACTED:connection_string_password]@h/db ok"
                    .into(),
                vec!["connection_string_password".into(), "github_token".into()]
            )
        );
        let zw: String = "my-precious-token-9"
            .chars()
            .flat_map(|c| [c, '\u{200B}'])
            .collect();
        assert_eq!(
            s.scrub(&format!("«{zw}»")),
            Scrubbed::Redacted(
                "«[REDACTED:github_token]»".into(),
                vec!["github_token".into()]
            )
        );
        let b64 = base64::engine::general_purpose::STANDARD.encode("x my-precious-token-9 y");
        assert_eq!(
            s.scrub(&format!("data: {b64}\n")),
            Scrubbed::Redacted(
                "data: [REDACTED:github_token]\n".into(),
                vec!["github_token".into()]
            )
        );
    }

    #[test]
    fn private_keys_block_while_tokens_redact() {
        let s = scanner();
        let text = format!(
            "key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n{}",
            format_args!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
        );
        assert_eq!(s.scrub(&text), Scrubbed::Blocked("private_key".into()));
        let b64 = base64::engine::general_purpose::STANDARD.encode("-----BEGIN PRIVATE KEY-----");
        assert_eq!(s.scrub(&b64), Scrubbed::Blocked("private_key".into()));
        assert!(matches!(
            s.scrub(&format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")),
            Scrubbed::Redacted(..)
        ));
    }

    #[test]
    fn a_mebibyte_is_scanned_and_scrubbed() {
        // Timings belong in benchmarks; this checks the large inputs work and are right.
        let s = LeakScanner::new([("k", "a-long-secret-value")]).expect("scanner");
        let line = "The quick brown fox jumps over the lazy dog; see https://example.com/a?b=c.\n";
        let mut text = line.repeat(1 << 20 >> 6);
        assert_eq!(s.scrub(&text), Scrubbed::Clean);
        text.push_str("a-long-secret-value");
        assert!(matches!(s.scrub(&text), Scrubbed::Redacted(_, ref n) if n == &["k"]));
    }
}
