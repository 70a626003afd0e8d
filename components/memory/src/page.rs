//! One page of a document's lines: a read returns at most [`MAX_PAGE_BYTES`] of text, so its
//! result fits the default 64 KiB output with room for JSON's escapes, and says where the next
//! page starts. Without pages a long document came back cut mid-JSON, and its end unreachable.

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

/// The page of `text` from line `offset` (0-based), at most `limit` lines. A single line over
/// the cap is cut at a character boundary, and the next page starts after it.
pub fn page(text: &str, offset: u64, limit: Option<u64>) -> Page<'_> {
    let mut lines = text.split_inclusive('\n');
    let skipped: usize = lines
        .by_ref()
        .take(usize::try_from(offset).unwrap_or(usize::MAX))
        .map(str::len)
        .sum();
    let rest = &text[skipped..];
    let most = limit.unwrap_or(u64::MAX);
    let (mut end, mut taken) = (0, 0u64);
    for line in rest.split_inclusive('\n') {
        if taken == most {
            break;
        }
        if end + line.len() > MAX_PAGE_BYTES {
            if taken == 0 {
                end = rest.floor_char_boundary(MAX_PAGE_BYTES);
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
        let p = page("a\nb\nc", 0, None);
        assert_eq!(
            p,
            Page {
                text: "a\nb\nc",
                lines: 3,
                next: None
            }
        );
        assert_eq!(page("a\nb\nc", 1, Some(1)).text, "b\n");
        assert_eq!(page("a\nb\nc", 1, Some(1)).next, Some(2));
        assert_eq!(
            page("a\nb\nc", 7, None),
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
            let p = page(&text, offset, None);
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
        let p = page(&text, 0, None);
        assert!(p.text.len() <= MAX_PAGE_BYTES && p.text.chars().all(|c| c == 'é'));
        assert_eq!((p.lines, p.next), (1, Some(1)));
        assert_eq!(page(&text, 1, None).text, "next\n");
    }
}
