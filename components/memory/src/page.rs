//! One page of a document's lines: a read returns at most [`MAX_PAGE_BYTES`] of text, fewer
//! when its result would not fit the call's output budget (JSON's escapes make it longer than
//! the text), and says where the next page starts. Without pages a long document came back cut
//! mid-JSON, and its end unreachable.

use chitin_sdk::budget;
use serde::Serialize;

/// Most bytes of text one read returns.
pub const MAX_PAGE_BYTES: usize = 48 * 1024;

/// Lines `offset..offset + limit` of a text, as far as [`MAX_PAGE_BYTES`] allows.
#[derive(Debug, PartialEq, Eq)]
pub struct Page<'a> {
    /// The lines, with their line endings.
    pub text: &'a str,
    /// How many lines (a line cut at the cap counts as one).
    pub lines: u64,
    /// The line to read on from, when more follows.
    pub next: Option<u64>,
}

/// The longest page from line `offset`, at most `limit` lines, whose result as `render` makes
/// it fits `budget` bytes of JSON (any page when there is no budget).
pub fn within<'a, O: Serialize>(
    text: &'a str,
    offset: u64,
    limit: Option<u64>,
    budget: Option<usize>,
    render: impl Fn(Page<'a>) -> O,
) -> O {
    let mut most = MAX_PAGE_BYTES;
    loop {
        let page = page(text, offset, limit, most);
        let shown = page.text.len();
        let out = render(page);
        let Some(budget) = budget else {
            return out;
        };
        let len = budget::json_len(&out);
        if len <= budget || shown == 0 {
            return out;
        }
        // The share of the page the budget holds (escapes are uneven, so this may take another
        // turn), and always less than before.
        most = (shown.saturating_mul(budget) / len).min(shown - 1);
    }
}

/// The page of `text` from line `offset` (0-based), at most `limit` lines and `most` bytes. A
/// single line over `most` is cut at a character boundary, and the next page starts after it.
pub fn page(text: &str, offset: u64, limit: Option<u64>, most: usize) -> Page<'_> {
    let mut lines = text.split_inclusive('\n');
    let skipped: usize = lines
        .by_ref()
        .take(usize::try_from(offset).unwrap_or(usize::MAX))
        .map(str::len)
        .sum();
    let rest = &text[skipped..];
    let lines_wanted = limit.unwrap_or(u64::MAX);
    let (mut end, mut taken) = (0, 0u64);
    for line in rest.split_inclusive('\n') {
        if taken == lines_wanted {
            break;
        }
        if end + line.len() > most {
            if taken == 0 {
                end = rest.floor_char_boundary(most);
                taken = 1;
            }
            break;
        }
        end += line.len();
        taken += 1;
    }
    let more = end < rest.len();
    Page {
        text: &rest[..end],
        lines: taken,
        next: more.then_some(offset + taken),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_one_page() {
        let p = page("a\nb\nc", 0, None, MAX_PAGE_BYTES);
        assert_eq!(
            p,
            Page {
                text: "a\nb\nc",
                lines: 3,
                next: None
            }
        );
        assert_eq!(page("a\nb\nc", 1, Some(1), MAX_PAGE_BYTES).text, "b\n");
        assert_eq!(page("a\nb\nc", 1, Some(1), MAX_PAGE_BYTES).next, Some(2));
        assert_eq!(
            page("a\nb\nc", 7, None, MAX_PAGE_BYTES),
            Page {
                text: "",
                lines: 0,
                next: None
            }
        );
    }

    #[test]
    fn a_long_text_is_read_in_pages_that_join_to_it() {
        let text: String = (0..5000)
            .map(|i| format!("line {i} of the document\n"))
            .collect();
        let (mut joined, mut offset, mut pages) = (String::new(), 0, 0);
        loop {
            let p = page(&text, offset, None, MAX_PAGE_BYTES);
            assert!(p.text.len() <= MAX_PAGE_BYTES);
            joined.push_str(p.text);
            pages += 1;
            match p.next {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(joined, text);
        assert!(pages > 2, "{pages}");
    }

    #[test]
    fn a_line_over_the_cap_is_cut_at_a_character_and_skipped_after() {
        let text = format!("{}\nnext\n", "é".repeat(MAX_PAGE_BYTES));
        let p = page(&text, 0, None, MAX_PAGE_BYTES);
        assert!(p.text.len() <= MAX_PAGE_BYTES && p.text.chars().all(|c| c == 'é'));
        assert_eq!((p.lines, p.next), (1, Some(1)));
        assert_eq!(page(&text, 1, None, MAX_PAGE_BYTES).text, "next\n");
    }

    #[derive(Serialize)]
    struct Read<'a> {
        content: &'a str,
        next_offset: Option<u64>,
    }

    #[test]
    fn an_escape_heavy_text_is_read_in_pages_that_fit_the_budget() {
        let text: String = (0..3000)
            .map(|i| format!("{i}: \"quoted\"\t\\ \u{1} {}\n", "\"".repeat(i % 40)))
            .collect();
        for budget in [2048, 65_536] {
            let (mut joined, mut offset, mut pages) = (String::new(), 0, 0);
            loop {
                let out = within(&text, offset, None, Some(budget), |p| Read {
                    content: p.text,
                    next_offset: p.next,
                });
                let len = budget::json_len(&out);
                assert!(len <= budget, "{len} over {budget}");
                joined.push_str(out.content);
                pages += 1;
                match out.next_offset {
                    Some(next) => offset = next,
                    None => break,
                }
            }
            assert_eq!(joined, text);
            assert!(pages > text.len() / budget, "{pages} pages for {budget}");
        }
        // Without a budget, the page is the plain one.
        let whole = within(&text, 0, None, None, |p| p.text.len());
        assert_eq!(whole, page(&text, 0, None, MAX_PAGE_BYTES).text.len());
    }
}
