//! The search index and BM25 ranking.
//!
//! Each write stores its own postings (term → count) beside its text, under a key no other
//! write uses. Concurrent writes therefore never read-modify-write a shared key and cannot lose
//! each other's updates — `wasi:keyvalue` has no compare-and-swap, and a shared posting list
//! per term would need one (or one durable counter per term per write). A search reads every
//! entry's postings, inverts them for the query's terms and ranks with BM25.
//!
//! The unit ranked is an entry (one write or append); results are grouped by document, each
//! scored by its best live entry. An entry is live unless a later overwrite of its document
//! superseded it.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalisation.
const B: f64 = 0.75;
/// Terms longer than this are cut (they are usually encoded blobs, not words).
const MAX_TERM_CHARS: usize = 48;
/// Characters of context on each side of a snippet's first hit.
const SNIPPET_CONTEXT: usize = 80;

/// What one write stored besides its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The document written.
    #[serde(rename = "p")]
    pub path: String,
    /// Whether it replaced the document (rather than appending to it).
    #[serde(rename = "r")]
    pub replace: bool,
    /// Number of terms in the entry.
    #[serde(rename = "l")]
    pub len: u32,
    /// Count of each term.
    #[serde(rename = "tf")]
    pub terms: BTreeMap<String, u32>,
}

impl Meta {
    /// The postings of `text` written to `path`.
    pub fn of(path: &str, replace: bool, text: &str) -> Self {
        let mut terms = BTreeMap::new();
        let mut len = 0u32;
        for term in tokens(text) {
            *terms.entry(term).or_insert(0) += 1;
            len += 1;
        }
        Self {
            path: path.to_owned(),
            replace,
            len,
            terms,
        }
    }
}

/// Lower-cased alphanumeric runs of at least two characters.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().nth(1).is_some())
        .map(|word| {
            word.chars()
                .take(MAX_TERM_CHARS)
                .flat_map(char::to_lowercase)
                .collect()
        })
}

/// Entries in write order: `(sequence number, meta)`.
pub type Entries = Vec<(u64, Meta)>;

/// For each document, the sequence number from which its entries are live (its last
/// overwrite, or 0).
pub fn live_from(entries: &Entries) -> HashMap<&str, u64> {
    let mut from: HashMap<&str, u64> = HashMap::new();
    for (seq, meta) in entries {
        let start = from.entry(meta.path.as_str()).or_insert(0);
        if meta.replace && *seq > *start {
            *start = *seq;
        }
    }
    from
}

/// Whether the entry `seq` of `meta` is live under `from`.
pub fn is_live(from: &HashMap<&str, u64>, seq: u64, meta: &Meta) -> bool {
    from.get(meta.path.as_str())
        .is_none_or(|start| seq >= *start)
}

/// One ranked document.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The document.
    pub path: String,
    /// Its best entry's BM25 score.
    pub score: f64,
    /// That entry's sequence number.
    pub seq: u64,
}

/// The `limit` best documents for `query` by BM25 over live entries, best first (ties by
/// path), and how many documents matched at all.
pub fn rank(entries: &Entries, query: &str, limit: usize) -> (Vec<Hit>, usize) {
    let query: Vec<String> = {
        let mut seen = HashSet::new();
        tokens(query).filter(|t| seen.insert(t.clone())).collect()
    };
    let from = live_from(entries);
    let live: Vec<&(u64, Meta)> = entries
        .iter()
        .filter(|(seq, meta)| is_live(&from, *seq, meta))
        .collect();
    if live.is_empty() || query.is_empty() {
        return (Vec::new(), 0);
    }
    let n = live.len() as f64;
    let avg_len = live.iter().map(|(_, m)| f64::from(m.len)).sum::<f64>() / n;
    let idf: Vec<f64> = query
        .iter()
        .map(|term| {
            let df = live
                .iter()
                .filter(|(_, m)| m.terms.contains_key(term))
                .count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let mut best: HashMap<&str, Hit> = HashMap::new();
    for (seq, meta) in &live {
        let norm = K1 * (1.0 - B + B * f64::from(meta.len) / avg_len.max(1.0));
        let score: f64 = query
            .iter()
            .zip(&idf)
            .filter_map(|(term, idf)| {
                let tf = f64::from(*meta.terms.get(term)?);
                Some(idf * tf * (K1 + 1.0) / (tf + norm))
            })
            .sum();
        if score <= 0.0 {
            continue;
        }
        let slot = best.entry(meta.path.as_str()).or_insert(Hit {
            path: meta.path.clone(),
            score,
            seq: *seq,
        });
        if score > slot.score {
            slot.score = score;
            slot.seq = *seq;
        }
    }
    let matched = best.len();
    let mut hits: Vec<Hit> = best.into_values().collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
    });
    hits.truncate(limit);
    (hits, matched)
}

