//! The call's output budget: how many bytes of a result reach the agent. The host tells every
//! call in the [`ENV`] environment variable and cuts a longer result, which then is no longer
//! JSON. A tool that can say less (a page of a file, the first matches) fits its result within
//! the budget and says that it did, so the agent gets a whole result and knows where to go on.

use std::io;

use serde::Serialize;

/// The environment variable the host sets to the call's `output_bytes` limit.
pub const ENV: &str = "CHITIN_OUTPUT_BYTES";

/// The call's output budget in bytes; `None` when the host did not say (outside chitin, as in
/// native tests).
pub fn output_bytes() -> Option<usize> {
    std::env::var(ENV).ok()?.parse().ok()
}

/// How many bytes `value` takes as compact JSON, as the SDK returns a tool's result.
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        // A value that cannot be written is never returned either; count it as too long.
        Err(_) => usize::MAX,
    }
}

/// Keep the longest prefix of the list `list` reaches in `out` for which all of `out`, as
/// compact JSON, is at most `budget` bytes; whether any item was dropped (the caller then says
/// the result is cut). A list whose first item alone passes the budget is emptied.
pub fn keep_within<O: Serialize, T: Serialize>(
    out: &mut O,
    list: fn(&mut O) -> &mut Vec<T>,
    budget: usize,
) -> bool {
    if json_len(out) <= budget {
        return false;
    }
    let mut items = std::mem::take(list(out));
    // A list's JSON is its items' JSON between brackets, separated by commas.
    let mut used = json_len(out);
    let mut keep = 0;
    for (i, item) in items.iter().enumerate() {
        let size = json_len(item).saturating_add(usize::from(i > 0));
        if used.saturating_add(size) > budget {
            break;
        }
        used += size;
        keep += 1;
    }
    items.truncate(keep);
    *list(out) = items;
    true
}

/// Cut the text `field` reaches in `out` from its end, at a character boundary, until all of
/// `out`, as compact JSON, is at most `budget` bytes; whether it was cut. The text is emptied if
/// the rest of `out` alone passes the budget.
pub fn cut_text<O: Serialize>(
    out: &mut O,
    field: fn(&mut O) -> &mut String,
    budget: usize,
) -> bool {
    let mut cut = false;
    loop {
        let len = json_len(out);
        if len <= budget {
            return cut;
        }
        let text = field(out);
        if text.is_empty() {
            return cut;
        }
        // Keep the share of the text the budget leaves room for: escapes make some characters
        // longer than others, so this may take another turn, and always keeps less than before.
        let written = json_len(text.as_str());
        let room = written.saturating_sub(len - budget);
        let share = text.len().saturating_mul(room) / written;
        let keep = text.floor_char_boundary(share.min(text.len() - 1));
        text.truncate(keep);
        cut = true;
    }
}

/// A writer that only counts.
struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Found {
        paths: Vec<String>,
        truncated: bool,
    }

    fn found(n: usize) -> Found {
        Found {
            paths: (0..n).map(|i| format!("src/file-{i:04}.rs")).collect(),
            truncated: false,
        }
    }

    #[test]
    fn json_len_is_the_length_serde_json_writes() {
        let out = found(7);
        assert_eq!(json_len(&out), serde_json::to_string(&out).unwrap().len());
        assert_eq!(json_len("a\"b\n"), "\"a\\\"b\\n\"".len());
    }

    #[test]
    fn a_result_within_the_budget_is_left_whole() {
        let mut out = found(10);
        let len = json_len(&out);
        assert!(!keep_within(&mut out, |o| &mut o.paths, len));
        assert_eq!(out.paths.len(), 10);
    }

    #[test]
    fn the_longest_prefix_that_fits_is_kept() {
        for budget in [30, 100, 257, 1000, 4096] {
            let mut out = found(500);
            assert!(keep_within(&mut out, |o| &mut o.paths, budget));
            out.truncated = true;
            let kept = out.paths.len();
            assert!(json_len(&out) <= budget, "{budget}: {}", json_len(&out));
            // One more item would not have fitted (as measured, before the flag was set).
            let more = found(kept + 1);
            assert!(json_len(&more) > budget, "{budget}: {kept} kept");
            assert_eq!(out.paths, found(kept).paths);
        }
    }

    #[derive(Serialize)]
    struct Ran {
        stdout: String,
        truncated: bool,
    }

    #[test]
    fn a_text_is_cut_to_the_longest_start_that_fits() {
        // Plain, escape-heavy, multi-byte and mixed text.
        let texts = [
            "plain words ".repeat(500),
            "\"\\\t\u{1b}[31m".repeat(700),
            "漢字とかな".repeat(400),
            "line \"one\"\n\u{1}é🦀\n".repeat(300),
        ];
        for text in texts {
            for budget in [40, 200, 1000, 4096] {
                let mut out = Ran {
                    stdout: text.clone(),
                    truncated: false,
                };
                assert!(cut_text(&mut out, |o| &mut o.stdout, budget));
                assert!(json_len(&out) <= budget, "{budget}: {}", json_len(&out));
                assert!(text.starts_with(&out.stdout));
                // Not cut much further than needed: within a few characters' escapes.
                if budget >= 200 {
                    assert!(budget - json_len(&out) < 64, "{budget}: {}", json_len(&out));
                }
            }
        }
        let mut short = Ran {
            stdout: "ok".into(),
            truncated: false,
        };
        assert!(!cut_text(&mut short, |o| &mut o.stdout, 100));
        assert_eq!(short.stdout, "ok");
    }

    #[test]
    fn a_budget_below_the_empty_result_empties_the_list() {
        let mut out = found(3);
        assert!(keep_within(&mut out, |o| &mut o.paths, 5));
        assert!(out.paths.is_empty());
    }
}
