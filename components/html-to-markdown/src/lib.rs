//! The `html_to_markdown` tool: HTML in, Markdown out. The conversion itself lives in the
//! `markdown` library component (`chitin:markdown/convert`), composed into this one at load.

use chitin_sdk::prelude::*;

mod lib_markdown {
    wit_bindgen::generate!({
        path: "../markdown/wit",
        inline: "package chitin:html-to-markdown;
                 world imports { import chitin:markdown/convert@0.1.0; }",
        generate_all,
    });
}

use lib_markdown::chitin::markdown::convert;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The HTML to convert
    html: String,
    /// The page's URL, used to resolve relative links
    url: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The converted Markdown
    markdown: String,
    /// The article title, when one was found
    title: Option<String>,
    /// Whether a main article was extracted (else the whole page was converted)
    extracted: bool,
}

fn html_to_markdown(args: Args) -> Result<Output, ToolError> {
    if args.html.trim().is_empty() {
        return Err(ToolError::invalid_args("`html` is empty"));
    }
    let converted = convert::html_to_markdown(&args.html, args.url.as_deref())
        .map_err(ToolError::execution_failed)?;
    Ok(Output {
        markdown: converted.markdown,
        title: converted.title,
        extracted: converted.extracted,
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "html_to_markdown",
            "Converts HTML to clean Markdown: extracts the main article (readability), then \
             converts it. Give `url` to resolve relative links.",
            html_to_markdown,
        )
        .read_only()
        .idempotent()
        .output_schema::<Output>(),
    ]
}

chitin_sdk::export_tools!(tools);
