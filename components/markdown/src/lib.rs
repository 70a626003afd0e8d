//! The `markdown` library component: exports `chitin:markdown/convert`, HTML to Markdown in two
//! steps — readability extraction of the main content (`dom_smoothie`, a port of Mozilla's
//! Readability), then conversion of that HTML (`htmd`). A page with no recognisable article is
//! converted whole, so nothing is silently dropped.

wit_bindgen::generate!({ path: "wit", world: "library" });

use exports::chitin::markdown::convert::{Converted, Guest};

struct Markdown;

impl Guest for Markdown {
    fn html_to_markdown(html: String, url: Option<String>) -> Result<Converted, String> {
        let article = dom_smoothie::Readability::new(html.as_str(), url.as_deref(), None)
            .and_then(|mut r| r.parse())
            .ok()
            .filter(|a| !a.text_content.trim().is_empty());
        let (title, source, extracted) = match &article {
            Some(a) => (
                Some(a.title.clone()).filter(|t| !t.trim().is_empty()),
                a.content.to_string(),
                true,
            ),
            None => (None, html, false),
        };
        let converter = htmd::HtmlToMarkdown::builder()
            .skip_tags(vec!["script", "style", "noscript", "template", "iframe"])
            .build();
        let markdown = converter
            .convert(&source)
            .map_err(|e| format!("cannot convert the HTML: {e}"))?;
        Ok(Converted {
            title,
            markdown: markdown.trim().to_owned(),
            extracted,
        })
    }
}

export!(Markdown);