/// A short passage of `text` around the first occurrence of a query term.
pub fn snippet(text: &str, query: &str) -> String {
    let lower = text.to_lowercase();
    // Lower-casing can change byte lengths; only use a hit position that maps back cleanly.
    let hit = if lower.len() == text.len() {
        tokens(query).filter_map(|t| lower.find(&t)).min()
    } else {
        None
    }
    .unwrap_or(0);
    let start = floor_char(text, hit.saturating_sub(SNIPPET_CONTEXT));
    let end = floor_char(text, (hit + SNIPPET_CONTEXT * 2).min(text.len()));
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(text[start..end].trim());
    if end < text.len() {
        out.push('…');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(docs: &[(&str, bool, &str)]) -> Entries {
        docs.iter()
            .enumerate()
            .map(|(i, (path, replace, text))| (i as u64 + 1, Meta::of(path, *replace, text)))
            .collect()
    }

    #[test]
    fn tokens_lowercase_and_drop_single_characters() {
        let t: Vec<String> = tokens("Hello, WORLD! a b2 ünïcode x").collect();
        assert_eq!(t, ["hello", "world", "b2", "ünïcode"]);
    }

    #[test]
    fn bm25_prefers_rarer_terms_and_shorter_documents() {
        let entries = corpus(&[
            ("a.md", true, "rust rust rust compiler"),
            (
                "b.md",
                true,
                "rust is a language with a long long long long description",
            ),
            ("c.md", true, "python interpreter"),
            ("d.md", true, "the borrow checker in rust"),
        ]);
        let (hits, matched) = rank(&entries, "rust borrow", 10);
        assert_eq!(matched, 3);
        let order: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(order, ["d.md", "a.md", "b.md"]);
        assert!(hits[0].score > hits[1].score && hits[1].score > hits[2].score);
    }

    #[test]
    fn overwritten_entries_are_not_found() {
        let entries = corpus(&[
            ("a.md", false, "old secret plan"),
            ("a.md", false, "appended line"),
            ("a.md", true, "new content"),
            ("a.md", false, "more plans"),
        ]);
        assert_eq!(rank(&entries, "secret", 10).1, 0);
        assert_eq!(rank(&entries, "appended", 10).1, 0);
        let (hits, _) = rank(&entries, "plans content", 10);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].path, "a.md");
    }

    #[test]
    fn limit_and_empty_queries() {
        let entries = corpus(&[("a", true, "x1 y1"), ("b", true, "x1"), ("c", true, "x1")]);
        assert_eq!(rank(&entries, "x1", 2).0.len(), 2);
        assert_eq!(rank(&entries, "x1", 2).1, 3);
        assert_eq!(rank(&entries, "!!", 5), (vec![], 0));
        assert_eq!(rank(&Vec::new(), "x1", 5), (vec![], 0));
    }

    #[test]
    fn snippets_centre_on_the_first_hit() {
        let text = format!("{} needle {}", "hay ".repeat(100), "straw ".repeat(100));
        let s = snippet(&text, "needle");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("needle"), "{s}");
        assert!(s.len() < 300, "{s}");
        assert_eq!(snippet("short text", "nothing"), "short text");
    }
}
