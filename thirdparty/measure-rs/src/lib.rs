//! acme/measure: plain typed WIT exports, served by chitin as one tool per function.

wit_bindgen::generate!({ path: "wit", world: "measure" });

use exports::acme::measure::stats::{self, Point, Summary};

struct Measure;

impl Guest for Measure {
    fn greet(name: String, excited: Option<bool>) -> String {
        let end = if excited.unwrap_or(false) { "!" } else { "." };
        format!("Hello, {name}{end}")
    }

    fn parse_int(text: String) -> Result<i64, String> {
        text.trim()
            .parse()
            .map_err(|e| format!("`{text}` is not a decimal integer: {e}"))
    }

    fn repeat(text: String, times: u8) -> Result<String, String> {
        if times > 100 {
            return Err(format!("times is {times}, more than 100"));
        }
        Ok(text.repeat(usize::from(times)))
    }
}

impl stats::Guest for Measure {
    fn summarize(numbers: Vec<i64>) -> Summary {
        let total = numbers.iter().fold(0i64, |a, n| a.saturating_add(*n));
        let count = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
        Summary {
            count,
            total,
            mean: (count > 0).then(|| total as f64 / f64::from(count)),
        }
    }

    fn manhattan(a: Point, b: Point) -> u64 {
        u64::from(a.x.abs_diff(b.x)) + u64::from(a.y.abs_diff(b.y))
    }
}

export!(Measure);
